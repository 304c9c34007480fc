"""SubscribeToTask on a paused task follows it past the pause (issue 14 item 5).

A subscribe that starts on an INPUT_REQUIRED/AUTH_REQUIRED task stays open (keep-alives) until
the task is terminal or pauses again after the resume; streams that watched the task reach a
pause still close there.
"""

from __future__ import annotations

import itertools
import json
import threading
import typing as t
import uuid

import pytest
from flask import Flask

from flask_a2a import Part, Principal, Skill, TaskContext
from flask_a2a.testing import A2ATestClient, stream_event
from tests.conftest import SQL_KINDS, token_principal, wait_for

pytestmark = pytest.mark.usefixtures("binding")

KEEPALIVE = ": keep-alive\n\n"


class Asker:
    """Asks for a name; the reply "again" makes it ask once more; any other is greeted.

    With ``hold`` set, a resumed run waits for ``release`` before it greets (so a test can see
    the task WORKING from outside).
    """

    def __init__(self, hold: bool = False) -> None:
        self.hold = hold
        self.release = threading.Event()
        self.resumed = threading.Event()

    def handler(self, task: TaskContext) -> None:
        if len(task.history) < 2:
            task.require_input("name?")
            return
        if task.message.text == "again":
            task.require_input("name, really?")
            return
        self.resumed.set()
        while self.hold and not self.release.wait(0.01):
            task.check()
        task.artifact([Part(text=f"hi {task.message.text}")], name="greeting")


def open_stream(client: A2ATestClient, task_id: str, token: str = "alice") -> t.Any:
    return client.call("SubscribeToTask", {"id": task_id}, token=token, buffered=False)


def frames(response: t.Any) -> t.Iterator[str]:
    for chunk in response.response:
        yield chunk.decode() if isinstance(chunk, bytes) else chunk


def event(frame: str) -> t.Any:
    assert frame.startswith("data: ") and frame.endswith("\n\n"), frame
    return stream_event(json.loads(frame[6:]))["result"]


def label(result: t.Any) -> str:
    """A StreamResponse as the state it shows, or ``artifact:<text>``."""
    if "artifactUpdate" in result:
        return "artifact:" + result["artifactUpdate"]["artifact"]["parts"][0]["text"]
    status = (result.get("statusUpdate") or result["task"])["status"]
    return str(status["state"]).removeprefix("TASK_STATE_")


def rest(stream: t.Iterator[str], limit: int = 50) -> list[str]:
    """The labels of every event left, up to EOF (keep-alives skipped); fails when the
    stream is still open after ``limit`` frames (a stream that never ends)."""
    frames = list(itertools.islice(stream, limit))
    assert len(frames) < limit and next(stream, None) is None, frames[-3:]
    return [label(event(f)) for f in frames if f != KEEPALIVE]


@pytest.fixture
def asker() -> Asker:
    return Asker()


@pytest.fixture
def ask_app(make_app: t.Callable[..., Flask], asker: Asker) -> Flask:
    return make_app(skills=[Skill(id="ask", name="Ask", description="Ask.", handler=asker.handler)])


@pytest.fixture
def aclient(ask_app: Flask) -> A2ATestClient:
    return A2ATestClient(ask_app, token="alice")


def paused_task(client: A2ATestClient) -> str:
    task = client.send(skill="ask")["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return str(task["id"])


def test_subscribe_on_a_paused_task_sees_the_resume_and_the_completion(
    aclient: A2ATestClient, ask_app: Flask
) -> None:
    task_id = paused_task(aclient)
    stream = frames(open_stream(aclient, task_id))
    snapshot = event(next(stream))
    assert snapshot["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert next(stream) == KEEPALIVE  # still open while the task waits
    seats = ask_app.extensions["a2a"].exchange.seats
    assert seats.count("alice") == 1  # the waiting stream holds its seat
    done = aclient.send("Ada", task_id=task_id)["task"]  # the follow-up (SendMessage + taskId)
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert rest(stream) == ["WORKING", "artifact:hi Ada", "COMPLETED"]  # then EOF
    assert seats.count("alice") == 0


def test_a_second_pause_after_the_resume_ends_the_stream_there(aclient: A2ATestClient) -> None:
    task_id = paused_task(aclient)
    stream = frames(open_stream(aclient, task_id))
    event(next(stream))
    again = aclient.send("again", task_id=task_id)["task"]
    assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert rest(stream) == ["WORKING", "INPUT_REQUIRED"]
    # A subscribe on the new pause waits for it in turn.
    stream = frames(open_stream(aclient, task_id))
    assert event(next(stream))["task"]["status"]["message"]["parts"] == [{"text": "name, really?"}]
    aclient.send("Grace", task_id=task_id)
    assert rest(stream) == ["WORKING", "artifact:hi Grace", "COMPLETED"]


def test_canceling_the_paused_task_ends_the_stream_at_canceled(aclient: A2ATestClient) -> None:
    task_id = paused_task(aclient)
    streams = [frames(open_stream(aclient, task_id)) for _ in range(2)]
    for stream in streams:
        event(next(stream))
    canceled = aclient.rpc("CancelTask", {"id": task_id}).result
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    for stream in streams:
        assert rest(stream) == ["CANCELED"]


def test_a_paused_task_canceled_by_paused_retention_ends_its_stream(
    make_app: t.Callable[..., Flask], asker: Asker
) -> None:
    app = make_app(
        skills=[Skill(id="ask", name="Ask", description="Ask.", handler=asker.handler)],
        config={"A2A_PAUSED_TASK_RETENTION": 1},
    )
    client = A2ATestClient(app, token="alice")
    first = paused_task(client)
    stream = frames(open_stream(client, first))
    event(next(stream))
    paused_task(client)  # a second paused task: the oldest one is canceled
    assert rest(stream) == ["CANCELED"]


def test_erasing_a_paused_task_ends_its_stream_without_an_event(
    aclient: A2ATestClient, ask_app: Flask
) -> None:
    task_id = paused_task(aclient)
    response = open_stream(aclient, task_id)
    stream = frames(response)
    event(next(stream))
    ask_app.extensions["a2a"].exchange.store.erase_owner("alice")
    assert rest(stream) == []  # ended at the next keep-alive's poll
    assert ask_app.extensions["a2a"].exchange.seats.count("alice") == 0


def test_a_paused_subscriber_is_re_authed_at_keep_alives(
    make_app: t.Callable[..., Flask], asker: Asker
) -> None:
    tenants: dict[str, str | None] = {"alice": None}

    def principal() -> Principal | None:
        found = token_principal()
        if found is None or found.owner != "alice":
            return found
        return Principal(found.owner, found.scopes, tenants["alice"])

    app = make_app(
        skills=[Skill(id="ask", name="Ask", description="Ask.", handler=asker.handler)],
        principal=principal,
    )
    client = A2ATestClient(app, token="alice")
    task_id = paused_task(client)
    stream = frames(open_stream(client, task_id))
    event(next(stream))
    assert next(stream) == KEEPALIVE
    tenants["alice"] = "t9"
    left = [f for f in itertools.islice(stream, 50) if f != KEEPALIVE]
    assert len(left) == 1 and next(stream, None) is None  # the refusal, then the end
    assert "-31401" in left[0] or '"code":401' in left[0]


def test_a_subscribe_that_watched_the_task_pause_still_closes_at_the_pause(
    make_app: t.Callable[..., Flask],
) -> None:
    go = threading.Event()

    def later(task: TaskContext) -> None:
        task.working()
        while not go.wait(0.01):
            task.check()
        task.require_input("name?")

    app = make_app(skills=[Skill(id="later", name="Later", description="L.", handler=later)])
    client = A2ATestClient(app, token="alice")
    task = client.send(skill="later", configuration={"returnImmediately": True})["task"]
    assert wait_for(
        lambda: (
            client.rpc("GetTask", {"id": task["id"]}).result["status"]["state"]
            == "TASK_STATE_WORKING"
        )
    )
    stream = frames(open_stream(client, task["id"]))
    assert label(event(next(stream))) == "WORKING"
    go.set()
    assert rest(stream) == ["INPUT_REQUIRED"]


# ------------------------------------------------------------------ replicas (the poll path)


@pytest.fixture(params=SQL_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return t.cast(str, request.param)


def test_a_subscriber_on_b_sees_a_resume_on_a_and_the_completion(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any]
) -> None:
    prefix = f"a2a_{uuid.uuid4().hex[:10]}_"
    asker = Asker(hold=True)
    skills = [Skill(id="ask", name="Ask", description="Ask.", handler=asker.handler)]
    config = {"A2A_REPLICA_POLL_INTERVAL": 0.05, "A2A_KEEPALIVE_INTERVAL": 5.0}
    a = A2ATestClient(
        make_app(skills=skills, config=config, store=new_store(table_prefix=prefix)), "alice"
    )
    b = A2ATestClient(
        make_app(skills=skills, config=config, store=new_store(table_prefix=prefix)), "alice"
    )
    task_id = paused_task(a)
    stream = frames(open_stream(b, task_id))
    assert label(event(next(stream))) == "INPUT_REQUIRED"
    resumed = a.rpc(
        "SendMessage",
        {
            "message": a.message("Ada", task_id=task_id),
            "configuration": {"returnImmediately": True},
        },
    ).result
    assert resumed["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert asker.resumed.wait(10)
    # B's poll shows the resumed task while A's run still holds it WORKING…
    assert label(event(next(stream))) == "WORKING"
    asker.release.set()
    # …and then the completion (a snapshot: the events happened on A), then EOF.
    snapshots = [event(f) for f in itertools.islice(stream, 50) if f != KEEPALIVE]
    assert [label(s) for s in snapshots][-1] == "COMPLETED"
    assert snapshots[-1]["task"]["artifacts"][0]["parts"] == [{"text": "hi Ada"}]


def test_a_second_pause_on_a_ends_the_stream_on_b(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any]
) -> None:
    prefix = f"a2a_{uuid.uuid4().hex[:10]}_"
    asker = Asker()
    skills = [Skill(id="ask", name="Ask", description="Ask.", handler=asker.handler)]
    config = {"A2A_REPLICA_POLL_INTERVAL": 0.05, "A2A_KEEPALIVE_INTERVAL": 5.0}
    a = A2ATestClient(
        make_app(skills=skills, config=config, store=new_store(table_prefix=prefix)), "alice"
    )
    b = A2ATestClient(
        make_app(skills=skills, config=config, store=new_store(table_prefix=prefix)), "alice"
    )
    task_id = paused_task(a)
    stream = frames(open_stream(b, task_id))
    event(next(stream))
    a.send("again", task_id=task_id)  # resumed and paused again between two of B's polls
    shown = rest(stream)
    assert shown[-1] == "INPUT_REQUIRED" and set(shown) <= {"WORKING", "INPUT_REQUIRED"}
