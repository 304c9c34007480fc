"""Over a real socket: gunicorn ``-k gevent`` serving the exchange, streams and shutdown."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import time
import typing as t
from pathlib import Path

import pytest
import requests

from tests.live_server import LiveGunicorn

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
ALICE = {"Authorization": "Bearer alice-token", "Content-Type": "application/json"}


class Gunicorn(LiveGunicorn):
    """The live app under gunicorn, with a JSON-RPC helper."""

    def __init__(self, app: str, env: dict[str, str]) -> None:
        super().__init__(app, chdir=str(ROOT), env=env, extra=["--worker-connections", "2000"])

    def rpc(self, method: str, params: t.Any, **kw: t.Any) -> t.Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return requests.post(self.url + "/a2a", json=body, headers=ALICE, timeout=30, **kw)


@pytest.fixture
def server(request: pytest.FixtureRequest) -> t.Iterator[Gunicorn]:
    env = {
        "FLASK_A2A_KEEPALIVE_INTERVAL": "0.5",
        "FLASK_A2A_MAX_STREAM_SEATS_PER_OWNER": "-1",
        "FLASK_A2A_MAX_CONCURRENT_RUNS_PER_OWNER": "-1",
    }
    env.update(getattr(request, "param", {}))
    gunicorn = Gunicorn("tests.live_app:create_app()", env)
    yield gunicorn
    gunicorn.stop()


def message(skill: str, text: str = "hi") -> dict[str, t.Any]:
    return {
        "messageId": f"m-{time.monotonic_ns()}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        "metadata": {"skill": skill},
    }


def test_send_message_over_gunicorn_gevent(server: Gunicorn) -> None:
    answer = server.rpc("SendMessage", {"message": message("echo", "over the wire")})
    assert answer.status_code == 200
    assert answer.headers["Cache-Control"] == "no-store"
    task = answer.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "over the wire"}]
    listed = server.rpc("ListTasks", {}).json()["result"]
    assert listed["totalSize"] == 1 and listed["tasks"][0]["id"] == task["id"]


def test_stream_delivers_events_as_they_happen(server: Gunicorn) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": "s",
        "method": "SendStreamingMessage",
        "params": {"message": message("gate")},
    }
    with requests.post(
        server.url + "/a2a", json=body, headers=ALICE, stream=True, timeout=30
    ) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        lines = response.iter_lines(decode_unicode=True)
        states = []
        keepalive = False
        for line in lines:
            if line == ": keep-alive":
                keepalive = True
                # The task is parked on the gate while the stream is open: open it now.
                requests.post(server.url + "/test/release", timeout=10)
                continue
            if not line.startswith("data: "):
                continue
            result = json.loads(line[6:])["result"]
            states.append(next(iter(result)))
        assert keepalive
        assert states[0] == "task" and states[-1] == "statusUpdate"
        assert "artifactUpdate" in states


def test_worker_exit_cancels_live_runs(server: Gunicorn) -> None:
    task = server.rpc(
        "SendMessage", {"message": message("gate"), "configuration": {"returnImmediately": True}}
    ).json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    pid = requests.get(server.url + "/test/pid", timeout=5).json()["pid"]
    os.kill(pid, signal.SIGTERM)  # the worker exits; the arbiter starts a fresh one
    deadline = time.monotonic() + 20
    while "a2a: shutdown canceled 1 live run" not in server.output():
        assert time.monotonic() < deadline, server.output()[-2000:]
        time.sleep(0.05)  # polling another process's log: there is no event to await


def read_until_final(sockets: list[socket.socket], budget: float) -> tuple[int, int]:
    """Read every SSE socket until each has sent a COMPLETED event; (completed, with snapshot)."""
    selector = selectors.DefaultSelector()
    buffers: dict[socket.socket, bytes] = {}
    for sock in sockets:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
        buffers[sock] = b""
    completed: set[socket.socket] = set()
    deadline = time.monotonic() + budget
    while len(completed) < len(sockets) and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.5):
            sock = t.cast(socket.socket, key.fileobj)
            chunk = sock.recv(65536)
            buffers[sock] += chunk
            if b"TASK_STATE_COMPLETED" in buffers[sock] or not chunk:
                completed.add(sock)
                selector.unregister(sock)
    snapshots = sum(1 for b in buffers.values() if b'"result":{"task"' in b)
    selector.close()
    return len(completed), snapshots


def open_sse(port: int, task_id: str) -> socket.socket:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
    ).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(
        b"POST /a2a HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer alice-token\r\n"
        b"Content-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    return sock


def test_500_concurrent_streams_on_one_worker(server: Gunicorn) -> None:
    task = server.rpc(
        "SendMessage", {"message": message("gate"), "configuration": {"returnImmediately": True}}
    ).json()["result"]["task"]
    sockets = [open_sse(server.port, task["id"]) for _ in range(500)]
    try:
        # Every stream has its snapshot before the gate opens.
        for sock in sockets:
            sock.settimeout(20)
            head = b""
            while b'"result":{"task"' not in head:
                head += sock.recv(65536)
        requests.post(server.url + "/test/release", timeout=10)
        completed, _ = read_until_final(sockets, budget=60)
        assert completed == 500
    finally:
        for sock in sockets:
            sock.close()
