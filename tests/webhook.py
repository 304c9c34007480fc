"""A webhook receiver for push tests: a threaded HTTP server on 127.0.0.1 at a free port.

It records every request as it arrives (before answering), so a test can count deliveries in
flight. ``hang()`` makes it hold requests until ``release()``; ``answer(302)`` / ``answer(500)``
change the status. No sleeps: tests wait on its condition with a bounded deadline.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import typing as t
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: A hung request gives up after this long even if never released (bounds a broken test).
HANG_LIMIT = 30.0


@dataclasses.dataclass
class Hit:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    #: When it arrived (monotonic seconds), and the status it was answered with.
    at: float = 0.0
    status: int = 0

    @property
    def json(self) -> t.Any:
        return json.loads(self.body)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 -- http.server's naming
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        receiver = self.server.receiver
        hit = Hit("POST", self.path, dict(self.headers.items()), body, time.monotonic())
        hold = receiver.record(hit)
        if hold is not None:
            hold.wait(HANG_LIMIT)
        status = hit.status
        self.send_response(status)
        if 300 <= status < 400:
            self.send_header("Location", f"http://127.0.0.1:{receiver.port}/followed")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST  # a followed redirect (or a proxy) may come in as GET

    def log_message(self, format: str, *args: t.Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    receiver: Webhook


class Webhook:
    """Start with ``Webhook()``; ``url(path)`` is where to register; ``close()`` when done."""

    def __init__(self) -> None:
        self.hits: list[Hit] = []
        self.status = 200
        self._cond = threading.Condition()
        self._gate: threading.Event | None = None
        self._failing = 0
        self._failing_status = 503
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.receiver = self
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def record(self, hit: Hit) -> threading.Event | None:
        with self._cond:
            self.hits.append(hit)
            if self._failing > 0:
                self._failing -= 1
                hit.status = self._failing_status
            else:
                hit.status = self.status
            self._cond.notify_all()
            return self._gate

    def hang(self) -> None:
        """Hold every request from now on until :meth:`release`."""
        with self._cond:
            self._gate = threading.Event()

    def release(self) -> None:
        with self._cond:
            gate, self._gate = self._gate, None
        if gate is not None:
            gate.set()

    def answer(self, status: int) -> None:
        self.status = status

    def fail_first(self, count: int, status: int = 503) -> None:
        """Answer the next ``count`` requests with ``status`` (a receiver down for a while)."""
        with self._cond:
            self._failing, self._failing_status = count, status

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Hit]:
        """At least ``count`` hits (fails the test past ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.hits) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"webhook got {len(self.hits)} of {count} requests")
                self._cond.wait(left)
            return list(self.hits)

    def paths(self) -> list[str]:
        with self._cond:
            return [hit.path for hit in self.hits]

    def close(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def wait_until(predicate: t.Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``predicate`` (bounded) for state no event announces, such as a log line."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        pause.wait(0.01)
