"""Shutdown, hand-off to outside work, containment of host failures, tenant changes on streams."""

from __future__ import annotations

import logging
import threading
import typing as t

import pytest
from flask import Flask

from flask_a2a import A2A, ConfigError, Part, Principal, Skill, TaskCanceled, TaskContext
from flask_a2a.store import ListQuery, MemoryStore
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, token_principal
from tests.exchange.test_streaming import events_of, frames, next_event, open_stream

pytestmark = pytest.mark.usefixtures("binding")


def gate_app(make_app: t.Callable[..., Flask], gate: Gate, **kw: t.Any) -> Flask:
    skills = [
        Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler),
        Skill(
            id="echo",
            name="Echo",
            description="Echo.",
            handler=lambda task: task.artifact([Part(text="e")]),
        ),
    ]
    return make_app(skills=skills, **kw)


def test_shutdown_cancels_live_runs_and_ends_streams(
    make_app: t.Callable[..., Flask], gate: Gate
) -> None:
    app = gate_app(make_app, gate)
    client = A2ATestClient(app, token="alice")
    running = client.send(skill="gate", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(5)
    stream = frames(open_stream(client, "SubscribeToTask", {"id": running["id"]}))
    next_event(stream)
    done = client.send("x", skill="echo")["task"]

    exchange = app.extensions["a2a"].exchange
    assert exchange.shutdown(timeout=5) is True

    rest = [events_of(f)["result"] for f in stream if not f.startswith(":")]
    assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert client.rpc("GetTask", {"id": running["id"]}).result["status"]["state"] == (
        "TASK_STATE_CANCELED"
    )
    # Reads still answer; sends and resumes are refused.
    assert client.rpc("GetTask", {"id": done["id"]}).result["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )
    refused = client.rpc("SendMessage", {"message": client.message("x", skill="echo")})
    assert refused.code == -32004
    assert "shutting down" in refused.error["message"]
    assert client.rpc("ListTasks", {}).result["totalSize"] == 2  # nothing written
    gate.release.set()


def test_hand_off_then_update_from_outside(make_app: t.Callable[..., Flask]) -> None:
    handed: dict[str, str] = {}

    def enqueue(task: TaskContext) -> None:
        handed["id"] = task.id
        task.hand_off("queued")

    app = make_app(skills=[Skill(id="job", name="Job", description="Job.", handler=enqueue)])
    client = A2ATestClient(app, token="alice")
    task = client.send(skill="job")["task"]
    assert task["status"]["state"] == "TASK_STATE_WORKING"  # the blocking send answered

    stream = frames(open_stream(client, "SubscribeToTask", {"id": task["id"]}))
    assert next_event(stream)["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"

    a2a_ext = app.extensions["a2a"]
    worker = threading.Thread(target=lambda: _finish_outside(a2a_ext.exchange, handed["id"]))
    worker.start()
    worker.join(10)
    rest = [events_of(f)["result"] for f in stream if not f.startswith(":")]
    assert rest[0]["artifactUpdate"]["artifact"]["parts"] == [{"text": "from the worker"}]
    assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    final = client.rpc("GetTask", {"id": task["id"]}).result
    assert final["artifacts"][0]["name"] == "result"


def _finish_outside(exchange: t.Any, task_id: str) -> None:
    updater = exchange.task_updater(task_id)
    updater.artifact([Part(text="from the worker")], name="result")
    updater.complete("done")


def test_handed_off_task_obeys_cancel_and_survives_shutdown(
    make_app: t.Callable[..., Flask],
) -> None:
    app = make_app(
        skills=[
            Skill(id="job", name="Job", description="Job.", handler=lambda task: task.hand_off())
        ]
    )
    client = A2ATestClient(app, token="alice")
    kept = client.send(skill="job")["task"]
    canceled = client.send(skill="job")["task"]
    exchange = app.extensions["a2a"].exchange
    assert client.rpc("CancelTask", {"id": canceled["id"]}).result["status"]["state"] == (
        "TASK_STATE_CANCELED"
    )
    updater = exchange.task_updater(canceled["id"])
    assert updater.cancelled
    with pytest.raises(TaskCanceled):
        updater.complete()
    assert client.rpc("GetTask", {"id": canceled["id"]}).result["status"]["state"] == (
        "TASK_STATE_CANCELED"
    )
    exchange.shutdown(timeout=2)  # not cut: it belongs to the outside worker
    assert client.rpc("GetTask", {"id": kept["id"]}).result["status"]["state"] == (
        "TASK_STATE_WORKING"
    )
    exchange.task_updater(kept["id"]).complete()
    assert client.rpc("GetTask", {"id": kept["id"]}).result["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )


class FinalizeFails(MemoryStore):
    """A store whose write of a settled state raises (a database gone mid-run)."""

    def update_task(self, record: t.Any, expected_version: int) -> t.Any:
        if record.task.status.state.terminal:
            raise RuntimeError("database went away\x1b[31m")
        return super().update_task(record, expected_version)


def test_store_failure_while_settling_is_contained(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    def work(task: TaskContext) -> None:
        task.working()

    store = FinalizeFails()
    app = make_app(
        skills=[Skill(id="w", name="W", description="W.", handler=work)],
        store=store,
        config={"A2A_BLOCKING_WRITE_DELAY": 0},  # every change written at once
    )
    client = A2ATestClient(app, token="alice")
    with caplog.at_level(logging.ERROR, logger="flask_a2a"):
        answer = client.rpc("SendMessage", {"message": client.message("hi", skill="w")})
    # The blocking caller hears its task's end was not stored, not a WORKING task no run moves.
    assert answer.code == -32603 and answer.error["message"] == "Internal error", answer.text
    (task,) = client.rpc("ListTasks", {}).result["tasks"]
    assert task["status"]["state"] == "TASK_STATE_WORKING"  # its last stored state
    panics = [r.getMessage() for r in caplog.records if "writing a task failed" in r.getMessage()]
    assert panics, caplog.text
    assert "\x1b" not in panics[0] and "\\x1b" in panics[0]  # scrubbed of control bytes
    assert client.rpc("GetTask", {"id": task["id"]}).result["status"]["state"] == (
        "TASK_STATE_WORKING"
    )
    # ... and it is owed FAILED "internal error" until the store takes it (test_db_faults.py)
    assert app.extensions["a2a"].exchange.runs.owed.owed() == [task["id"]]


class CreateFails(MemoryStore):
    """A store whose every task write raises (a database gone)."""

    def create_task(self, record: t.Any) -> t.Any:
        raise RuntimeError("database went away")


def test_a_held_task_whose_only_write_fails_answers_internal_error(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    """A blocking send writes its task once, when it settles: if that write fails, the answer
    is -32603 (never a task the store does not hold) and the failure is logged."""
    store = CreateFails()
    app = make_app(store=store)
    client = A2ATestClient(app, token="alice")
    with caplog.at_level(logging.ERROR, logger="flask_a2a"):
        reply = client.rpc("SendMessage", {"message": client.message("hi", skill="echo")})
    assert reply.code == -32603
    assert reply.error["message"] == "Internal error"  # no database detail on the wire
    assert "database went away" in caplog.text
    assert store.list_tasks(ListQuery("alice", limit=10)).records == []
    assert app.extensions["a2a"].exchange.slots.held("alice") == 0


class RetentionFails(MemoryStore):
    def trim_terminal_tasks(self, tier: t.Any, keep: int) -> list[str]:
        raise RuntimeError("trim failed")


def test_retention_failure_is_contained(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(store=RetentionFails())
    client = A2ATestClient(app, token="alice")
    with caplog.at_level(logging.ERROR, logger="flask_a2a"):
        task = client.send("hi", skill="echo")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "run finalize panicked" in caplog.text


def test_stream_ends_when_the_caller_moves_to_another_tenant(
    make_app: t.Callable[..., Flask], gate: Gate
) -> None:
    tenants: dict[str, str | None] = {"alice": None}

    def principal() -> Principal | None:
        found = token_principal()
        if found is None or found.owner not in tenants:
            return found
        return Principal(found.owner, found.scopes, tenants[found.owner])

    app = gate_app(make_app, gate, principal=principal)
    client = A2ATestClient(app, token="alice")
    task = client.send(skill="gate", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(5)  # WORKING is stored before the stream opens
    stream = frames(open_stream(client, "SubscribeToTask", {"id": task["id"]}))
    next_event(stream)
    tenants["alice"] = "t9"  # removed from the tenant, switched to another
    [refused] = [f for f in stream if not f.startswith(":")]  # ended at the next keep-alive
    assert "-31401" in refused or '"code":401' in refused  # ... with the refusal, last
    gate.release.set()


def test_one_a2a_per_app_and_at_least_one_skill() -> None:
    app = Flask("x")
    A2A(
        app,
        skills=[Skill(id="e", name="E", description="E.", handler=lambda t: None)],
        principal=token_principal,
    )
    with pytest.raises(ConfigError, match="already registered"):
        A2A(
            app,
            skills=[Skill(id="e", name="E", description="E.", handler=lambda t: None)],
            principal=token_principal,
        )
    with pytest.raises(ConfigError, match="at least one skill"):
        A2A(Flask("y"), skills=[], principal=token_principal)
    taken = Flask("z")
    taken.add_url_rule("/a2a", "mine", lambda: "mine")
    with pytest.raises(ConfigError, match="already routed"):
        A2A(
            taken,
            skills=[Skill(id="e", name="E", description="E.", handler=lambda t: None)],
            principal=token_principal,
        )
    bad = Flask("w")
    bad.config["A2A_PATH"] = "a2a"
    with pytest.raises(ConfigError, match="must start with"):
        A2A(
            bad,
            skills=[Skill(id="e", name="E", description="E.", handler=lambda t: None)],
            principal=token_principal,
        )
