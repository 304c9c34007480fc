"""A blocking SendMessage's task is written once (``A2A_BLOCKING_WRITE_DELAY``).

Nobody but the run learns the task's id before a blocking send answers, so the run keeps the
task's changes in memory and writes it when it settles, pauses or hands off, or once the delay
has passed. Everything a client can observe is written at once: streams, ``returnImmediately``,
inline push configs, and a delay of 0.
"""

from __future__ import annotations

import threading
import typing as t

import pytest
from flask import Flask

from flask_a2a import Part, Skill, TaskContext
from flask_a2a.store import ListQuery
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, wait_for
from tests.exchange.test_runs import CountingStore, exchange_of

pytestmark = pytest.mark.usefixtures("binding")

LONG = 60.0  # a delay no test reaches: the held task is written only by what the test does


def echo_twice(task: TaskContext) -> None:
    task.working()
    task.artifact([Part(text=task.message.text)], name="echo")
    task.artifact([Part(text=task.message.text)], name="again")


def app_for(
    make_app: t.Callable[..., Flask], store: t.Any, delay: float = LONG, **handlers: t.Any
) -> Flask:
    handlers.setdefault("echo2", echo_twice)
    skills = [Skill(id=k, name=k, description=k, handler=h) for k, h in handlers.items()]
    return make_app(skills=skills, store=store, config={"A2A_BLOCKING_WRITE_DELAY": delay})


def test_a_blocking_send_writes_its_task_once(make_app: t.Callable[..., Flask]) -> None:
    store = CountingStore()
    client = A2ATestClient(app_for(make_app, store), token="alice")
    task = client.send("hi", skill="echo2")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [a["name"] for a in task["artifacts"]] == ["echo", "again"]
    assert (store.creates, store.updates) == (1, 0)  # four changes, one write
    stored = client.rpc("GetTask", {"id": task["id"]}).result
    assert stored == task


@pytest.mark.parametrize(
    "observed",
    [
        {"configuration": {"returnImmediately": True}},
        {"stream": True},
    ],
    ids=["return-immediately", "stream"],
)
def test_what_a_client_can_observe_is_written_at_once(
    make_app: t.Callable[..., Flask], gate: Gate, observed: dict[str, t.Any]
) -> None:
    store = CountingStore()
    client = A2ATestClient(app_for(make_app, store, gate=gate.handler), token="alice")
    params = {"message": client.message("go", skill="gate"), **observed}
    stream = params.pop("stream", False)
    if stream:
        thread = threading.Thread(target=lambda: client.stream("SendStreamingMessage", params))
        thread.start()
    else:
        assert client.rpc("SendMessage", params).result["task"]["status"]["state"] in (
            "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING",
        )  # fmt: skip
    assert gate.entered.wait(10)
    (run,) = exchange_of(client.app).live_runs()
    assert run.record.version >= 1 and store.get_task(run.task_id) is not None
    gate.release.set()
    assert run.done.wait(10)
    if stream:
        thread.join(10)


def test_a_long_blocking_run_is_written_after_the_delay(
    make_app: t.Callable[..., Flask], gate: Gate
) -> None:
    store = CountingStore()
    app = app_for(make_app, store, delay=0.05, gate=gate.handler)
    client = A2ATestClient(app, token="alice")
    answers: list[t.Any] = []
    thread = threading.Thread(target=lambda: answers.append(client.send("go", skill="gate")))
    thread.start()
    assert gate.entered.wait(10)
    # Listed (as WORKING) once the delay has passed, while the handler still runs.
    assert wait_for(lambda: store.creates == 1)
    (listed,) = client.rpc("ListTasks", {}).result["tasks"]
    assert listed["status"]["state"] == "TASK_STATE_WORKING"
    gate.release.set()
    thread.join(10)
    task = answers[0]["task"]
    assert task["id"] == listed["id"] and task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert client.rpc("GetTask", {"id": task["id"]}).result == task


def test_a_held_run_past_its_write_still_meets_its_deadline(
    make_app: t.Callable[..., Flask],
) -> None:
    """The run's one timer writes the held task, then is armed again for the deadline: a
    handler that never checks its task is still answered FAILED at the deadline."""
    store = CountingStore()
    entered, release = threading.Event(), threading.Event()

    def deaf(task: TaskContext) -> None:
        task.working()
        entered.set()
        release.wait(10)  # no task.check(): only the deadline's timer can end the send

    skills = [Skill(id="deaf", name="deaf", description="deaf", handler=deaf)]
    app = make_app(
        skills=skills,
        store=store,
        config={
            "A2A_BLOCKING_WRITE_DELAY": 0.05,
            "A2A_TASK_TIMEOUT": 0.6,
        },
    )
    client = A2ATestClient(app, token="alice")
    answers: list[t.Any] = []
    thread = threading.Thread(target=lambda: answers.append(client.send("go", skill="deaf")))
    thread.start()
    try:
        assert entered.wait(10)
        assert wait_for(lambda: store.creates == 1)  # written after the delay, still running
        (listed,) = client.rpc("ListTasks", {}).result["tasks"]
        assert listed["status"]["state"] == "TASK_STATE_WORKING"
        thread.join(10)
        assert not thread.is_alive() and not release.is_set()
    finally:
        release.set()
    task = answers[0]["task"]
    assert task["id"] == listed["id"] and task["status"]["state"] == "TASK_STATE_FAILED"
    assert task["status"]["message"]["parts"] == [{"text": "task timed out"}]


def test_a_held_task_is_not_listed_and_leaves_nothing_when_the_run_is_cut(
    make_app: t.Callable[..., Flask], gate: Gate
) -> None:
    """Until its first write the task is the run's alone; shutdown still settles it CANCELED
    and writes that, so the blocked caller gets a task the store holds."""
    store = CountingStore()
    app = app_for(make_app, store, gate=gate.handler)
    client = A2ATestClient(app, token="alice")
    answers: list[t.Any] = []
    thread = threading.Thread(target=lambda: answers.append(client.send("go", skill="gate")))
    thread.start()
    assert gate.entered.wait(10)
    assert client.rpc("ListTasks", {}).result["tasks"] == []
    assert store.creates == 0
    exchange_of(app).shutdown(timeout=5)
    thread.join(10)
    task = answers[0]["task"]
    assert task["status"]["state"] == "TASK_STATE_CANCELED"
    stored = store.get_task(task["id"])
    assert stored is not None and stored.task.status.state.value == "TASK_STATE_CANCELED"
    assert store.creates == 1


@pytest.mark.parametrize("working_first", [False, True])
def test_hand_off_writes_the_task_before_it_returns(
    make_app: t.Callable[..., Flask], working_first: bool
) -> None:
    """The recipe enqueues the job right after hand_off(): the worker must find the task, also
    when the task was WORKING already (hand_off() with no text then changes nothing else)."""
    store = CountingStore()
    found: list[t.Any] = []

    def report(task: TaskContext) -> None:
        if working_first:
            task.working()
            task.hand_off()
        else:
            task.hand_off("queued")
        found.append(store.get_task(task.id))

    client = A2ATestClient(app_for(make_app, store, report=report), token="alice")
    task = client.send("x", skill="report")["task"]
    assert task["status"]["state"] == "TASK_STATE_WORKING"
    assert found[0] is not None and found[0].task.status.state.value == "TASK_STATE_WORKING"
    updater = exchange_of(client.app).task_updater(task["id"])
    updater.complete("done")
    stored = store.get_task(task["id"])
    assert stored is not None and stored.task.status.state.value == "TASK_STATE_COMPLETED"


def test_a_paused_blocking_run_is_written_and_resumable(make_app: t.Callable[..., Flask]) -> None:
    def ask(task: TaskContext) -> None:
        if len(task.history) == 1:
            task.require_input("which one?")
        else:
            task.complete("thanks")

    store = CountingStore()
    client = A2ATestClient(app_for(make_app, store, ask=ask), token="alice")
    first = client.send("x", skill="ask")["task"]
    assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    again = client.send("this one", task_id=first["id"])["task"]
    assert again["status"]["state"] == "TASK_STATE_COMPLETED"
    assert (store.creates, store.updates) == (1, 2)  # resume (WORKING) and complete


def test_the_replica_poll_leaves_a_held_run_alone(
    make_app: t.Callable[..., Flask], gate: Gate, tmp_path: t.Any
) -> None:
    """A shared store has no row for a held task yet: that is not a task gone elsewhere."""
    import sqlalchemy as sa

    from flask_a2a.store.sql import SQLStore

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'a2a.db'}")
    store = SQLStore(engine)
    app = app_for(make_app, store, gate=gate.handler)
    client = A2ATestClient(app, token="alice")
    thread = threading.Thread(target=lambda: client.send("go", skill="gate"))
    thread.start()
    assert gate.entered.wait(10)
    exchange = exchange_of(app)
    (run,) = exchange.live_runs()
    exchange.replicas.check([run])
    assert not run.cancelled and not run.done.is_set()
    gate.release.set()
    thread.join(10)
    assert store.list_tasks(ListQuery("alice")).records[0].state.value == "TASK_STATE_COMPLETED"
    engine.dispose()


def test_a_delay_of_zero_writes_every_change(make_app: t.Callable[..., Flask]) -> None:
    store = CountingStore()
    client = A2ATestClient(app_for(make_app, store, delay=0), token="alice")
    assert client.send("hi", skill="echo2")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert (store.creates, store.updates) == (1, 4)


def test_a_negative_delay_is_refused_at_init() -> None:
    from flask_a2a import A2A
    from tests.conftest import token_principal

    app = Flask("bad-delay")
    app.config["A2A_BLOCKING_WRITE_DELAY"] = -1
    with pytest.raises(ValueError, match="A2A_BLOCKING_WRITE_DELAY"):
        A2A(app, skills=[Skill(id="e", name="E", description="E.", handler=echo_twice)],
            principal=token_principal)  # fmt: skip
