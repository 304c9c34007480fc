"""The operators panel's figures: what this process's exchange and its metrics hold right now.

Live runs and stream seats are counted from the exchange itself (so they show without the
``prometheus`` extra); push deliveries, drops and refusals are the Prometheus counters, read
through ``collect()`` (process-wide: several apps in one process add to the same series, and
under several gunicorn workers each answers for its own process). Store and bus health is the
health route's probe (``ops/health.py``), bounded to a second each.
"""

from __future__ import annotations

import collections
import os
import typing as t

from ..ops.health import check
from ..ops.metrics import PrometheusRecorder, flush, recorder
from ..push.webhooks import PushSender

if t.TYPE_CHECKING:
    from ..exchange.methods import Exchange


def _samples(metric: t.Any, suffix: str = "_total") -> dict[tuple[str, ...], float]:
    """label values -> value of one metric's samples (``collect()``: prometheus_client's
    public reading of a metric)."""
    out: dict[tuple[str, ...], float] = {}
    for family in metric.collect():
        for sample in family.samples:
            if sample.name.endswith(suffix) or not suffix:
                out[tuple(sample.labels.values())] = sample.value
    return out


def _by_label(metric: t.Any) -> dict[str, int]:
    return {"/".join(labels) or "all": int(value) for labels, value in _samples(metric).items()}


def counters(enabled: bool) -> dict[str, t.Any] | None:
    """The Prometheus counters the panel shows, or None when metrics are off or missing."""
    found = recorder(enabled)
    if not isinstance(found, PrometheusRecorder):
        return None
    flush()  # the runs' waiting events, before the series are read
    series = found.series  # every agent's series (labelled agent/...) and the shared ones
    return {
        "runsStarted": sum(_by_label(series.runs_started).values()),
        "runsSettled": _by_label(series.runs_settled),
        "runRefusals": _by_label(series.run_refusals),
        "seatRefusals": sum(_by_label(series.seat_refusals).values()),
        "pushDeliveries": _by_label(series.push),
        "pushDropped": _by_label(series.push_drops),
        "retentionTrimmed": _by_label(series.trims),
    }


def figures(exchange: Exchange) -> dict[str, t.Any]:
    """Everything the panel shows, JSON-ready (no owner ids, no task ids)."""
    runs = exchange.live_runs()
    by_skill = collections.Counter(run.record.skill for run in runs)
    push = exchange.push if isinstance(exchange.push, PushSender) else None
    settings = exchange.settings
    return {
        "pid": os.getpid(),
        "closing": exchange.closing,
        "runs": {
            "live": len(runs),
            "bySkill": dict(sorted(by_skill.items())),
            "perOwnerCap": settings.max_concurrent_runs_per_owner,
        },
        "streams": {
            "seatsInUse": exchange.seats.in_use(),
            "perOwnerCap": settings.max_stream_seats_per_owner,
        },
        "push": None
        if push is None
        else {
            "inFlight": push.dispatcher.in_flight,
            "waiting": push.dispatcher.waiting,
        },
        "health": check(exchange),
        "metrics": counters(settings.metrics),
    }
