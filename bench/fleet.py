"""The fleet section: two replicas (one ``gunicorn -k gevent`` worker each) on one PostgreSQL,
with the Redis bus or with the store poll alone.

- **Event latency across replicas**: a ``ticks`` run on replica A writes chunks 20 ms apart,
  each stamped with ``time.monotonic()`` (one clock for every process on the machine); a
  SubscribeToTask on replica B notes when each chunk reached it, as its own event (Redis bus)
  or inside a polled snapshot (store poll).
- **Echo throughput**: blocking SendMessage echo on one replica and on two (the load split
  over both), PostgreSQL + Redis bus, concurrency 32 in all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import typing as t
import uuid

import requests

from bench import loadgen
from bench.servers import Server, gunicorn_command

SPEC: t.Final = "bench.apps:create_app()"
TOKEN: t.Final = "bench-token"
CHUNKS: t.Final = 200
INTERVAL_MS: t.Final = 20


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _rpc(base: str, method: str, params: dict[str, t.Any], stream: bool = False) -> t.Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return requests.post(
        base + "/a2a", json=body, headers={"Authorization": f"Bearer {TOKEN}"},
        stream=stream, timeout=60,
    )  # fmt: skip


def _message(text: str, skill: str) -> dict[str, t.Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}],
            "metadata": {"skill": skill}}  # fmt: skip


def latency(a: str, b: str) -> dict[str, t.Any]:
    """Chunks written on ``a``, read by a subscriber on ``b``: per-chunk delay in ms."""
    started = _rpc(a, "SendMessage", {
        "message": _message(f"{CHUNKS} {INTERVAL_MS}", "ticks"),
        "configuration": {"returnImmediately": True},
    }).json()  # fmt: skip
    task_id = started["result"]["task"]["id"]
    delays: list[float] = []
    events = 0
    with _rpc(b, "SubscribeToTask", {"id": task_id}, stream=True) as response:
        lines = response.iter_lines(decode_unicode=True)
        first = True
        for line in lines:
            if not line or not line.startswith("data:"):
                continue
            now = time.monotonic()
            result = json.loads(line[5:])["result"]
            if first:  # the snapshot: the run waits for this subscriber
                first = False
                requests.post(f"{a}/bench/go/{task_id}", timeout=10)
                continue
            events += 1
            if "artifactUpdate" in result:
                stamps = [float(p["text"]) for p in result["artifactUpdate"]["artifact"]["parts"]]
            elif "task" in result and result["task"].get("artifacts"):
                stamps = [float(p["text"]) for p in result["task"]["artifacts"][0]["parts"]]
                stamps = stamps[len(delays) :]  # a polled snapshot holds every chunk so far
            else:
                stamps = []  # a status update: the stream ends after the last one
            delays.extend(1000 * (now - stamp) for stamp in stamps)
            if len(delays) >= CHUNKS:
                break
    return {
        "chunks": CHUNKS,
        "received": len(delays),
        "events": events,
        "p50_ms": round(_percentile(delays, 0.5), 2) if delays else None,
        "p99_ms": round(_percentile(delays, 0.99), 2) if delays else None,
    }


def _load(url: str, body: str, generator: str, concurrency: int, duration: float,
          out: list[dict[str, t.Any]]) -> None:  # fmt: skip
    """One load generator in its own process (two in one would share its GIL)."""
    command = [sys.executable, "-m", "bench.fleet", url, generator, str(concurrency),
               str(duration)]  # fmt: skip
    done = subprocess.run(command, input=body, capture_output=True, text=True,
                          timeout=duration + 120)  # fmt: skip
    out.append(json.loads(done.stdout.strip().splitlines()[-1]))


def throughput(bases: list[str], body: str, generator: str, duration: float) -> dict[str, t.Any]:
    """Concurrency 32 in all, split over ``bases``; requests/s summed."""
    results: list[dict[str, t.Any]] = []
    threads = [
        threading.Thread(target=_load, args=(base + "/a2a", body, generator,
                                             32 // len(bases), duration, results))
        for base in bases
    ]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(duration + 120)
    return {
        "replicas": len(bases),
        "rps": round(sum(r["rps"] for r in results), 1),
        "p50_ms": round(max(r["p50_ms"] for r in results), 2),
        "p99_ms": round(max(r["p99_ms"] for r in results), 2),
        "bad": sum(r["bad"] + r["socket_errors"] for r in results),
    }


def run(bench: t.Any, db_url: str, redis_url: str, send_body: str) -> dict[str, t.Any]:
    """The whole section; each configuration on fresh tables, dropped after."""
    from bench.run import drop_tables

    out: dict[str, t.Any] = {"latency": {}, "throughput": []}
    base_env = {"A2A_MAX_CONCURRENT_RUNS_PER_OWNER": "-1", "BENCH_STORE": "sql",
                "A2A_DATABASE_URL": db_url, "A2A_KEEPALIVE_INTERVAL": "15"}  # fmt: skip
    configs: dict[str, dict[str, str]] = {
        "redis": {"A2A_REDIS_URL": json.dumps(redis_url)},
        "store-poll": {},  # A2A_REPLICA_POLL_INTERVAL: its default, 1 s
    }
    for label, extra in configs.items():
        prefix = f"bench_{os.getpid()}_fleet_{label.replace('-', '_')}_"
        env = {**base_env, **extra, "BENCH_TABLE_PREFIX": prefix,
               "A2A_REDIS_PREFIX": json.dumps(f"bench-{uuid.uuid4().hex[:8]}:")}  # fmt: skip
        try:
            with Server(gunicorn_command(SPEC, 1), env, "/bench/ping") as a, \
                    Server(gunicorn_command(SPEC, 1), env, "/bench/ping") as b:  # fmt: skip
                out["latency"][label] = latency(a.base, b.base)
                bench.log(f"fleet latency ({label}): {out['latency'][label]}")
                runs = ([a.base], [a.base, b.base]) if label == "redis" else ([a.base],)
                for bases in runs:
                    loadgen.run(bench.generator, a.base + "/a2a", send_body, TOKEN,
                                "TASK_STATE_COMPLETED", 32, bench.plan.warmup)  # fmt: skip
                    row = throughput(bases, send_body, bench.generator, bench.plan.duration)
                    row["bus"] = label
                    out["throughput"].append(row)
                    bench.log(f"fleet echo throughput ({label}, {len(bases)} replica(s)): {row}")
        finally:
            drop_tables(prefix)
    return out


if __name__ == "__main__":  # one load generator: URL GENERATOR CONCURRENCY DURATION, body on stdin
    url, generator, concurrency, duration = sys.argv[1:5]
    print(json.dumps(loadgen.run(generator, url, sys.stdin.read(), TOKEN, "TASK_STATE_COMPLETED",
                                 int(concurrency), float(duration))))  # fmt: skip
