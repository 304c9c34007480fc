"""Transport faults over a real socket: malformed bodies, clients that leave (issue 13).

A body the server cannot read as HTTP (a bad chunk size, a missing chunk terminator) answers
400 / -31400 and logs one short line, never a traceback; so does a client that leaves
mid-body. A stream whose client closes or resets its connection frees its seat at once: a
client reconnecting within a second is seated, not refused 429. Both under werkzeug's threaded
server (in process) and ``gunicorn -k gevent`` (the production setup).
"""

from __future__ import annotations

import json
import logging
import socket
import struct
import threading
import time
import typing as t
from pathlib import Path

import pytest
import requests
from flask import Flask

from flask_a2a import Skill
from tests.conftest import Gate, echo, wait_for
from tests.live_server import HOST, LiveGunicorn, werkzeug_server

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
UNREADABLE = "a2a: request body unreadable"
SEND = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "m-1",
                "role": "ROLE_USER",
                "parts": [{"text": "hi"}],
                "metadata": {"skill": "echo"},
            }
        },
    }
).encode()

#: (name, framing headers, the bytes sent as the body): bodies no server can read.
MALFORMED = [
    ("bad-chunk-size", b"Transfer-Encoding: chunked\r\n", b"zz\r\n" + SEND + b"\r\n0\r\n\r\n"),
    ("missing-chunk-terminator", b"Transfer-Encoding: chunked\r\n", b"3\r\nabcXY0\r\n\r\n"),
]
#: (name, framing headers, the part of the body sent before the client leaves).
LEAVING = [
    ("content-length", b"Content-Length: %d\r\n" % len(SEND), SEND[:11]),
    ("chunked", b"Transfer-Encoding: chunked\r\n", b"%x\r\n" % len(SEND) + SEND[:11]),
]


def head(token: str, framing: bytes) -> bytes:
    return (
        b"POST /a2a HTTP/1.1\r\nHost: " + HOST.encode() + b"\r\n"
        b"Authorization: Bearer " + token.encode() + b"\r\n"
        b"Content-Type: application/json\r\n" + framing + b"\r\n"
    )


def exchange(port: int, data: bytes) -> bytes:
    """Send ``data`` on a fresh connection and read the whole answer (the server closes)."""
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def leave(port: int, data: bytes) -> None:
    """Send part of a request and go away."""
    sock = socket.create_connection((HOST, port), timeout=10)
    sock.sendall(data)
    sock.close()


def status_and_body(answer: bytes) -> tuple[int, t.Any]:
    top, _, body = answer.partition(b"\r\n\r\n")
    return int(top.split(b" ", 2)[1]), json.loads(body)


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    for record in caplog.records:
        assert record.exc_info is None, record.getMessage()
        assert "Traceback" not in record.getMessage()


# ---------------------------------------------------------------------- streams: the seat


class Seated:
    """An open SSE stream over a raw socket (its snapshot read), or the status it was refused."""

    def __init__(self, port: int, token: str, body: bytes) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=10)
        self.sock.sendall(head(token, b"Content-Length: %d\r\n" % len(body)) + body)
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            chunk = self.sock.recv(65536)
            assert chunk, buffer
            buffer += chunk
        self.status = int(buffer.split(b" ", 2)[1])
        if self.status != 200:
            self.sock.close()
            return
        while b'"result":{"task"' not in buffer or not buffer.rstrip().endswith(b"}"):
            chunk = self.sock.recv(65536)
            assert chunk, buffer
            buffer += chunk

    def drop(self, how: str) -> None:
        """Leave abruptly: a reset (SO_LINGER 0) or a plain close."""
        if how == "reset":
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


def seat_within(port: int, token: str, body: bytes, budget: float = 1.0) -> Seated:
    """Open a stream, retrying a 429 for at most ``budget`` seconds (the seat of a stream whose
    client just left is freed as the server sees the close: no event here to await)."""
    deadline = time.monotonic() + budget
    pause = threading.Event()
    while True:
        stream = Seated(port, token, body)
        if stream.status != 429 or time.monotonic() >= deadline:
            return stream
        pause.wait(0.02)


def rpc_body(method: str, params: t.Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


def gated_message(skill: str = "gate") -> dict[str, t.Any]:
    return {
        "messageId": f"m-{time.monotonic_ns()}",
        "role": "ROLE_USER",
        "parts": [{"text": "hold"}],
        "metadata": {"skill": skill},
    }


def check_reconnect(port: int, token: str, body: bytes, how: str) -> None:
    first = seat_within(port, token, body)
    assert first.status == 200
    assert Seated(port, token, body).status == 429  # one seat: the cap holds while it is open
    first.drop(how)
    started = time.monotonic()
    again = seat_within(port, token, body, budget=1.0)
    assert again.status == 200, f"still refused {time.monotonic() - started:.2f} s after the drop"
    again.drop("close")


# ------------------------------------------------------------------- werkzeug (threads)


@pytest.fixture
def live_app(make_app: t.Callable[..., Flask], gate: Gate) -> t.Iterator[Flask]:
    skills = [
        Skill(id="echo", name="Echo", description="Echo.", handler=echo),
        Skill(id="gate", name="Gate", description="Waits.", handler=gate.handler),
    ]
    app = make_app(
        skills=skills,
        config={
            "A2A_MAX_STREAM_SEATS_PER_OWNER": 1,
            "A2A_KEEPALIVE_INTERVAL": 15.0,
        },
    )
    yield app
    gate.release.set()


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.mark.parametrize(
    ("framing", "body"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed_body_is_400_without_traceback_werkzeug(
    live_app: Flask, framing: bytes, body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with werkzeug_server(live_app) as url:
        status, doc = status_and_body(exchange(port_of(url), head("alice", framing) + body))
    assert status == 400
    assert doc["error"]["code"] == -31400 and doc["id"] is None
    assert len([r for r in caplog.records if UNREADABLE in r.getMessage()]) == 1
    no_traceback(caplog)
    assert live_app.extensions["a2a"].exchange.store.export_owner("alice")["tasks"] == []


@pytest.mark.parametrize(("framing", "part"), [m[1:] for m in LEAVING], ids=[m[0] for m in LEAVING])
def test_a_client_leaving_mid_body_logs_one_short_line_werkzeug(
    live_app: Flask, framing: bytes, part: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with werkzeug_server(live_app) as url:
        leave(port_of(url), head("alice", framing) + part)
        assert wait_for(lambda: any(UNREADABLE in r.getMessage() for r in caplog.records))
    lines = [r.getMessage() for r in caplog.records if UNREADABLE in r.getMessage()]
    assert len(lines) == 1 and len(lines[0]) < 200
    no_traceback(caplog)
    assert live_app.extensions["a2a"].exchange.store.export_owner("alice")["tasks"] == []


@pytest.mark.parametrize("how", ["reset", "close"])
def test_a_dropped_stream_frees_its_seat_at_once_werkzeug(
    live_app: Flask, gate: Gate, how: str
) -> None:
    with werkzeug_server(live_app) as url:
        port = port_of(url)
        send = rpc_body(
            "SendMessage",
            {"message": gated_message(), "configuration": {"returnImmediately": True}},
        )
        task = requests.post(
            url + "/a2a",
            data=send,
            timeout=10,
            headers={"Authorization": "Bearer alice", "Content-Type": "application/json"},
        ).json()
        assert gate.entered.wait(10)
        subscribe = rpc_body("SubscribeToTask", {"id": task["result"]["task"]["id"]})
        check_reconnect(port, "alice", subscribe, how)


# ------------------------------------------------------------------- gunicorn -k gevent


@pytest.fixture(scope="module")
def gunicorn() -> t.Iterator[LiveGunicorn]:
    server = LiveGunicorn(
        "tests.live_app:create_app()",
        chdir=str(ROOT),
        env={
            "FLASK_A2A_MAX_STREAM_SEATS_PER_OWNER": "1",
            "FLASK_A2A_KEEPALIVE_INTERVAL": "15",
            "LIVE_LOG_LEVEL": "INFO",
        },  # an abandoned body is an INFO line
    )
    yield server
    server.stop()


def test_malformed_and_abandoned_bodies_under_gunicorn(gunicorn: LiveGunicorn) -> None:
    before = gunicorn.output().count(UNREADABLE)
    for _, framing, body in MALFORMED:
        status, doc = status_and_body(exchange(gunicorn.port, head("alice-token", framing) + body))
        assert status == 400 and doc["error"]["code"] == -31400
    for _, framing, part in LEAVING:
        leave(gunicorn.port, head("alice-token", framing) + part)
    expected = before + len(MALFORMED) + len(LEAVING)
    assert wait_for(lambda: gunicorn.output().count(UNREADABLE) >= expected)
    log = gunicorn.output()
    assert log.count(UNREADABLE) == expected
    assert "Traceback" not in log
    assert "request failed" not in log


@pytest.mark.parametrize("how", ["reset", "close"])
def test_a_dropped_subscription_frees_its_seat_at_once_under_gunicorn(
    gunicorn: LiveGunicorn, how: str
) -> None:
    send = {"message": gated_message(), "configuration": {"returnImmediately": True}}
    answer = requests.post(
        gunicorn.url + "/a2a",
        data=rpc_body("SendMessage", send),
        timeout=10,
        headers={"Authorization": "Bearer alice-token", "Content-Type": "application/json"},
    )
    task_id = answer.json()["result"]["task"]["id"]
    check_reconnect(gunicorn.port, "alice-token", rpc_body("SubscribeToTask", {"id": task_id}), how)


@pytest.mark.parametrize("how", ["reset", "close"])
def test_a_dropped_streaming_send_frees_its_seat_at_once_under_gunicorn(
    gunicorn: LiveGunicorn, how: str
) -> None:
    body = rpc_body("SendStreamingMessage", {"message": gated_message()})
    check_reconnect(gunicorn.port, "alice-token", body, how)
    assert "Traceback" not in gunicorn.output()
