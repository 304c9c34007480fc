"""Redis for the fleet tests: the shared server (``A2A_TEST_REDIS_URL``) under a unique key
prefix per test, or a private ``redis-server`` a test may kill and restart."""

from __future__ import annotations

import os
import shutil
import subprocess
import typing as t
import uuid

import pytest

from tests.conftest import wait_for
from tests.live_server import HOST, free_port

REDIS_URL: t.Final = os.environ.get("A2A_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def redis_reason(url: str = REDIS_URL) -> str | None:
    """None when Redis answers at ``url``; else why the test is skipped."""
    try:
        import redis
    except ImportError:
        return "the redis extra is not installed (pip install -e .[redis])"
    try:
        redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1).ping()
    except Exception as exc:
        return f"no Redis at {url} ({type(exc).__name__}; set A2A_TEST_REDIS_URL)"
    return None


@pytest.fixture
def redis_prefix() -> t.Iterator[str]:
    """A key prefix no other test uses; its keys are deleted afterwards."""
    reason = redis_reason()
    if reason:
        pytest.skip(reason)
    import redis

    prefix = f"a2a-test:{uuid.uuid4().hex[:12]}:"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(prefix + "*"):
        client.delete(key)
    client.close()


def keys_of(prefix: str, url: str = REDIS_URL) -> list[str]:
    import redis

    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        return sorted(client.scan_iter(prefix + "*"))
    finally:
        client.close()


class RedisServer:
    """A private ``redis-server`` on a free loopback port, without persistence: a test kills
    it (an outage) and starts it again on the same port (a restart with nothing kept)."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        self.binary = binary
        self.port = free_port()
        self.url = f"redis://{HOST}:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", HOST, "--save", "",
             "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        if not wait_for(lambda: redis_reason(self.url) is None):
            raise RuntimeError(f"redis-server did not come up on port {self.port}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        self.kill()


class SSEReader:
    """A stream read over a real socket in a thread: the test takes its events one by one
    (:meth:`next`) or all of them once it ended (:meth:`rest`)."""

    def __init__(
        self, url: str, method: str, params: t.Any, token: str = "alice", timeout: float = 30
    ) -> None:
        import json
        import queue
        import threading

        import requests

        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        self.response = requests.post(
            url, json=body, headers={"Authorization": f"Bearer {token}"}, stream=True,
            timeout=timeout,
        )  # fmt: skip
        self._queue: queue.Queue[t.Any] = queue.Queue()
        self._json = json

        def read() -> None:
            try:
                # chunk_size=1: Werkzeug 2.0's dev server (the floors) sends a stream unchunked
                # (Connection: close, no length), and requests then waits for a whole 512-byte
                # read, holding back a short event (the snapshot) until the next one comes;
                # Werkzeug 2.1+ sends it chunked, each chunk read as it arrives.
                for line in self.response.iter_lines(chunk_size=1, decode_unicode=True):
                    if line and line.startswith("data:"):
                        self._queue.put(json.loads(line[5:]))
            except Exception as exc:  # the test sees it as the stream's end
                self._queue.put(exc)
            self._queue.put(None)

        self.thread = threading.Thread(target=read, daemon=True)
        self.thread.start()

    def next(self, timeout: float = 10) -> t.Any:
        """The next event (None once the stream ended)."""
        item = self._queue.get(timeout=timeout)
        if isinstance(item, Exception):
            raise item
        return item

    def rest(self, timeout: float = 15) -> list[t.Any]:
        """Every event up to the stream's end."""
        out = []
        while (item := self.next(timeout)) is not None:
            out.append(item)
        return out

    def close(self) -> None:
        self.response.close()
