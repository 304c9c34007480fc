"""Where the microseconds of one request go, without a network: ``python bench/inproc.py``.

Builds an app (``bench.apps``) in a gevent-patched process, as a ``gunicorn -k gevent`` worker
is, and calls its WSGI callable directly with a prepared environ, one request after another,
``--requests`` times (after a warm-up): no sockets, no load generator, no other process. It
reports the mean CPU microseconds per request of each row (this process's CPU time, which
other processes' load disturbs less than the wall clock), which is what a change to the request
path moves (the load rows of ``run.py`` then say what that is worth under gunicorn).

Rows: ``bare`` (the bare Flask JSON endpoint), ``jsonrpc`` and ``rest`` (the echo
SendMessage on the memory store over each binding). ``--profile`` prints cProfile's top
functions for one row instead (its own overhead inflates every number: compare shares only).
"""

from __future__ import annotations

import sys
from pathlib import Path

# This folder holds a profile.py: keep it from shadowing the standard library's (cProfile).
HERE = Path(__file__).resolve().parent
sys.path[0] = str(HERE.parent)

from gevent import monkey  # noqa: E402

monkey.patch_all()

import argparse  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import os  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import typing as t  # noqa: E402

from bench.run import A2A_ENV, REST_SEND_BODY, SEND_BODY, TOKEN  # noqa: E402

ROWS: t.Final = {
    # name: (app factory, path, body, what every answer holds)
    "bare": ("create_bare_app", "/echo", SEND_BODY, b'"ok":true'),
    "jsonrpc": ("create_app", "/a2a", SEND_BODY, b"TASK_STATE_COMPLETED"),
    "rest": ("create_app", "/a2a/rest/message:send", REST_SEND_BODY, b"TASK_STATE_COMPLETED"),
}


def caller(row: str) -> t.Callable[[], bytes]:
    """One request to ``row``'s app through its WSGI callable; returns the answer's body."""
    os.environ.update(A2A_ENV)
    from bench import apps

    factory, path, body, _ = ROWS[row]
    app = getattr(apps, factory)()
    raw = body.encode()
    base = {
        "REQUEST_METHOD": "POST", "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1:8000", "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(raw)), "HTTP_AUTHORIZATION": f"Bearer {TOKEN}",
        "HTTP_A2A_VERSION": "1.0", "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
        "wsgi.multithread": False, "wsgi.multiprocess": False, "wsgi.run_once": False,
        "wsgi.version": (1, 0),
    }  # fmt: skip

    def start_response(status: str, headers: t.Any, exc_info: t.Any = None) -> None:
        if not status.startswith("200"):
            raise RuntimeError(f"{row}: HTTP {status}")

    def call() -> bytes:
        environ = dict(base)
        environ["wsgi.input"] = io.BytesIO(raw)
        answer = app(environ, start_response)
        try:
            return b"".join(answer)
        finally:
            getattr(answer, "close", lambda: None)()

    return call


def measure(row: str, requests: int, rounds: int) -> list[float]:
    """Microseconds per request, once per round (after a warm-up of ``requests // 5``)."""
    call = caller(row)
    expect = ROWS[row][3]
    for _ in range(max(1, requests // 5)):
        call()
    results = []
    for _ in range(rounds):
        started = time.process_time()  # CPU time: other processes' load moves it less
        for _ in range(requests):
            answer = call()
        results.append((time.process_time() - started) / requests * 1e6)
        if expect not in answer:
            raise RuntimeError(f"{row}: unexpected answer {answer[:200]!r}")
    return results


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("rows", nargs="*", help=f"some of {sorted(ROWS)} (default: all)")
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile the first row")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    args.rows = args.rows or list(ROWS)
    unknown = set(args.rows) - set(ROWS)
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; choose from {sorted(ROWS)}")
    if args.profile:
        call = caller(args.rows[0])
        for _ in range(200):
            call()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.requests):
            call()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.top)
        return 0
    means: dict[str, float] = {}
    for row in args.rows:
        results = measure(row, args.requests, args.rounds)
        means[row] = min(results)
        print(
            f"{row:8s} best {min(results):7.1f} us/request  median "
            f"{statistics.median(results):7.1f}  ({args.rounds} rounds of {args.requests})"
        )
    if "bare" in means:
        for row, value in means.items():
            if row != "bare":
                print(f"{row}: bare / {row} = {100 * means['bare'] / value:.0f} %")
    if "jsonrpc" in means and "rest" in means:
        print(f"rest / jsonrpc = {100 * means['jsonrpc'] / means['rest']:.0f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
