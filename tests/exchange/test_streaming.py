"""SendStreamingMessage and SubscribeToTask over the Flask test client: order, versions, seats."""

from __future__ import annotations

import io
import json
import threading
import typing as t

import pytest
from flask import Flask

from flask_a2a import Part, Skill, TaskContext
from flask_a2a.testing import A2ATestClient, stream_event
from tests.conftest import Gate

pytestmark = pytest.mark.usefixtures("binding")


class Chunks:
    """A handler that appends one chunk per release, so a test controls every event."""

    def __init__(self, count: int = 3) -> None:
        self.count = count
        self.step = threading.Semaphore(0)
        self.sent = threading.Event()
        self.chunk_sent: list[threading.Event] = [threading.Event() for _ in range(count)]

    def handler(self, task: TaskContext) -> None:
        task.working()
        artifact_id = None
        for n in range(self.count):
            while not self.step.acquire(timeout=0.01):
                task.check()
            artifact_id = task.artifact(
                [Part(text=f"chunk-{n}")],
                name="chunks",
                artifact_id=artifact_id,
                append=artifact_id is not None,
                last_chunk=n == self.count - 1,
            )
            self.chunk_sent[n].set()


def open_stream(client: A2ATestClient, method: str, params: t.Any, token: str = "alice") -> t.Any:
    """Call a streaming method and return the unbuffered response (iterate ``.response``)."""
    return client.call(method, params, token=token, buffered=False)


def frames(response: t.Any) -> t.Iterator[str]:
    for chunk in response.response:
        yield chunk.decode() if isinstance(chunk, bytes) else chunk


def events_of(frame: str) -> t.Any:
    """One frame's event, in the JSON-RPC shape (a REST event is the bare StreamResponse)."""
    assert frame.startswith("data: ") and frame.endswith("\n\n"), frame
    return stream_event(json.loads(frame[6:]))


def next_event(it: t.Iterator[str]) -> t.Any:
    for frame in it:
        if frame.startswith(":"):
            continue
        return events_of(frame)
    raise AssertionError("stream ended")


@pytest.fixture
def chunks() -> Chunks:
    return Chunks()


@pytest.fixture
def stream_app(make_app: t.Callable[..., Flask], chunks: Chunks, gate: Gate) -> Flask:
    return make_app(
        skills=[
            Skill(id="chunks", name="Chunks", description="Chunks.", handler=chunks.handler),
            Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler),
        ]
    )


@pytest.fixture
def sclient(stream_app: Flask) -> A2ATestClient:
    return A2ATestClient(stream_app, token="alice")


def test_stream_sends_snapshot_then_events_in_order_then_closes(
    sclient: A2ATestClient, chunks: Chunks
) -> None:
    for _ in range(chunks.count):
        chunks.step.release()
    response, events = sclient.stream(
        "SendStreamingMessage", {"message": sclient.message("go", skill="chunks")}
    )
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert response.headers["Cache-Control"] == "no-store"
    results = [e["result"] for e in events]
    assert all(e["jsonrpc"] == "2.0" and e["id"] == events[0]["id"] for e in events)
    assert all(len(r) == 1 for r in results)  # exactly one StreamResponse member
    assert list(results[0]) == ["task"]
    assert results[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    kinds = [next(iter(r)) for r in results[1:]]
    assert kinds == [
        "statusUpdate",
        "artifactUpdate",
        "artifactUpdate",
        "artifactUpdate",
        "statusUpdate",
    ]
    texts = [r["artifactUpdate"]["artifact"]["parts"][0]["text"] for r in results[2:5]]
    assert texts == ["chunk-0", "chunk-1", "chunk-2"]
    assert [r["artifactUpdate"].get("append", False) for r in results[2:5]] == [False, True, True]
    assert results[4]["artifactUpdate"]["lastChunk"] is True
    assert results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_subscribe_skips_what_the_snapshot_already_holds(
    sclient: A2ATestClient, chunks: Chunks
) -> None:
    task = sclient.send(skill="chunks", configuration={"returnImmediately": True})["task"]
    chunks.step.release()
    assert chunks.chunk_sent[0].wait(5)
    stream = open_stream(sclient, "SubscribeToTask", {"id": task["id"]})
    it = frames(stream)
    snapshot = next_event(it)["result"]["task"]
    assert snapshot["artifacts"][0]["parts"] == [{"text": "chunk-0"}]
    chunks.step.release()
    chunks.step.release()
    rest = [e["result"] for e in map(events_of, (f for f in it if not f.startswith(":")))]
    appended = [
        r["artifactUpdate"]["artifact"]["parts"][0]["text"] for r in rest if "artifactUpdate" in r
    ]
    assert appended == ["chunk-1", "chunk-2"]  # chunk-0 is never applied twice
    assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    final = sclient.rpc("GetTask", {"id": task["id"]}).result
    assert [p["text"] for p in final["artifacts"][0]["parts"]] == ["chunk-0", "chunk-1", "chunk-2"]


def test_keepalive_comment_paces_an_idle_stream(sclient: A2ATestClient, gate: Gate) -> None:
    message = {"message": sclient.message(skill="gate")}
    stream = open_stream(sclient, "SendStreamingMessage", message)
    it = frames(stream)
    next_event(it)  # snapshot
    seen = []
    for frame in it:
        seen.append(frame)
        if frame == ": keep-alive\n\n":
            break
    assert ": keep-alive\n\n" in seen
    gate.release.set()
    rest = [events_of(f)["result"] for f in it if not f.startswith(":")]
    assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_subscribe_is_owner_scoped(sclient: A2ATestClient, gate: Gate) -> None:
    task = sclient.send(skill="gate", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(5)
    for token in ("bob", "alice-read", "alice-t2"):
        assert sclient.rpc("SubscribeToTask", {"id": task["id"]}, token=token).code == -32001
    gate.release.set()


def test_seat_cap_refuses_with_429_and_writes_nothing(
    make_app: t.Callable[..., Flask], gate: Gate
) -> None:
    app = make_app(
        skills=[Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler)],
        config={"A2A_MAX_STREAM_SEATS_PER_OWNER": 1},
    )
    client = A2ATestClient(app, token="alice")
    first = open_stream(client, "SendStreamingMessage", {"message": client.message(skill="gate")})
    it = frames(first)
    next_event(it)
    exchange = app.extensions["a2a"].exchange
    runs_before = exchange.slots.held("alice")
    refused = client.rpc("SendStreamingMessage", {"message": client.message(skill="gate")})
    assert refused.status == 429
    assert refused.code == -31429
    assert client.rpc("ListTasks", {}).result["totalSize"] == 1  # no task row written
    assert exchange.slots.held("alice") == runs_before  # no run slot taken
    other = open_stream(
        client, "SendStreamingMessage", {"message": client.message(skill="gate")}, token="bob"
    )
    assert other.status_code == 200  # another owner has their own seats
    gate.release.set()
    list(it)
    list(frames(other))


def test_evict_oldest_closes_the_oldest_stream(
    make_app: t.Callable[..., Flask], gate: Gate
) -> None:
    app = make_app(
        skills=[Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler)],
        config={"A2A_MAX_STREAM_SEATS_PER_OWNER": 1, "A2A_STREAM_SEAT_OVERFLOW": "evict-oldest"},
    )
    client = A2ATestClient(app, token="alice")
    task = client.send(skill="gate", configuration={"returnImmediately": True})["task"]
    first = frames(open_stream(client, "SubscribeToTask", {"id": task["id"]}))
    next_event(first)
    second = frames(open_stream(client, "SubscribeToTask", {"id": task["id"]}))
    next_event(second)
    assert [f for f in first if not f.startswith(":")] == []  # the oldest ended, no more events
    gate.release.set()
    rest = [events_of(f)["result"] for f in second if not f.startswith(":")]
    assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_client_gone_before_first_event_still_runs_the_task(
    sclient: A2ATestClient, stream_app: Flask, chunks: Chunks
) -> None:
    for _ in range(chunks.count):
        chunks.step.release()
    message = {"message": sclient.message(skill="chunks")}
    stream = open_stream(sclient, "SendStreamingMessage", message)
    stream.close()  # never read a single event
    exchange = stream_app.extensions["a2a"].exchange
    assert exchange.seats.count("alice") == 0  # the seat is free at once
    assert chunks.chunk_sent[-1].wait(5)
    tasks = sclient.rpc("ListTasks", {}).result["tasks"]
    task_id = tasks[0]["id"]
    run = exchange.runs.get(task_id)
    if run is not None:
        assert run.done.wait(5)
    assert sclient.rpc("GetTask", {"id": task_id}).result["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )


def test_client_leaving_mid_stream_frees_its_seat(
    sclient: A2ATestClient, stream_app: Flask, gate: Gate
) -> None:
    message = {"message": sclient.message(skill="gate")}
    stream = open_stream(sclient, "SendStreamingMessage", message)
    next_event(frames(stream))
    exchange = stream_app.extensions["a2a"].exchange
    assert exchange.seats.count("alice") == 1
    stream.close()
    assert exchange.seats.count("alice") == 0
    gate.release.set()


def test_stream_closes_at_input_required_and_resume_streams_on(
    make_app: t.Callable[..., Flask],
) -> None:
    def ask(task: TaskContext) -> None:
        if len(task.history) < 2:
            task.require_input("name?")
            return
        task.artifact([Part(text=f"hi {task.message.text}")], name="greeting")

    app = make_app(skills=[Skill(id="ask", name="Ask", description="Ask.", handler=ask)])
    client = A2ATestClient(app, token="alice")
    _, events = client.stream("SendStreamingMessage", {"message": client.message(skill="ask")})
    last = events[-1]["result"]["statusUpdate"]
    assert last["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    task_id = last["taskId"]
    _, events = client.stream(
        "SendStreamingMessage", {"message": client.message("Ada", task_id=task_id)}
    )
    snapshot = events[0]["result"]["task"]
    assert snapshot["status"]["state"] == "TASK_STATE_WORKING"
    assert [m["role"] for m in snapshot["history"]] == ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    artifact = events[-2]["result"]["artifactUpdate"]["artifact"]
    assert artifact["parts"] == [{"text": "hi Ada"}]


def test_cancel_reaches_every_subscriber(sclient: A2ATestClient, gate: Gate) -> None:
    task = sclient.send(skill="gate", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(5)
    streams = [
        frames(open_stream(sclient, "SubscribeToTask", {"id": task["id"]})) for _ in range(3)
    ]
    for it in streams:
        next_event(it)
    assert sclient.rpc("CancelTask", {"id": task["id"]}).result["status"]["state"] == (
        "TASK_STATE_CANCELED"
    )
    for it in streams:
        rest = [events_of(f)["result"] for f in it if not f.startswith(":")]
        assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
    gate.release.set()
    assert sclient.rpc("GetTask", {"id": task["id"]}).result["status"]["state"] == (
        "TASK_STATE_CANCELED"
    )


def test_a_subscriber_that_falls_behind_is_closed(
    sclient: A2ATestClient, stream_app: Flask, chunks: Chunks
) -> None:
    exchange = stream_app.extensions["a2a"].exchange
    exchange.bus.queue_limit = 1
    task = sclient.send(skill="chunks", configuration={"returnImmediately": True})["task"]
    stream = frames(open_stream(sclient, "SubscribeToTask", {"id": task["id"]}))
    next_event(stream)
    for n in range(chunks.count):  # three events land while the reader is not reading
        chunks.step.release()
        assert chunks.chunk_sent[n].wait(5)
    rest = [events_of(f)["result"] for f in stream if not f.startswith(":")]
    assert len(rest) < 4  # it was cut, not allowed to hold the run back
    state = sclient.rpc("GetTask", {"id": task["id"]}).result["status"]["state"]
    assert state in ("TASK_STATE_WORKING", "TASK_STATE_COMPLETED")


def test_closing_a_stream_nobody_started_reading_frees_its_seat(
    stream_app: Flask, gate: Gate, binding: str
) -> None:
    from flask_a2a.bindings import jsonrpc, rest
    from flask_a2a.exchange.calls import HTTPRequest
    from flask_a2a.testing import A2ATestClient as Client

    exchange = stream_app.extensions["a2a"].exchange
    binds = (exchange.settings, exchange.methods, exchange.extensions)
    params = {"message": Client.message(skill="gate")}
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params}
    ).encode()
    if binding == "rest":
        body = json.dumps(params).encode()
    http = HTTPRequest(
        method="POST",
        headers={"Content-Type": "application/json"},
        host="localhost",
        content_length=len(body),
        read_body=io.BytesIO(body).read,
        resolve_principal=lambda: exchange_principal(),
    )
    if binding == "rest":
        reply = rest.handle(http, "message:stream", *binds)
    else:
        reply = jsonrpc.handle(http, *binds)
    assert reply.status == 200 and exchange.seats.count("alice") == 1
    assert not isinstance(reply.body, str)
    reply.body.close()  # type: ignore[attr-defined]  # the server gave up before the first event was pulled
    assert exchange.seats.count("alice") == 0
    gate.release.set()


def exchange_principal() -> t.Any:
    from flask_a2a import Principal

    return Principal("alice")


# ------------------------------------------------------------------ what an idle stream parks on


def test_subscription_wakes_on_an_event_a_close_or_its_timeout() -> None:
    """Under gevent it parks on the hub (a Waiter and a timer), under threads on a condition:
    either way an event or a close wakes it at once, and a timeout returns None."""
    import time as clock

    from flask_a2a.exchange.bus import Bus, BusEvent

    bus = Bus()
    sub = bus.subscribe("t-1")
    began = clock.monotonic()
    assert sub.get(0.05) is None and not sub.closed
    assert clock.monotonic() - began >= 0.04
    assert sub.get(0) is None  # no wait at all
    event = BusEvent("t-1", 1, None, "{}", final=False)
    threading.Timer(0.05, bus.publish, (event,)).start()
    began = clock.monotonic()
    assert sub.get(5) is event
    assert clock.monotonic() - began < 2
    threading.Timer(0.05, sub.close, ("evicted",)).start()
    assert sub.get(5) is None and sub.closed and sub.reason == "evicted"
    assert bus.subscriber_count("t-1") == 0


def test_off_stack_hands_back_the_value_the_exception_and_the_context() -> None:
    import contextvars

    from flask_a2a.exchange.streams import off_stack

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("caller's")
    undone: list[object] = []
    assert off_stack(lambda: (var.get(), "value"), undone.append) == ("caller's", "value")

    def fails() -> None:
        raise KeyError("refused")

    with pytest.raises(KeyError, match="refused"):
        off_stack(fails, undone.append)
    assert undone == []


@pytest.mark.gevent_session  # under threads it is a plain call: nothing runs apart from the caller
def test_off_stack_undoes_what_an_interrupted_caller_never_got() -> None:
    import gevent

    from flask_a2a.exchange.streams import off_stack

    undone: list[str] = []

    def slow() -> str:
        gevent.sleep(0.1)
        return "opened"

    caller = gevent.spawn(off_stack, slow, undone.append)
    gevent.sleep(0.02)
    caller.kill()  # while the helper waits on I/O
    assert caller.dead and undone == []
    gevent.sleep(0.2)
    assert undone == ["opened"]
    assert gevent.spawn(off_stack, slow, undone.append).get(timeout=5) == "opened"  # hub fine


def test_a_stream_is_handed_to_the_server_as_is_unless_on_close_callbacks_wait(
    stream_app: Flask, gate: Gate
) -> None:
    """The relay itself is the WSGI body (no werkzeug wrapping); a response with
    ``call_on_close`` callbacks keeps werkzeug's closing iterator, so they run at the end."""
    from werkzeug.test import run_wsgi_app

    from flask_a2a.exchange.streams import Relay

    closed: list[str] = []

    @stream_app.after_request
    def on_close(response: t.Any) -> t.Any:
        if t.cast(t.Any, stream_app).config.get("ADD_ON_CLOSE"):
            response.call_on_close(lambda: closed.append("closed"))
        return response

    sclient = A2ATestClient(stream_app, token="alice")
    task_id = sclient.send(skill="gate", configuration={"returnImmediately": True})["task"]["id"]
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 3, "method": "SubscribeToTask", "params": {"id": task_id}}
    )
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/a2a",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
        "CONTENT_TYPE": "application/json",
        "HTTP_AUTHORIZATION": "Bearer alice",
        "HTTP_A2A_VERSION": "1.0",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body.encode()),
        "wsgi.errors": io.StringIO(),
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
    }
    app_iter = stream_app.wsgi_app(dict(environ), lambda *a: None)  # type: ignore[arg-type]
    assert isinstance(app_iter, Relay)
    assert next(iter(app_iter)).startswith(b"data: ")
    app_iter.close()
    stream_app.config["ADD_ON_CLOSE"] = True
    environ["wsgi.input"] = io.BytesIO(body.encode())
    app_iter, _, _ = run_wsgi_app(stream_app.wsgi_app, dict(environ))
    assert next(iter(app_iter)).startswith(b"data: ")
    t.cast(t.Any, app_iter).close()
    assert closed == ["closed"]
    gate.release.set()
