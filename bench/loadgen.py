"""Load generators: wrk (bench/post.lua) when installed, else a small gevent client of our own.

Both keep ``concurrency`` HTTP/1.1 keep-alive connections busy for ``duration`` seconds, check
every answer (status 200 and a substring), and report requests/s and p50/p99 latency.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import typing as t
from pathlib import Path
from urllib.parse import urlsplit

LUA = Path(__file__).resolve().parent / "post.lua"
#: The gevent client stops at this many requests per run, whatever the duration.
MAX_REQUESTS: t.Final = 2_000_000


def pick(choice: str) -> str:
    if choice == "auto":
        return "wrk" if shutil.which("wrk") else "gevent"
    if choice == "wrk" and not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (apt-get install wrk) - use --generator gevent")
    return choice


def run(
    generator: str,
    url: str,
    body: str,
    token: str | None,
    expect: str,
    concurrency: int,
    duration: float,
) -> dict[str, t.Any]:
    if generator == "wrk":
        return _wrk(url, body, token, expect, concurrency, duration)
    return _gevent(url, body, token, expect, concurrency, duration)


def _summary(
    requests: int,
    seconds: float,
    p50_us: float,
    p99_us: float,
    good: int,
    bad: int,
    errors: int,
    sample: str,
) -> dict[str, t.Any]:
    return {
        "requests": requests,
        "rps": round(requests / seconds, 1) if seconds else 0.0,
        "p50_ms": round(p50_us / 1000, 3),
        "p99_ms": round(p99_us / 1000, 3),
        "good": good,
        "bad": bad,
        "socket_errors": errors,
        "sample_bad": sample,
    }


def _wrk(
    url: str, body: str, token: str | None, expect: str, concurrency: int, duration: float
) -> dict[str, t.Any]:
    env = {
        **os.environ,
        "BENCH_BODY": body,
        "BENCH_EXPECT": expect,
        "BENCH_AUTH": f"Bearer {token}" if token else "",
    }
    seconds = max(1, round(duration))
    command = [
        "wrk",
        "-t1",
        f"-c{concurrency}",
        f"-d{seconds}s",
        "--timeout",
        "10s",
        "--latency",
        "-s",
        str(LUA),
        url,
    ]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=seconds + 60)
    stats = sample = None
    for line in out.stdout.splitlines():
        if line.startswith("BENCHJSON "):
            stats = json.loads(line[len("BENCHJSON ") :])
        elif line.startswith("BENCHSAMPLE"):
            sample = line[len("BENCHSAMPLE ") :].strip()
    if stats is None:
        raise RuntimeError(f"wrk gave no summary:\n{out.stdout}\n{out.stderr}")
    errors = sum(stats[k] for k in ("connect", "read", "write", "timeout"))
    return _summary(
        stats["requests"],
        stats["duration_us"] / 1e6,
        stats["p50_us"],
        stats["p99_us"],
        stats["good"],
        stats["bad"],
        errors,
        sample or "",
    )


def _gevent(
    url: str, body: str, token: str | None, expect: str, concurrency: int, duration: float
) -> dict[str, t.Any]:
    import gevent
    from gevent import socket

    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    raw = body.encode()
    head = (
        f"POST {parts.path or '/'} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/json\r\nA2A-Version: 1.0\r\n"
        + (f"Authorization: Bearer {token}\r\n" if token else "")
        + f"Content-Length: {len(raw)}\r\n\r\n"
    )
    request = head.encode() + raw
    wanted = expect.encode()
    latencies: list[float] = []
    counts = {"good": 0, "bad": 0, "errors": 0}
    sample: list[str] = []
    stop_at = time.perf_counter() + duration

    def client() -> None:
        try:
            sock = socket.create_connection((host, port), timeout=10)
            reader = sock.makefile("rb")
        except OSError:
            counts["errors"] += 1
            return
        try:
            while time.perf_counter() < stop_at and len(latencies) < MAX_REQUESTS:
                start = time.perf_counter()
                sock.sendall(request)
                status, answer = _read_response(reader)
                latencies.append(time.perf_counter() - start)
                if status == 200 and wanted in answer:
                    counts["good"] += 1
                else:
                    counts["bad"] += 1
                    if not sample:
                        sample.append(f"{status} {answer[:200]!r}")
        except (OSError, ValueError):
            counts["errors"] += 1
        finally:
            sock.close()

    began = time.perf_counter()
    gevent.joinall([gevent.spawn(client) for _ in range(concurrency)], timeout=duration + 30)
    elapsed = time.perf_counter() - began
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1e6 if latencies else 0

    return _summary(
        len(latencies),
        elapsed,
        pct(0.50),
        pct(0.99),
        counts["good"],
        counts["bad"],
        counts["errors"],
        sample[0] if sample else "",
    )


def _read_response(reader: t.Any) -> tuple[int, bytes]:
    """One HTTP/1.1 response: (status, body), with Content-Length or chunked framing."""
    status_line = reader.readline(65536)
    if not status_line:
        raise ValueError("connection closed")
    status = int(status_line.split()[1])
    length, chunked = 0, False
    for _ in range(100):
        line = reader.readline(65536)
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if not chunked:
        return status, reader.read(length)
    body = bytearray()
    for _ in range(10_000):
        size = int(reader.readline(1024).split(b";")[0], 16)
        if size == 0:
            reader.readline(1024)
            break
        body += reader.read(size)
        reader.readline(1024)
    return status, bytes(body)
