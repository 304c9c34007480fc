"""The Markdown report: one table of servers, the ratios against their targets, streams, lists."""

from __future__ import annotations

import typing as t

Row = dict[str, t.Any]

HEADER: t.Final = (
    "| server | store | workers | c=1 req/s | c=1 p50 ms | c=1 p99 ms | c=32 req/s "
    "| c=32 p50 ms | c=32 p99 ms | server CPU ms/req | RSS MB | other load (cores) | bad |"
)
ALIGN: t.Final = "| --- | --- |" + " --: |" * 11


def _row(rows: list[Row], name: str) -> Row | None:
    return next((r for r in rows if r["name"] == name), None)


def _ratio(a: Row | None, b: Row | None, key: str = "c32") -> float | None:
    if a is None or b is None or not b[key]["rps"]:
        return None
    return float(a[key]["rps"]) / float(b[key]["rps"])


def _cost_ratio(a: Row | None, b: Row | None) -> float | None:
    """b's server CPU per request over a's: the throughput ratio a saturated core would give."""
    if a is None or b is None or not a["c32"]["server_cpu_ms_per_req"]:
        return None
    return float(b["c32"]["server_cpu_ms_per_req"]) / float(a["c32"]["server_cpu_ms_per_req"])


def _fmt(value: float | None, pct: bool = True) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:.0f} %" if pct else f"{value:.2f}x"


def _verdict(value: float | None, target: float, pct: bool = True) -> str:
    if value is None:
        return "n/a (row skipped)"
    met = "met" if value >= target else "MISSED"
    return f"{_fmt(value, pct)} (target >= {_fmt(target, pct)}: {met})"


def _table(rows: list[Row]) -> list[str]:
    out = [HEADER, ALIGN]
    for r in rows:
        c1, c32 = r["c1"], r["c32"]
        bad = c1["bad"] + c32["bad"] + c1["socket_errors"] + c32["socket_errors"]
        other = max(c1["other_load_cores"], c32["other_load_cores"])
        cells = [
            r["label"], r["store"], str(r["workers"]),
            f"{c1['rps']:.0f}", f"{c1['p50_ms']:.2f}", f"{c1['p99_ms']:.2f}",
            f"{c32['rps']:.0f}", f"{c32['p50_ms']:.2f}", f"{c32['p99_ms']:.2f}",
            f"{c32['server_cpu_ms_per_req']:.3f}", f"{r['rss_mb']:.1f}", f"{other:.2f}",
            str(bad),
        ]  # fmt: skip
        out.append("| " + " | ".join(cells) + " |")
    return out


def _target(
    label: str,
    a: Row | None,
    b: Row | None,
    target: float,
    c1: float | None = None,
    pct: bool = True,
) -> str:
    """One ratio line: c=32 against ``target`` (and c=1 against ``c1`` when it has one)."""
    line = f"- {label}: {_verdict(_ratio(a, b), target, pct)}"
    if c1 is not None:
        line += f"; c=1: {_verdict(_ratio(a, b, 'c1'), c1, pct)}"
    else:
        line += f" [c=1: {_fmt(_ratio(a, b, 'c1'), pct)}]"
    return line + f" [CPU: {_fmt(_cost_ratio(a, b), pct)}]"


#: Issue 19's targets (and the SDK's from before): label, row, the row it is held against, the
#: c=32 target, the c=1 target (None: c=1 is only shown), percent (else a multiple).
TARGETS: t.Final = (
    (
        "flask_a2a (memory, 1 worker) / bare Flask (1 worker)",
        "a2a-memory-1w",
        "bare-1w",
        0.6,
        0.6,
        True,
    ),
    (
        "flask_a2a (memory, 2 workers) / bare Flask (2 workers)",
        "a2a-memory-2w",
        "bare-2w",
        0.6,
        0.6,
        True,
    ),
    (
        "flask_a2a (PostgreSQL, 1 worker) / bare Flask (1 worker)",
        "a2a-postgres-1w",
        "bare-1w",
        0.4,
        0.2,
        True,
    ),
    (
        "flask_a2a (MariaDB, 1 worker) / bare Flask (1 worker)",
        "a2a-mariadb-1w",
        "bare-1w",
        0.25,
        None,
        True,
    ),
    (
        "flask_a2a REST (memory, 1 worker) / JSON-RPC (memory, 1 worker)",
        "a2a-rest-memory-1w",
        "a2a-memory-1w",
        0.95,
        None,
        True,
    ),
    (
        "flask_a2a with the Redis bus / without (memory, 1 worker)",
        "a2a-redis-memory-1w",
        "a2a-memory-1w",
        0.95,
        None,
        True,
    ),
    (
        "flask_a2a (memory, 1 worker) / a2a-sdk (1 uvicorn worker)",
        "a2a-memory-1w",
        "sdk-1w",
        4.0,
        None,
        False,
    ),
    # Issue 23: run leases cost a blocking send on PostgreSQL under 5 %.
    (
        "with run leases / without (PostgreSQL, 1 worker)",
        "leases-on-1w",
        "leases-off-1w",
        0.95,
        0.95,
        True,
    ),
    (
        "with run leases / without, every change written (PostgreSQL, 1 worker)",
        "leases-written-on-1w",
        "leases-written-off-1w",
        0.95,
        0.95,
        True,
    ),
)


def _ratios(rows: list[Row]) -> list[str]:
    intro = (
        "Requests/s at concurrency 32 (and at c=1 where the target names it); in brackets the "
        "ratio of server CPU per request at c=32, which other load on the machine disturbs less."
    )
    lines = ["## Ratios", "", intro, ""]
    for label, name, against, target, c1, pct in TARGETS:
        a = _row(rows, name)
        if name == "a2a-redis-memory-1w" and a is None:
            continue
        line = _target(label, a, _row(rows, against), target, c1, pct)
        if a is not None and "redis_commands" in a:
            line += (
                f"; Redis commands during its measured runs: {a['redis_commands']} for "
                f"{a['redis_requests']} blocking sends "
                f"({a['redis_commands_per_request']} per send; target 0)"
            )
        lines.append(line)
    return lines


#: KB of worker RSS per idle stream: the target at each count the full run measures.
STREAM_TARGETS_KB: t.Final = {2_000: 20.0, 10_000: 16.0}


def _streams(s: dict[str, t.Any]) -> list[str]:
    out = [
        "## Idle streams on one gevent worker",
        "",
        (
            f"One held task; seats and run caps raised; streams opened in turn up to each count "
            f"(worker RSS {s['rss_before_mb']} MB before the first)."
        ),
        "",
    ]
    held = 0
    for step in s["sizes"]:
        n, kb = step["streams"], step["kb_per_stream"]
        more = f"{n - held:,} more" if held else "all"
        held = n
        target = STREAM_TARGETS_KB.get(n)
        verdict = (
            f"target <= {target:g} KB: {'met' if kb <= target else 'MISSED'}"
            if target is not None
            else "no target at this count"
        )
        out += [
            (
                f"- **{n:,} streams**: {step['opened']} open ({more} in {step['open_s']} s); "
                f"worker RSS {step['rss_after_mb']} MB: **{kb} KB per stream** "
                f"({verdict}); {step['kb_per_stream_at_open']} KB right after opening; "
                f"{step['alive_after_two_keepalives']} got two `: keep-alive` in the next two "
                f"{s['keepalive_s']} s intervals"
            ),
        ]
    out.append(
        f"- {s['got_final_event']} of {s['streams']} got the COMPLETED event once the gate opened"
    )
    return out


def _listing(lst: dict[str, t.Any], database: str = "PostgreSQL") -> list[str]:
    small, large = lst["sizes"]
    a, b = lst[str(small)], lst[str(large)]
    ratio = lst["ratio"]
    met = "met" if ratio is not None and ratio <= 2 else "MISSED"
    return [
        f"## ListTasks on {database} (pageSize=50, concurrency 1, one worker)",
        "",
        f"- owner with {small:,} tasks: p50 {a['p50_ms']:.2f} ms, p99 {a['p99_ms']:.2f} ms",
        f"- owner with {large:,} tasks: p50 {b['p50_ms']:.2f} ms, p99 {b['p99_ms']:.2f} ms",
        f"- ratio {ratio}x (target within 2x: {met}); seeded in {lst['seed_s']} s",
    ]


def _fleet(f: dict[str, t.Any]) -> list[str]:
    out = [
        "## The fleet: two replicas on PostgreSQL",
        "",
        (
            "Event latency across replicas: chunks written on replica A every 20 ms, a "
            "SubscribeToTask on replica B (one gevent worker each)."
        ),
        "",
        "| bus | chunks | reached B | events | p50 ms | p99 ms |",
        "| --- | --: | --: | --: | --: | --: |",
    ]
    for label, row in f.get("latency", {}).items():
        out.append(f"| {label} | {row['chunks']} | {row['received']} | {row['events']} | "
                   f"{row['p50_ms']} | {row['p99_ms']} |")  # fmt: skip
    if f.get("throughput"):
        out += ["", ("Echo SendMessage on PostgreSQL, concurrency 32 in all (split over the "
                "replicas, one generator process each):"), "",
                "| bus | replicas | req/s | p50 ms | p99 ms | bad |",
                "| --- | --: | --: | --: | --: | --: |"]  # fmt: skip
        for row in f["throughput"]:
            out.append(f"| {row['bus']} | {row['replicas']} | {row['rps']:.0f} | "
                       f"{row['p50_ms']} | {row['p99_ms']} | {row['bad']} |")  # fmt: skip
    return out


def markdown(results: dict[str, t.Any]) -> str:
    env = results.get("environment", {})
    rows: list[Row] = results.get("rows", [])
    intro = (
        f"{env.get('date', '')}; {env.get('cpu', '?')}, {env.get('cores', '?')} cores "
        f"({env.get('shared_machine', '')}); Python {env.get('python', '')}, Flask "
        f"{env.get('flask', '')}, gunicorn {env.get('gunicorn', '')} `-k gevent` (gevent "
        f"{env.get('gevent', '')}); a2a-sdk / uvicorn {env.get('sdk', '') or 'n/a'}; load "
        f"generator {env.get('generator', '')} (1 thread, keep-alive); run took "
        f"{results.get('elapsed_s', '?')} s. All on 127.0.0.1, one server at a time."
    )
    plan = results.get("plan") or {}
    if plan:
        intro += (
            f" Each load level: {plan['repeats']} run(s) of {plan['duration']:.0f} s after a "
            f"{plan['warmup']} s warm-up, the best reported."
        )
    out = ["# flask_a2a benchmark", "", intro, ""]
    out += _table(rows)
    out += [""] + _ratios(rows)
    if results.get("streams"):
        out += [""] + _streams(results["streams"])
    if results.get("list"):
        out += [""] + _listing(results["list"])
    if results.get("list_mariadb"):
        out += [""] + _listing(results["list_mariadb"], "MariaDB")
    if results.get("fleet"):
        out += [""] + _fleet(results["fleet"])
    skipped = results.get("skipped") or []
    if skipped:
        out += ["", "## Skipped", ""] + [f"- {s['name']}: {s['reason']}" for s in skipped]
    bad = [
        f"- {r['name']} c={c}: {r[f'c{c}']['bad']} bad, e.g. {r[f'c{c}']['sample_bad']}"
        for r in rows
        for c in (1, 32)
        if r[f"c{c}"]["bad"]
    ]
    if bad:
        out += ["", "## Bad answers", ""] + bad
    return "\n".join(out) + "\n"


def summary(runs: list[dict[str, t.Any]]) -> str:
    """One table of every target over several runs (``python bench/report.py a.json b.json``):
    the VM drifts from run to run, so a target is judged on all of them."""
    names = [
        f"run {i + 1} ({r.get('environment', {}).get('date', '?')[11:]})"
        for i, r in enumerate(runs)
    ]
    out = ["| target | " + " | ".join(names) + " |", "| --- |" + " --: |" * len(runs)]
    lines = []  # (label, row, against, metric, pct): each target's c=32, c=1 and CPU ratio
    for label, name, against, target, c1, pct in TARGETS:
        lines.append((f"{label}, c=32 (>= {_fmt(target, pct)})", name, against, "c32", pct))
        if c1 is not None:
            lines.append((f"{label}, c=1 (>= {_fmt(c1, pct)})", name, against, "c1", pct))
        lines.append((f"{label}, server CPU per request", name, against, "cpu", pct))
    for label, name, against, metric, pct in lines:
        cells = []
        for run in runs:
            rows = run.get("rows", [])
            a, b = _row(rows, name), _row(rows, against)
            value = _cost_ratio(a, b) if metric == "cpu" else _ratio(a, b, metric)
            cells.append(_fmt(value, pct))
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    for count, target in STREAM_TARGETS_KB.items():
        cells = []
        for run in runs:
            sizes = (run.get("streams") or {}).get("sizes", [])
            kb = next((s["kb_per_stream"] for s in sizes if s["streams"] == count), None)
            cells.append("n/a" if kb is None else f"{kb} KB")
        out.append(f"| idle stream at {count:,} (<= {target:g} KB) | " + " | ".join(cells) + " |")
    for run_no, run in enumerate(runs, 1):
        redis = _row(run.get("rows", []), "a2a-redis-memory-1w")
        if redis is not None:
            out.append(
                f"\nRun {run_no}: the Redis bus served {redis['redis_commands']} commands "
                f"during {redis['redis_requests']} blocking sends."
            )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    import json
    import sys

    print(summary([json.loads(open(path).read()) for path in sys.argv[1:]]), end="")
