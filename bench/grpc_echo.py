"""Echo throughput over gRPC beside JSON-RPC, one server process each.

``python bench/grpc_echo.py [--duration 5] [--repeats 2] [--concurrency 1 32]``.

Rows, each one server process of ``bench.apps:create_app()`` (the echo skill, memory store,
bearer token) on 127.0.0.1, measured one after another:

- ``grpc``: ``flask a2a grpc`` (grpcio's server, ``--threads 64``), driven by a grpc.aio
  generator in another process (``--generate``: ``concurrency`` calls in flight);
- ``jsonrpc``: JSON-RPC on one ``gunicorn -k gevent`` worker, the production web setup.

(Not JSON-RPC from the gRPC process's own ``--http`` server: Werkzeug's development server
closes each connection, which measures the connects.)

The HTTP rows use ``bench/loadgen.py`` (wrk when installed, else its gevent client). Every answer
is checked (``TASK_STATE_COMPLETED``), every loop is bounded (``--duration`` seconds and at most
``loadgen.MAX_REQUESTS`` requests), each level runs twice and the better run is kept (other
processes only ever slow a run down). Server CPU per request is the server process's CPU time
over the run (from /proc) divided by the requests answered. The generator shares the machine's
cores with the server: read requests/s alongside CPU per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import typing as t
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench import loadgen  # noqa: E402
from bench.run import A2A_ENV, SEND_BODY, TOKEN  # noqa: E402
from bench.servers import HOST, Server, free_port, gunicorn_command  # noqa: E402

APP = "bench.apps:create_app()"


# ------------------------------------------------------------------ the gRPC load generator


async def _generate(address: str, concurrency: int, duration: float) -> dict[str, t.Any]:
    import grpc
    from a2a.types import a2a_pb2, a2a_pb2_grpc

    message = a2a_pb2.Message(
        message_id="bench-1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="hello bench")]
    )
    message.metadata.update({"skill": "echo"})
    request = a2a_pb2.SendMessageRequest(message=message)
    metadata = (("authorization", f"Bearer {TOKEN}"), ("a2a-version", "1.0"))
    latencies: list[float] = []
    counts = {"good": 0, "bad": 0, "errors": 0}
    sample: list[str] = []
    async with grpc.aio.insecure_channel(address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        stop_at = time.perf_counter() + duration

        async def worker() -> None:
            while time.perf_counter() < stop_at and len(latencies) < loadgen.MAX_REQUESTS:
                start = time.perf_counter()
                try:
                    answer = await stub.SendMessage(request, metadata=metadata, timeout=30)
                except grpc.RpcError as exc:
                    counts["errors"] += 1
                    if not sample:
                        sample.append(f"{exc.code().name} {exc.details()}")
                    continue
                latencies.append(time.perf_counter() - start)
                if answer.task.status.state == a2a_pb2.TASK_STATE_COMPLETED:
                    counts["good"] += 1
                else:
                    counts["bad"] += 1
                    if not sample:
                        sample.append(str(answer)[:200])

        began = time.perf_counter()
        await asyncio.wait_for(
            asyncio.gather(*(worker() for _ in range(concurrency))), timeout=duration + 60
        )
        elapsed = time.perf_counter() - began
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1e6 if latencies else 0

    return loadgen._summary(
        len(latencies), elapsed, pct(0.5), pct(0.99), counts["good"], counts["bad"],
        counts["errors"], sample[0] if sample else "",
    )  # fmt: skip


def grpc_load(address: str, concurrency: int, duration: float) -> dict[str, t.Any]:
    """The generator in a process of its own (as wrk is for the HTTP rows)."""
    done = subprocess.run(
        [sys.executable, __file__, "--generate", address, str(concurrency), str(duration)],
        capture_output=True,
        text=True,
        timeout=duration + 120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the gRPC generator failed:\n{done.stderr[-2000:]}")
    return t.cast(dict[str, t.Any], json.loads(done.stdout))


# ------------------------------------------------------------------ the rows


def measure(
    server: Server, load: t.Callable[[int], dict[str, t.Any]], concurrency: int, repeats: int
) -> dict[str, t.Any]:
    """The better of ``repeats`` runs at ``concurrency``, with the server's CPU per request."""
    best: dict[str, t.Any] = {}
    for _ in range(repeats):
        cpu0 = server.cpu_seconds()
        result = load(concurrency)
        cpu = server.cpu_seconds() - cpu0
        answered = result["good"] + result["bad"]
        result["server_cpu_us_per_request"] = round(cpu / answered * 1e6, 1) if answered else 0
        result["concurrency"] = concurrency
        if not best or result["rps"] > best["rps"]:
            best = result
    return best


def grpc_server_command(grpc_port: int, http_port: int) -> list[str]:
    return [
        sys.executable, "-m", "flask", "--app", APP, "a2a", "grpc",
        "--bind", f"{HOST}:{grpc_port}", "--threads", "64", "--http", f"{HOST}:{http_port}",
    ]  # fmt: skip


def run(args: argparse.Namespace) -> list[dict[str, t.Any]]:
    generator = loadgen.pick(args.generator)
    env = {**A2A_ENV, "A2A_RUN_POOL_SIZE": "64", "FLASK_A2A_PUBLIC_BASE_URL": ""}
    rows: list[dict[str, t.Any]] = []

    def http_load(base: str) -> t.Callable[[int], dict[str, t.Any]]:
        return lambda c: loadgen.run(
            generator, base + "/a2a", SEND_BODY, TOKEN, "TASK_STATE_COMPLETED", c, args.duration
        )

    grpc_port, http_port = free_port(), free_port()
    command = grpc_server_command(grpc_port, http_port)
    # The --http server only says when the process is up (its card); the load is gRPC's.
    with Server(command, {**env, "PORT": str(http_port)}, "/.well-known/agent-card.json") as one:
        address = f"{HOST}:{grpc_port}"
        for concurrency in args.concurrency:
            load = lambda c: grpc_load(address, c, args.duration)  # noqa: E731
            rows.append({"row": "grpc", **measure(one, load, concurrency, args.repeats)})
    with Server(gunicorn_command(APP, 1), env, "/.well-known/agent-card.json") as web:
        for concurrency in args.concurrency:
            row = f"jsonrpc ({generator})"
            rows.append(
                {"row": row, **measure(web, http_load(web.base), concurrency, args.repeats)}
            )
    return rows


def table(rows: list[dict[str, t.Any]]) -> str:
    head = "| row | concurrency | requests/s | p50 ms | p99 ms | server CPU us/req | bad | errors |"
    lines = [head, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(
            f"| {r['row']} | {r['concurrency']} | {r['rps']} | {r['p50_ms']} | {r['p99_ms']} | "
            f"{r['server_cpu_us_per_request']} | {r['bad']} | {r['socket_errors']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--repeats", type=int, default=2, help="runs per level (best kept)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--generator", choices=["auto", "wrk", "gevent"], default="auto")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--generate", nargs=3, metavar=("ADDRESS", "CONCURRENCY", "SECONDS"),
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args(argv)
    if args.generate:
        address, concurrency, seconds = args.generate
        print(json.dumps(asyncio.run(_generate(address, int(concurrency), float(seconds)))))
        return 0
    rows = run(args)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
