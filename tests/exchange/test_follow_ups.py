"""Follow-up messages to a task still running (spec §3.3.3), read by the handler.

A message naming a SUBMITTED or WORKING task is appended to its history in one versioned
write (no run slot, no new run) and handed to the live run wherever it runs; the handler
reads it with ``task.receive()``. ``returnImmediately`` answers the task at once, a blocking
send waits for the run, a stream follows the run from a snapshot holding the message.
"""

from __future__ import annotations

import threading
import typing as t
import uuid

import pytest
from flask import Flask

from flask_a2a import Message, Part, Role, Skill, TaskContext
from flask_a2a.testing import A2ATestClient
from tests.conftest import SQL_KINDS, wait_for
from tests.exchange.test_runs import CountingStore, exchange_of

pytestmark = pytest.mark.usefixtures("binding")


class Chat:
    """A handler that reads follow-ups until it is told "bye", then completes."""

    def __init__(self, act: bool = True) -> None:
        self.act = act
        self.calls = 0
        self.entered = threading.Event()
        self.received: list[Message] = []
        self.done = threading.Event()

    def handler(self, task: TaskContext) -> None:
        self.calls += 1
        if self.act:
            task.working()
        self.entered.set()
        for _ in range(100):
            message = task.receive(timeout=10)
            if message is None:
                break
            self.received.append(message)
            if message.text == "bye":
                break
        texts = [m.text for m in self.received]
        if self.act:
            task.artifact([Part(text=" ".join(texts))], name="heard")
        self.done.set()
        task.complete(f"heard {len(texts)}")


def app_with(
    make_app: t.Callable[..., Flask], chat: Chat, **config: t.Any
) -> tuple[Flask, CountingStore]:
    store = CountingStore()
    skills = [Skill(id="chat", name="Chat", description="Chats.", handler=chat.handler)]
    return make_app(skills=skills, store=store, config=config), store


def start(client: A2ATestClient, chat: Chat) -> dict[str, t.Any]:
    task = client.send("hello", skill="chat", configuration={"returnImmediately": True})["task"]
    assert chat.entered.wait(10)
    return t.cast(dict[str, t.Any], task)


def follow_up(
    client: A2ATestClient, task_id: str, text: str, *, wait: bool = False, **options: t.Any
) -> t.Any:
    params: dict[str, t.Any] = {"message": client.message(text, task_id=task_id, **options)}
    if not wait:
        params["configuration"] = {"returnImmediately": True}
    return client.rpc("SendMessage", params)


def test_a_follow_up_to_a_working_task_is_appended_and_reaches_the_handler(
    make_app: t.Callable[..., Flask],
) -> None:
    chat = Chat()
    app, store = app_with(make_app, chat)
    client = A2ATestClient(app, token="alice")
    task = start(client, chat)
    exchange = exchange_of(app)
    assert wait_for(lambda: client.rpc("GetTask", {"id": task["id"]}).result["status"]["state"]
                    == "TASK_STATE_WORKING")  # fmt: skip
    writes = (store.creates, store.updates)

    answer = follow_up(client, task["id"], "more", message_id="m-more").result["task"]
    assert answer["status"]["state"] == "TASK_STATE_WORKING"
    assert [m["messageId"] for m in answer["history"]][-1] == "m-more"
    assert answer["history"][-1]["contextId"] == task["contextId"]  # joined the task's context
    assert (store.creates, store.updates) == (writes[0], writes[1] + 1)  # one versioned write
    assert exchange.slots.held("alice") == 1  # the run's slot only: none for the follow-up
    assert wait_for(lambda: [m.message_id for m in chat.received] == ["m-more"])
    assert chat.received[0].role is Role.USER and chat.received[0].text == "more"

    done = follow_up(client, task["id"], "bye", wait=True).result["task"]  # waits for the run
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["status"]["message"]["parts"] == [{"text": "heard 2"}]
    assert done["artifacts"][0]["parts"] == [{"text": "more bye"}]
    texts = [m["parts"][0]["text"] for m in done["history"]]
    assert texts == ["hello", "more", "bye", "heard 2"]
    assert chat.calls == 1  # no new run
    assert wait_for(lambda: exchange.slots.held("alice") == 0)


def test_a_submitted_task_accepts_a_follow_up(make_app: t.Callable[..., Flask]) -> None:
    chat = Chat(act=False)  # never moves the task out of SUBMITTED before it completes
    app, _ = app_with(make_app, chat)
    client = A2ATestClient(app, token="alice")
    task = start(client, chat)
    answer = follow_up(client, task["id"], "bye").result["task"]
    assert answer["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert chat.done.wait(10)
    assert [m.text for m in chat.received] == ["bye"]
    assert wait_for(lambda: client.rpc("GetTask", {"id": task["id"]}).result["status"]["state"]
                    == "TASK_STATE_COMPLETED")  # fmt: skip


def test_a_terminal_task_still_refuses_and_names_its_state(
    make_app: t.Callable[..., Flask],
) -> None:
    chat = Chat()
    app, store = app_with(make_app, chat)
    client = A2ATestClient(app, token="alice")
    task = start(client, chat)
    assert follow_up(client, task["id"], "bye", wait=True).result["task"]["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )
    writes = (store.creates, store.updates)
    refused = follow_up(client, task["id"], "again")
    assert refused.code == -32004
    assert refused.error["message"] == "task is TASK_STATE_COMPLETED; a follow-up needs a new task"
    assert (store.creates, store.updates) == writes


def test_another_owners_follow_up_is_task_not_found_and_changes_nothing(
    make_app: t.Callable[..., Flask],
) -> None:
    chat = Chat()
    app, store = app_with(make_app, chat)
    alice = A2ATestClient(app, token="alice")
    task = start(alice, chat)
    before = alice.rpc("GetTask", {"id": task["id"]}).result
    writes = (store.creates, store.updates)
    for token in ("bob", "alice-t2", "alice-read"):
        refused = follow_up(A2ATestClient(app, token=token), task["id"], "hijack")
        assert refused.code == -32001, token
    assert (store.creates, store.updates) == writes
    assert alice.rpc("GetTask", {"id": task["id"]}).result == before
    assert chat.received == []
    follow_up(alice, task["id"], "bye")
    assert chat.done.wait(10)
    assert [m.text for m in chat.received] == ["bye"]


def test_a_follow_up_with_another_context_is_invalid_params(
    make_app: t.Callable[..., Flask],
) -> None:
    chat = Chat()
    app, store = app_with(make_app, chat)
    client = A2ATestClient(app, token="alice")
    task = start(client, chat)
    writes = (store.creates, store.updates)
    refused = follow_up(client, task["id"], "x", context_id="another")
    assert refused.code == -32602
    assert (store.creates, store.updates) == writes
    follow_up(client, task["id"], "bye")


def test_follow_ups_keep_the_history_bound_and_all_reach_the_handler(
    make_app: t.Callable[..., Flask],
) -> None:
    chat = Chat()
    app, _ = app_with(make_app, chat, A2A_MAX_HISTORY=3)
    client = A2ATestClient(app, token="alice")
    task = start(client, chat)
    for n in range(4):
        answer = follow_up(client, task["id"], f"f{n}").result["task"]
        assert len(answer["history"]) <= 3
    assert [m["parts"][0]["text"] for m in answer["history"]] == ["f1", "f2", "f3"]
    follow_up(client, task["id"], "bye")
    assert chat.done.wait(10)
    assert [m.text for m in chat.received] == ["f0", "f1", "f2", "f3", "bye"]


def test_a_streamed_follow_up_starts_from_the_task_holding_it_and_follows_the_run(
    make_app: t.Callable[..., Flask],
) -> None:
    chat = Chat()
    app, _ = app_with(make_app, chat)
    client = A2ATestClient(app, token="alice")
    task = start(client, chat)
    params = {"message": client.message("bye", task_id=task["id"], message_id="m-bye")}
    response, events = client.stream("SendStreamingMessage", params)
    assert response.status_code == 200
    kinds = [next(iter(e["result"])) for e in events]
    assert kinds == ["task", "artifactUpdate", "statusUpdate"]
    first = events[0]["result"]["task"]
    assert first["history"][-1]["messageId"] == "m-bye"
    assert first["status"]["state"] == "TASK_STATE_WORKING"
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert exchange_of(app).seats.count("alice") == 0


def test_an_open_subscription_sees_no_event_for_the_follow_up_itself(
    make_app: t.Callable[..., Flask],
) -> None:
    chat = Chat()
    app, _ = app_with(make_app, chat)
    client = A2ATestClient(app, token="alice")
    task = start(client, chat)
    exchange = exchange_of(app)
    events: list[t.Any] = []
    thread = threading.Thread(
        target=lambda: events.extend(client.stream("SubscribeToTask", {"id": task["id"]})[1])
    )
    thread.start()
    assert wait_for(lambda: exchange.bus.subscriber_count(task["id"]) == 1)
    follow_up(client, task["id"], "bye")
    thread.join(10)
    kinds = [next(iter(e["result"])) for e in events]
    assert kinds == ["task", "artifactUpdate", "statusUpdate"]  # the append is in history only


def test_a_run_whose_write_loses_to_a_follow_up_written_elsewhere_builds_over_it(
    make_app: t.Callable[..., Flask],
) -> None:
    """Another replica's follow-up lands in the store before the run's own next write: the run
    takes the newer row (and its message) and writes over it instead of giving up."""
    chat = Chat()
    app, store = app_with(make_app, chat)
    client = A2ATestClient(app, token="alice")
    task = start(client, chat)
    exchange = exchange_of(app)
    (run,) = exchange.live_runs()
    with run.lock:  # as another process would: straight to the store, past the run
        stored = store.get_task(task["id"])
        foreign = Message(str(uuid.uuid4()), Role.USER, (Part(text="bye"),), task["contextId"],
                          task["id"])  # fmt: skip
        exchange.writer.append(stored, foreign)
        with run.inbox_ready:
            run.inbox.append(Message("nudge", Role.USER, (Part(text="bye"),)))
    assert chat.done.wait(10)
    assert wait_for(lambda: not exchange.live_runs())
    final = client.rpc("GetTask", {"id": task["id"]}).result
    assert final["status"]["state"] == "TASK_STATE_COMPLETED"  # not canceled by the conflict
    texts = [m["parts"][0]["text"] for m in final["history"]]
    assert texts == ["hello", "bye", "heard 1"]


def test_a_follow_up_to_a_handed_off_task_waits_for_the_updater(
    make_app: t.Callable[..., Flask],
) -> None:
    """No run holds a handed-off task: the follow-up is stored for the job to read, and a
    blocking send answers once the job settles the task."""
    handed: list[str] = []

    def report(task: TaskContext) -> None:
        task.hand_off("queued")
        handed.append(task.id)

    app = make_app(skills=[Skill(id="report", name="r", description="r", handler=report)])
    client = A2ATestClient(app, token="alice")
    working = client.send(skill="report")["task"]
    assert working["status"]["state"] == "TASK_STATE_WORKING" and handed == [working["id"]]
    queued = follow_up(client, working["id"], "also this").result["task"]
    assert queued["history"][-1]["parts"] == [{"text": "also this"}]

    answers: list[t.Any] = []
    waiting = threading.Thread(
        target=lambda: answers.append(follow_up(client, working["id"], "done?", wait=True))
    )
    exchange = exchange_of(app)
    waiting.start()
    stored = exchange.store.get_task
    assert wait_for(lambda: stored(working["id"]).task.history[-1].text == "done?")
    updater = exchange.task_updater(working["id"])
    assert [m.parts[0].text for m in updater.task.history][-2:] == ["also this", "done?"]
    updater.complete("report ready")
    waiting.join(10)
    (answer,) = answers
    assert answer.result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


# ---------------------------------------------------------------- across replicas


@pytest.fixture(params=SQL_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return t.cast(str, request.param)


def test_a_follow_up_through_another_replica_reaches_the_run(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any]
) -> None:
    prefix = f"a2a_{uuid.uuid4().hex[:10]}_"
    chat = Chat()
    skills = [Skill(id="chat", name="Chat", description="Chats.", handler=chat.handler)]
    config = {"A2A_REPLICA_POLL_INTERVAL": 0.05, "A2A_KEEPALIVE_INTERVAL": 5.0}
    app_a = make_app(skills=skills, config=config, store=new_store(table_prefix=prefix))
    app_b = make_app(skills=skills, config=config, store=new_store(table_prefix=prefix))
    a, b = A2ATestClient(app_a, token="alice"), A2ATestClient(app_b, token="alice")
    task = start(a, chat)
    assert wait_for(lambda: b.rpc("GetTask", {"id": task["id"]}).result["status"]["state"]
                    == "TASK_STATE_WORKING")  # fmt: skip

    more = follow_up(b, task["id"], "more").result["task"]
    assert more["history"][-1]["parts"] == [{"text": "more"}]
    assert wait_for(lambda: [m.text for m in chat.received] == ["more"])

    done = follow_up(b, task["id"], "bye", wait=True).result["task"]  # B waits on the store
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [m.text for m in chat.received] == ["more", "bye"]
    texts = [m["parts"][0]["text"] for m in done["history"]]
    assert texts == ["hello", "more", "bye", "heard 2"]
    assert not exchange_of(app_b).live_runs() and chat.calls == 1
