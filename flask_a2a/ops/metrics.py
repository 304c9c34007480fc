"""Prometheus metrics: runs, stream seats, run-cap refusals, push deliveries, store calls, trims.

The ``prometheus`` extra (``prometheus_client``), imported on first use. The metrics live in
``prometheus_client``'s default registry, once per process (the Prometheus norm: several apps in
one process add to the same series). Labels are bounded: agent names, skill ids, states,
operations, limits and reasons, never an owner or a task id.

:data:`NOOP` is what every part of the exchange holds when the extra is missing or
``A2A_METRICS`` is off: its methods do nothing. Under gunicorn with several workers set
``PROMETHEUS_MULTIPROC_DIR`` (an empty directory) before gunicorn starts and put
``from flask_a2a.gunicorn import child_exit`` in ``gunicorn.conf.py``; :func:`metrics_view`
then sums every worker's samples (docs/operations.md).

A run's series (started, live, settled, duration) are its one start and one end: in one
process (no ``PROMETHEUS_MULTIPROC_DIR``) each is noted in a queue that costs the run one call,
and applied to the series, counted together, before anything reads them (every scrape of the
registry, the console's panel) or once :data:`FLUSH_AT` are waiting; a run's five updates
through ``prometheus_client`` cost it some thirty calls. Several processes write their samples
to files another process reads: each update is made as it happens there.
"""

from __future__ import annotations

import collections
import os
import threading
import typing as t

if t.TYPE_CHECKING:
    from flask import Response

    from ..protocol.model import TaskState

#: Run durations, seconds: a quick echo to a long job.
RUN_BUCKETS: t.Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
#: Store calls, seconds.
STORE_BUCKETS: t.Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
)  # fmt: skip


class Recorder:
    """The no-op recorder (the extra missing, or ``A2A_METRICS`` off)."""

    enabled = False

    def run_started(self, skill: str) -> None:
        pass

    def run_settled(self, skill: str, state: TaskState, seconds: float) -> None:
        pass

    def run_refused(self, limit: str) -> None:
        pass

    def seat_taken(self) -> None:
        pass

    def seat_released(self) -> None:
        pass

    def seat_refused(self) -> None:
        pass

    def push_sent(self, ok: bool) -> None:
        pass

    def push_dropped(self, reason: str) -> None:
        pass

    def push_outcome(self, outcome: str) -> None:
        """A queued notification's fate beyond one attempt: ``retried`` or ``given_up``."""

    def store_call(self, operation: str, seconds: float) -> None:
        pass

    def trimmed(self, kind: str, count: int) -> None:
        pass


NOOP: t.Final = Recorder()


#: Run events waiting in one process before they are applied without a reader asking.
FLUSH_AT: t.Final = 512
#: The state slot of a queued retention trim: ``(kind, TRIMMED, count)``.
TRIMMED: t.Final = "trimmed"


class Series:
    """The process's metrics in ``prometheus_client``'s default registry, made once.

    A run's, a stream seat's and a push's series carry the ``agent`` label (the name of the
    ``A2A`` instance: several agents may serve one app, ``flask_a2a.agents``); the store and
    retention series do not (the agents of an app share one store).
    """

    def __init__(self) -> None:
        from prometheus_client import REGISTRY, Counter, Gauge, Histogram

        # Registered before the series, so a scrape collects it first: it applies the runs'
        # waiting events, then the series are read.
        REGISTRY.register(_Flusher())
        self.runs_live = Gauge(
            "a2a_runs_live", "Runs in flight", ["agent", "skill"], multiprocess_mode="livesum"
        )
        self.runs_started = Counter("a2a_runs_started", "Runs started", ["agent", "skill"])
        self.runs_settled = Counter(
            "a2a_runs_settled",
            "Runs ended, by the state their task reached",
            ["agent", "skill", "state"],
        )
        self.run_seconds = Histogram(
            "a2a_run_duration_seconds", "Run duration", ["agent", "skill"], buckets=RUN_BUCKETS
        )
        self.run_refusals = Counter(
            "a2a_run_refusals", "Runs refused at a cap (-32004)", ["agent", "limit"]
        )
        self.seats = Gauge(
            "a2a_stream_seats_in_use", "Stream seats held", ["agent"], multiprocess_mode="livesum"
        )
        self.seat_refusals = Counter("a2a_stream_seat_refusals", "Streams refused (429)", ["agent"])
        self.push = Counter("a2a_push_deliveries", "Push deliveries made", ["agent", "outcome"])
        self.push_drops = Counter(
            "a2a_push_dropped", "Push events dropped before delivery", ["agent", "reason"]
        )
        self.store_seconds = Histogram(
            "a2a_store_call_seconds", "Store call latency", ["operation"], buckets=STORE_BUCKETS
        )
        self.trims = Counter(
            "a2a_retention_trimmed_tasks", "Tasks removed or canceled by retention", ["kind"]
        )


class PrometheusRecorder(Recorder):
    """Records one agent's events into the process's :class:`Series`."""

    enabled = True

    def __init__(self, series: Series | None = None, agent: str = "default") -> None:
        self.series = series if series is not None else Series()
        self.agent = agent
        #: Events not applied yet: (skill, None, 0) a run's start, (skill, state, seconds) its
        #: end, (kind, TRIMMED, count) a retention trim. None: several processes, each event
        #: applied as it happens.
        self._events: collections.deque[tuple[str, TaskState | str | None, float]] | None = (
            None if _multiprocess() else collections.deque()
        )
        #: (metric, label values) -> its child: ``labels()`` builds a key and takes a lock on
        #: every call, and the label values (agents, skills, states, operations, kinds) are few.
        self._children: dict[tuple[t.Any, tuple[str, ...]], t.Any] = {}
        #: skill -> its (started, live, duration) children; (skill, state) -> settled's.
        self._runs: dict[str, tuple[t.Any, t.Any, t.Any]] = {}
        self._settled: dict[tuple[str, TaskState], t.Any] = {}
        #: operation -> its store-call latency child.
        self._store_calls: dict[str, t.Any] = {}

    def _child(self, metric: t.Any, *labels: str) -> t.Any:
        """``metric.labels(*labels)``, looked up once."""
        child = self._children.get((metric, labels))
        if child is None:
            child = self._children[(metric, labels)] = metric.labels(*labels)
        return child

    def _run_children(self, skill: str) -> tuple[t.Any, t.Any, t.Any]:
        """A skill's started, live and duration children, looked up once (every run's)."""
        children = self._runs.get(skill)
        if children is None:
            series, agent = self.series, self.agent
            children = self._runs[skill] = (
                self._child(series.runs_started, agent, skill),
                self._child(series.runs_live, agent, skill),
                self._child(series.run_seconds, agent, skill),
            )
        return children

    def run_started(self, skill: str) -> None:
        events = self._events
        if events is not None:
            events.append((skill, None, 0.0))
            return
        started, live, _ = self._run_children(skill)
        started.inc()
        live.inc()

    def run_settled(self, skill: str, state: TaskState, seconds: float) -> None:
        events = self._events
        if events is not None:
            events.append((skill, state, seconds))
            if len(events) >= FLUSH_AT:
                self.flush()
            return
        _, live, duration = self._run_children(skill)
        live.dec()
        self._settled_child(skill, state).inc()
        duration.observe(seconds)

    def _settled_child(self, skill: str, state: TaskState) -> t.Any:
        settled = self._settled.get((skill, state))
        if settled is None:
            settled = self._settled[(skill, state)] = self._child(
                self.series.runs_settled, self.agent, skill, state_label(state)
            )
        return settled

    def flush(self) -> None:
        """Apply the waiting run events, each once (a deque's ``popleft`` is atomic, so two
        flushes at once share them), counted together: a start and an end of the same skill
        leave its live gauge as it was."""
        events = self._events
        if not events:
            return
        live: collections.Counter[str] = collections.Counter()
        started: collections.Counter[str] = collections.Counter()
        settled: collections.Counter[tuple[str, TaskState]] = collections.Counter()
        trimmed: collections.Counter[str] = collections.Counter()
        observe: dict[str, t.Callable[[float], None]] = {}
        while True:
            try:
                skill, state, seconds = events.popleft()
            except IndexError:
                break
            if state is None:
                started[skill] += 1
                live[skill] += 1
            elif state is TRIMMED:
                trimmed[skill] += int(seconds)  # (kind, TRIMMED, count)
            else:
                live[skill] -= 1
                settled[(skill, state)] += 1  # type: ignore[index]
                duration = observe.get(skill)
                if duration is None:
                    duration = observe[skill] = self._run_children(skill)[2].observe
                duration(seconds)
        for kind, count in trimmed.items():
            self._child(self.series.trims, kind).inc(count)
        for skill, count in started.items():
            self._run_children(skill)[0].inc(count)
        for skill, change in live.items():
            if change:
                self._run_children(skill)[1].inc(change)
        for (skill, state), count in settled.items():
            self._settled_child(skill, state).inc(count)

    def run_refused(self, limit: str) -> None:
        self._child(self.series.run_refusals, self.agent, limit).inc()

    def seat_taken(self) -> None:
        self._child(self.series.seats, self.agent).inc()

    def seat_released(self) -> None:
        self._child(self.series.seats, self.agent).dec()

    def seat_refused(self) -> None:
        self._child(self.series.seat_refusals, self.agent).inc()

    def push_sent(self, ok: bool) -> None:
        self._child(self.series.push, self.agent, "sent" if ok else "failed").inc()

    def push_dropped(self, reason: str) -> None:
        self._child(self.series.push_drops, self.agent, reason).inc()

    def push_outcome(self, outcome: str) -> None:
        self._child(self.series.push, self.agent, outcome).inc()

    def store_call(self, operation: str, seconds: float) -> None:
        child = self._store_calls.get(operation)
        if child is None:
            child = self._store_calls[operation] = self._child(self.series.store_seconds, operation)
        child.observe(seconds)

    def trimmed(self, kind: str, count: int) -> None:
        if not count:
            return
        events = self._events
        if events is not None:  # one per settle at the bound: queued with the runs' events
            events.append((kind, TRIMMED, count))
            return
        self._child(self.series.trims, kind).inc(count)


def state_label(state: TaskState) -> str:
    """``TASK_STATE_COMPLETED`` -> ``completed``."""
    return state.name.lower()


_series: Series | None = None
#: One recorder per agent name (the names are an app's agents: few, fixed at startup).
_made: dict[str, PrometheusRecorder] = {}
_lock = threading.Lock()


def recorder(enabled: bool = True, agent: str = "default") -> Recorder:
    """``agent``'s recorder, or :data:`NOOP` when off or ``prometheus_client`` is missing."""
    global _series
    if not enabled:
        return NOOP
    made = _made.get(agent)
    if made is None:
        with _lock:
            made = _made.get(agent)
            if made is None:
                try:
                    if _series is None:
                        _series = Series()
                except ImportError:
                    return NOOP
                made = _made[agent] = PrometheusRecorder(_series, agent)
    return made


def _multiprocess() -> bool:
    """Several processes write their samples to files (``PROMETHEUS_MULTIPROC_DIR``)."""
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def flush() -> None:
    """Apply every agent's waiting run events (see the module's docstring)."""
    for made in list(_made.values()):
        made.flush()


class _Flusher:
    """A collector of no series of its own: collecting it applies the waiting run events,
    so whatever reads the registry (our view, the host's own exporter) reads them."""

    def describe(self) -> list[t.Any]:
        return []

    def collect(self) -> list[t.Any]:
        flush()
        return []


def exposition() -> tuple[bytes, str]:
    """The metrics text and its content type: every worker's in multiprocess mode."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

    if _multiprocess():
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def metrics_view() -> Response:
    """A Flask view answering the Prometheus text format; register it where the host wants,
    behind its own auth if it chooses (docs/operations.md), or set ``A2A_METRICS_PATH``."""
    from flask import Response

    body, content_type = exposition()
    return Response(body, 200, {"Content-Type": content_type, "Cache-Control": "no-store"})
