"""A skill answers with a Message instead of a Task (``task.reply()``, spec §3.1.1, §3.1.2).

A reply is possible while nobody but the run has seen the task: a blocking send's held task is
never written, and a stream's first event waits for the handler's first change, so a reply is
the stream's one event. Once the caller has the task (``returnImmediately``, a resume, an
inline push config, ``A2A_BLOCKING_WRITE_DELAY`` 0) or the handler changed it, ``reply()``
raises ``TaskVisibleError`` in the handler and the caller keeps getting the task.
"""

from __future__ import annotations

import threading
import typing as t

import pytest
from flask import Flask

from flask_a2a import Message, Part, Role, Skill, TaskContext, TaskSettled, TaskVisibleError
from flask_a2a.testing import A2ATestClient, parse_sse
from tests.conftest import wait_for
from tests.exchange.test_runs import exchange_of

pytestmark = pytest.mark.usefixtures("binding")

LONG = 60.0  # a write delay no test reaches


class Replier:
    """Skill handlers that reply, recording what the handler saw."""

    def __init__(self) -> None:
        self.task_ids: list[str] = []
        self.errors: list[BaseException] = []
        self.sent: list[Message] = []
        self.returned = threading.Event()

    def pong(self, task: TaskContext) -> None:
        self.task_ids.append(task.id)
        self.sent.append(task.reply(f"pong: {task.message.text}"))
        self.returned.set()

    def late(self, task: TaskContext) -> None:
        """Replies after a change: refused, then settles the task instead."""
        task.working()
        try:
            task.reply("too late")
        except TaskVisibleError as exc:
            self.errors.append(exc)
            task.complete("completed instead")

    def uncaught(self, task: TaskContext) -> None:
        task.artifact([Part(text="partial")], name="partial")
        task.reply("too late")  # raises: the task fails like any raising handler

    def twice(self, task: TaskContext) -> None:
        task.reply("one")
        try:
            task.reply("two")
        except TaskSettled as exc:
            self.errors.append(exc)
        self.returned.set()

    def paused(self, task: TaskContext) -> None:
        if len(task.history) < 2:
            task.require_input("and?")
            return
        try:
            task.reply("a resumed task is the caller's already")
        except TaskVisibleError as exc:
            self.errors.append(exc)
            raise


def app_with(
    make_app: t.Callable[..., Flask], replier: Replier, delay: float = LONG, **config: t.Any
) -> Flask:
    handlers = {
        "pong": replier.pong, "late": replier.late, "uncaught": replier.uncaught,
        "twice": replier.twice, "paused": replier.paused,
    }  # fmt: skip
    skills = [Skill(id=k, name=k, description=k, handler=h) for k, h in handlers.items()]
    return make_app(skills=skills, config={"A2A_BLOCKING_WRITE_DELAY": delay, **config})


def assert_no_task(client: A2ATestClient, task_id: str) -> None:
    """Nothing of the run remains: not listed, not found, not stored, no run slot."""
    assert client.rpc("GetTask", {"id": task_id}).code == -32001
    listed = client.rpc("ListTasks", {}).result
    assert (listed["tasks"], listed["totalSize"]) == ([], 0)
    exchange = exchange_of(client.app)
    assert exchange.store.get_task(task_id) is None
    assert wait_for(lambda: exchange.slots.held("alice") == 0 and not exchange.live_runs())


def test_a_reply_answers_send_message_with_the_message_and_leaves_no_task(
    make_app: t.Callable[..., Flask],
) -> None:
    replier = Replier()
    client = A2ATestClient(app_with(make_app, replier), token="alice")
    message = client.message("ping", skill="pong", context_id="ctx-caller")
    answer = client.rpc("SendMessage", {"message": message}).result
    (sent,) = replier.sent
    assert answer == {
        "message": {
            "messageId": sent.message_id,
            "role": "ROLE_AGENT",
            "parts": [{"text": "pong: ping"}],
            "contextId": "ctx-caller",  # the caller's context; no taskId: there is no task
        }
    }
    assert sent.message_id != message["messageId"] and sent.role is Role.AGENT
    assert_no_task(client, replier.task_ids[0])


def test_a_reply_without_a_context_names_a_fresh_one(make_app: t.Callable[..., Flask]) -> None:
    replier = Replier()
    client = A2ATestClient(app_with(make_app, replier), token="alice")
    first = client.send("a", skill="pong")["message"]
    second = client.send("b", skill="pong")["message"]
    assert first["contextId"] and second["contextId"] and first["contextId"] != second["contextId"]
    assert "taskId" not in first


def test_a_streamed_reply_is_one_message_event_then_the_end(
    make_app: t.Callable[..., Flask],
) -> None:
    replier = Replier()
    client = A2ATestClient(app_with(make_app, replier), token="alice")
    params = {"message": client.message("ping", skill="pong", context_id="ctx-s")}
    response, events = client.stream("SendStreamingMessage", params)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    (event,) = events  # exactly one event, and the body ended
    assert event["result"] == {
        "message": {
            "messageId": replier.sent[0].message_id,
            "role": "ROLE_AGENT",
            "parts": [{"text": "pong: ping"}],
            "contextId": "ctx-s",
        }
    }
    assert_no_task(client, replier.task_ids[0])
    assert exchange_of(client.app).seats.count("alice") == 0


def test_a_reply_may_carry_parts_data_or_a_whole_message(
    make_app: t.Callable[..., Flask],
) -> None:
    contents: list[t.Any] = [
        {"total": 3},
        [Part(text="a"), Part(data=[1, 2])],
        Message("ignored", Role.USER, (Part(text="m"),), "other-ctx", "other-task", {"k": 1}),
    ]
    seen: list[t.Any] = []

    def reply(task: TaskContext) -> None:
        seen.append(task.reply(contents[len(seen)]))

    client = A2ATestClient(
        make_app(skills=[Skill(id="r", name="r", description="r", handler=reply)]),
        token="alice",
    )
    answers = [client.send("x", skill="r")["message"] for _ in contents]
    assert answers[0]["parts"] == [{"data": {"total": 3}}]
    assert answers[1]["parts"] == [{"text": "a"}, {"data": [1, 2]}]
    third = answers[2]
    assert third["parts"] == [{"text": "m"}] and third["metadata"] == {"k": 1}
    assert third["role"] == "ROLE_AGENT" and "taskId" not in third
    assert third["contextId"] != "other-ctx" and third["messageId"] != "ignored"


def test_a_reply_after_a_change_is_the_handlers_error_and_the_caller_gets_the_task(
    make_app: t.Callable[..., Flask],
) -> None:
    replier = Replier()
    client = A2ATestClient(app_with(make_app, replier), token="alice")
    task = client.send("x", skill="late")["task"]  # a blocking send: the task was still held
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["message"]["parts"] == [{"text": "completed instead"}]
    (error,) = replier.errors
    assert "reply() must be the handler's first action" in str(error)

    streamed = client.stream("SendStreamingMessage", {"message": client.message(skill="late")})[1]
    kinds = [next(iter(e["result"])) for e in streamed]
    assert kinds == ["task", "statusUpdate", "statusUpdate"]  # SUBMITTED, WORKING, COMPLETED
    assert streamed[0]["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert len(replier.errors) == 2


def test_an_uncaught_late_reply_fails_the_task_like_any_raising_handler(
    make_app: t.Callable[..., Flask],
) -> None:
    replier = Replier()
    client = A2ATestClient(app_with(make_app, replier), token="alice")
    task = client.send("x", skill="uncaught")["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert task["status"]["message"]["parts"] == [{"text": "skill handler failed"}]
    assert [a["name"] for a in task["artifacts"]] == ["partial"]


def test_a_return_immediately_send_has_its_task_already(make_app: t.Callable[..., Flask]) -> None:
    replier = Replier()
    client = A2ATestClient(app_with(make_app, replier), token="alice")
    params = {
        "message": client.message("ping", skill="late"),
        "configuration": {"returnImmediately": True},
    }
    submitted = client.rpc("SendMessage", params).result["task"]
    assert submitted["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert wait_for(lambda: len(replier.errors) == 1)
    exchange = exchange_of(client.app)
    assert wait_for(lambda: not exchange.live_runs())
    stored = client.rpc("GetTask", {"id": submitted["id"]}).result
    assert stored["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_write_delay_of_zero_writes_every_task_at_once_so_no_reply(
    make_app: t.Callable[..., Flask],
) -> None:
    replier = Replier()
    client = A2ATestClient(app_with(make_app, replier, delay=0), token="alice")
    task = client.send("x", skill="late")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(replier.errors) == 1


def test_a_resumed_task_cannot_reply(make_app: t.Callable[..., Flask]) -> None:
    replier = Replier()
    client = A2ATestClient(app_with(make_app, replier), token="alice")
    paused = client.send("x", skill="paused")["task"]
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    resumed = client.send("more", task_id=paused["id"])["task"]
    assert resumed["status"]["state"] == "TASK_STATE_FAILED"
    assert len(replier.errors) == 1 and isinstance(replier.errors[0], TaskVisibleError)


def test_a_second_reply_raises_and_the_first_stands(make_app: t.Callable[..., Flask]) -> None:
    replier = Replier()
    client = A2ATestClient(app_with(make_app, replier), token="alice")
    answer = client.send("x", skill="twice")
    assert answer["message"]["parts"] == [{"text": "one"}]
    assert replier.returned.wait(10)
    (error,) = replier.errors
    assert isinstance(error, TaskSettled) and "replied with a message" in str(error)


def test_a_reply_refused_as_data_names_what_it_takes(make_app: t.Callable[..., Flask]) -> None:
    def bad(task: TaskContext) -> None:
        task.reply(3)  # type: ignore[arg-type]

    client = A2ATestClient(
        make_app(skills=[Skill(id="b", name="b", description="b", handler=bad)]), token="alice"
    )
    task = client.send("x", skill="b")["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    text = task["status"]["message"]["parts"][0]["text"]
    assert text.startswith("reply() takes a str, bytes, a dict") and text.endswith("got int")


# ---------------------------------------------------------------- the stream's deferred first event


class Quiet:
    """A handler that makes no change until the test lets it, then completes."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.task_id = ""

    def handler(self, task: TaskContext) -> None:
        self.task_id = task.id
        self.entered.set()
        while not self.release.wait(0.01):
            task.check()


def test_a_stream_whose_handler_never_acts_shows_its_task_after_the_write_delay(
    make_app: t.Callable[..., Flask],
) -> None:
    quiet = Quiet()
    app = make_app(
        skills=[Skill(id="q", name="q", description="q", handler=quiet.handler)],
        config={"A2A_BLOCKING_WRITE_DELAY": 0.05, "A2A_KEEPALIVE_INTERVAL": 5},
    )
    client = A2ATestClient(app, token="alice")
    params = {"message": client.message("x", skill="q")}
    answer = client.call("SendStreamingMessage", params, buffered=False)
    frames = t.cast(t.Iterator[bytes], iter(answer.response))
    first = client.event(parse_sse(next(frames).decode())[0])["result"]["task"]  # after 0.05 s
    assert first["status"]["state"] == "TASK_STATE_SUBMITTED" and first["id"] == quiet.task_id
    listed = client.rpc("ListTasks", {}).result["tasks"]
    assert [t["id"] for t in listed] == [quiet.task_id]

    canceled = client.rpc("CancelTask", {"id": quiet.task_id}).result
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    rest = [client.event(e) for e in parse_sse(b"".join(frames).decode())]
    assert [e["result"]["statusUpdate"]["status"]["state"] for e in rest] == ["TASK_STATE_CANCELED"]


def test_a_held_stream_task_is_invisible_until_shown(make_app: t.Callable[..., Flask]) -> None:
    quiet = Quiet()
    app = make_app(
        skills=[Skill(id="q", name="q", description="q", handler=quiet.handler)],
        config={"A2A_BLOCKING_WRITE_DELAY": LONG},
    )
    client = A2ATestClient(app, token="alice")
    events: list[t.Any] = []
    thread = threading.Thread(
        target=lambda: events.extend(
            client.stream("SendStreamingMessage", {"message": client.message(skill="q")})[1]
        )
    )
    thread.start()
    try:
        assert quiet.entered.wait(10)
        assert client.rpc("GetTask", {"id": quiet.task_id}).code == -32001
        assert client.rpc("SubscribeToTask", {"id": quiet.task_id}).code == -32001
        assert client.rpc("ListTasks", {}).result["tasks"] == []
    finally:
        quiet.release.set()  # the handler returns: the run completes it, which shows it
        thread.join(10)
    kinds = [next(iter(e["result"])) for e in events]
    assert kinds == ["task", "statusUpdate"]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("delay", [LONG, 0.0], ids=["held", "written-at-once"])
def test_a_stream_still_begins_with_the_submitted_task(
    make_app: t.Callable[..., Flask], delay: float
) -> None:
    def steps(task: TaskContext) -> None:
        task.working()
        task.artifact([Part(text="x")], name="x")

    app = make_app(
        skills=[Skill(id="s", name="s", description="s", handler=steps)],
        config={"A2A_BLOCKING_WRITE_DELAY": delay},
    )
    client = A2ATestClient(app, token="alice")
    events = client.stream("SendStreamingMessage", {"message": client.message(skill="s")})[1]
    kinds = [next(iter(e["result"])) for e in events]
    assert kinds == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    assert events[0]["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"


def test_a_value_returned_after_a_reply_is_dropped_with_a_warning(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    def both(task: TaskContext) -> str:
        task.reply("the answer")
        return "also this"

    client = A2ATestClient(
        make_app(skills=[Skill(id="both", name="b", description="b", handler=both)]),
        token="alice",
    )
    with caplog.at_level("WARNING", logger="flask_a2a"):
        answer = client.send("x", skill="both")
    assert answer["message"]["parts"] == [{"text": "the answer"}]
    assert "skill both returned a str after its task became a reply" in caplog.text
