"""Several replicas on one SQL store.

In-process: two apps, each with its own engine on the same tables (SQLite file, PostgreSQL).
Live: two ``gunicorn -k gevent`` processes on the same PostgreSQL tables
(``tests/replica_app.py``), including a replica killed with SIGKILL.
"""

from __future__ import annotations

import json
import threading
import time
import typing as t
import uuid
from pathlib import Path

import pytest
import requests
from flask import Flask

from flask_a2a import Part, Skill, TaskContext
from flask_a2a.protocol.model import TaskState
from flask_a2a.store import MemoryStore
from flask_a2a.testing import A2ATestClient
from tests.conftest import SQL_KINDS, Gate, pg_url, wait_for
from tests.live_server import LiveGunicorn

POLL = 0.05


@pytest.fixture(params=SQL_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return t.cast(str, request.param)


@pytest.fixture
def pair(new_store: t.Callable[..., t.Any]) -> tuple[t.Any, t.Any]:
    """Two store objects (two engines for SQLite) on the same tables: replica A and B."""
    prefix = f"a2a_{uuid.uuid4().hex[:10]}_"
    return new_store(table_prefix=prefix), new_store(table_prefix=prefix)


class Replicas(t.NamedTuple):
    a: A2ATestClient
    b: A2ATestClient
    app_a: Flask
    app_b: Flask


@pytest.fixture
def replicas(make_app: t.Callable[..., Flask], pair: tuple[t.Any, t.Any], gate: Gate) -> Replicas:
    skills = [Skill(id="gate", name="Gate", description="Waits.", handler=gate.handler)]
    config = {
        "A2A_REPLICA_POLL_INTERVAL": POLL,
        "A2A_BLOCKING_WRITE_DELAY": POLL,
        "A2A_KEEPALIVE_INTERVAL": 5.0,
    }
    app_a = make_app(skills=skills, config=config, store=pair[0])
    app_b = make_app(skills=skills, config=config, store=pair[1])
    return Replicas(A2ATestClient(app_a, "alice"), A2ATestClient(app_b, "alice"), app_a, app_b)


def exchange(app: Flask) -> t.Any:
    return app.extensions["a2a"].exchange


def stream_in_thread(
    client: A2ATestClient,
    method: str,
    params: t.Any,
    token: str | None = None,
    name: str | None = None,
) -> tuple[threading.Thread, list[t.Any]]:
    out: list[t.Any] = []

    def run() -> None:
        out.extend(client.stream(method, params, token=token)[1])

    thread = threading.Thread(target=run, daemon=True, name=name)
    thread.start()
    return thread, out


def start_gate(r: Replicas, gate: Gate) -> str:
    task = r.a.send("go", skill="gate", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(10)
    return str(task["id"])


def test_only_shared_stores_are_polled(make_app: t.Callable[..., Flask]) -> None:
    assert exchange(make_app(store=MemoryStore())).replicas is None


def test_a_cancel_on_b_cuts_the_run_on_a_and_its_stream_shows_canceled(
    replicas: Replicas, gate: Gate
) -> None:
    task_id = start_gate(replicas, gate)
    ex_a = exchange(replicas.app_a)
    thread, events = stream_in_thread(replicas.a, "SubscribeToTask", {"id": task_id})
    assert wait_for(lambda: ex_a.bus.subscriber_count(task_id) == 1)

    canceled_at = time.monotonic()
    answer = replicas.b.rpc("CancelTask", {"id": task_id}).result
    assert answer["status"]["state"] == "TASK_STATE_CANCELED"
    assert wait_for(lambda: not ex_a.live_runs())
    cut_after = time.monotonic() - canceled_at
    thread.join(10)

    assert not thread.is_alive()
    assert cut_after < 4 * POLL + 1.0, cut_after  # bounded by the poll, loosely (a loaded CI)
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
    stored = replicas.a.rpc("GetTask", {"id": task_id}).result
    assert stored["status"]["state"] == "TASK_STATE_CANCELED"
    assert "artifacts" not in stored  # the handler never got to write after the cancel


def test_a_foreign_cancel_is_noticed_by_a_blocking_send_on_a(
    replicas: Replicas, gate: Gate
) -> None:
    result: list[t.Any] = []
    thread = threading.Thread(
        target=lambda: result.append(replicas.a.send("go", skill="gate")), daemon=True
    )
    thread.start()
    assert gate.entered.wait(10)
    # A blocking send's task id reaches nobody: B finds it by listing, once A has written it
    # (A2A_BLOCKING_WRITE_DELAY after it started).
    listed: list[t.Any] = []

    def listed_on_b() -> bool:
        listed.extend(replicas.b.rpc("ListTasks", {}).result["tasks"])
        return bool(listed)

    assert wait_for(listed_on_b)
    (run,) = exchange(replicas.app_a).live_runs()
    assert listed[0]["id"] == run.task_id
    assert replicas.b.rpc("CancelTask", {"id": run.task_id}).result["id"] == run.task_id
    thread.join(10)
    assert result[0]["task"]["status"]["state"] == "TASK_STATE_CANCELED"


def test_subscribe_on_b_follows_a_run_on_a(
    make_app: t.Callable[..., Flask], pair: tuple[t.Any, t.Any]
) -> None:
    step = threading.Semaphore(0)

    def stepper(task: TaskContext) -> None:
        task.working()
        artifact_id = task.artifact([Part(text="0")], name="progress")
        for i in range(1, 4):
            assert step.acquire(timeout=10)
            task.artifact([Part(text=str(i))], artifact_id=artifact_id, append=True)

    store_a, store_b = pair
    reads = [0]
    subscriber_reads = [0]  # by B's SubscribeToTask: the caller's check, then the snapshot
    get_task = store_b.get_task

    def counting_get_task(task_id: str, owner: str | None = None) -> t.Any:
        reads[0] += 1
        if threading.current_thread().name == "b-subscriber":
            subscriber_reads[0] += 1
        return get_task(task_id, owner)

    store_b.get_task = counting_get_task  # B's polls, counted
    skills = [Skill(id="steps", name="Steps", description="Steps.", handler=stepper)]
    config = {"A2A_REPLICA_POLL_INTERVAL": POLL, "A2A_KEEPALIVE_INTERVAL": 5.0}
    a = A2ATestClient(make_app(skills=skills, config=config, store=store_a), "alice")
    b_app = make_app(skills=skills, config=config, store=store_b)
    b = A2ATestClient(b_app, "alice")
    task_id = a.send("go", configuration={"returnImmediately": True})["task"]["id"]
    assert wait_for(lambda: store_a.get_task(task_id).task.artifacts != ())

    assert b.rpc("SubscribeToTask", {"id": task_id}, token="bob").code == -32001
    thread, events = stream_in_thread(b, "SubscribeToTask", {"id": task_id}, name="b-subscriber")
    assert wait_for(lambda: exchange(b_app).bus.subscriber_count(task_id) == 1)
    # The stream subscribes, then reads its snapshot: the steps come after both.
    assert wait_for(lambda: subscriber_reads[0] >= 2)
    for i in range(3):
        version = store_a.get_task(task_id).version
        step.release()
        assert wait_for(lambda v=version: store_a.get_task(task_id).version > v)  # type: ignore[misc]
        seen = reads[0]
        if i < 2:  # the last step ends the stream: there is no poll to wait for
            assert wait_for(lambda n=seen: reads[0] >= n + 2)  # type: ignore[misc]  # B polled after the write
    thread.join(10)
    assert not thread.is_alive()
    texts = [
        "".join(p["text"] for p in e["result"]["task"]["artifacts"][0]["parts"]) for e in events
    ]
    assert texts[:3] == ["0", "01", "012"] and texts[-1] == "0123"
    assert events[-1]["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_run_whose_task_was_settled_and_trimmed_elsewhere_is_cancelled(
    replicas: Replicas, gate: Gate, pair: tuple[t.Any, t.Any]
) -> None:
    task_id = start_gate(replicas, gate)
    ex_a = exchange(replicas.app_a)
    thread, events = stream_in_thread(replicas.a, "SubscribeToTask", {"id": task_id})
    assert wait_for(lambda: ex_a.bus.subscriber_count(task_id) == 1)
    assert pair[1].delete_tasks([task_id]) == 1  # what B's retention does after a settle
    assert wait_for(lambda: not ex_a.live_runs())
    thread.join(10)
    assert not thread.is_alive()
    assert len(events) == 1  # the snapshot, then the stream ended with no status event
    assert replicas.a.rpc("GetTask", {"id": task_id}).code == -32001


def test_a_handed_off_task_finished_on_b_reaches_a_stream_on_a(
    make_app: t.Callable[..., Flask], pair: tuple[t.Any, t.Any]
) -> None:
    def handoff(task: TaskContext) -> None:
        task.hand_off("queued")

    skills = [Skill(id="job", name="Job", description="Queued.", handler=handoff)]
    config = {"A2A_REPLICA_POLL_INTERVAL": POLL, "A2A_KEEPALIVE_INTERVAL": 5.0}
    app_a = make_app(skills=skills, config=config, store=pair[0])
    app_b = make_app(skills=skills, config=config, store=pair[1])
    a = A2ATestClient(app_a, "alice")
    task = a.send("go")["task"]
    assert task["status"]["state"] == "TASK_STATE_WORKING"
    thread, events = stream_in_thread(a, "SubscribeToTask", {"id": task["id"]})
    assert wait_for(lambda: exchange(app_a).bus.subscriber_count(task["id"]) == 1)
    exchange(app_b).task_updater(task["id"]).complete("done on B")
    thread.join(10)
    assert not thread.is_alive()
    assert events[-1]["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


# ------------------------------------------------------------------ live: gunicorn replicas

ROOT = Path(__file__).resolve().parents[2]
ALICE = {"Authorization": "Bearer alice-token", "Content-Type": "application/json"}
LIVE_POLL = 0.2


class Replica(LiveGunicorn):
    """One ``gunicorn -k gevent`` process of tests/replica_app.py on 127.0.0.1."""

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__("tests.replica_app:create_app()", chdir=str(ROOT), env=env)

    def rpc(self, method: str, params: t.Any) -> t.Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return requests.post(self.url + "/a2a", json=body, headers=ALICE, timeout=30).json()

    def start(self, skill: str) -> str:
        """SendMessage with returnImmediately: the id of the task now running here."""
        params = {"message": message(skill), "configuration": {"returnImmediately": True}}
        return t.cast(str, self.rpc("SendMessage", params)["result"]["task"]["id"])

    def stream(self, method: str, params: t.Any) -> requests.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return requests.post(self.url + "/a2a", json=body, headers=ALICE, stream=True, timeout=10)


def events_of(response: requests.Response) -> t.Iterator[dict[str, t.Any]]:
    for line in response.iter_lines(decode_unicode=True):
        if line and line.startswith("data:"):
            yield json.loads(line[5:])


def message(skill: str) -> dict[str, t.Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "go"}],
            "metadata": {"skill": skill}}  # fmt: skip


@pytest.fixture
def live_pair(pg_engine: t.Any) -> t.Iterator[tuple[Replica, Replica]]:
    from flask_a2a.store.sql import SQLStore

    prefix = f"a2a_{uuid.uuid4().hex[:10]}_"
    env = {
        "FLASK_A2A_DATABASE_URL": pg_url(),
        "A2A_TEST_TABLE_PREFIX": prefix,
        "FLASK_A2A_REPLICA_POLL_INTERVAL": str(LIVE_POLL),
        "FLASK_A2A_KEEPALIVE_INTERVAL": "5",
    }
    started: list[Replica] = []
    try:
        started.append(Replica(env))
        started.append(Replica(env))
        yield started[0], started[1]
    finally:
        for replica in started:
            replica.stop()
        SQLStore(pg_engine, prefix).drop()


@pytest.mark.live
@pytest.mark.postgres
def test_live_cancel_on_b_cuts_a_within_two_poll_intervals(
    live_pair: tuple[Replica, Replica],
) -> None:
    a, b = live_pair
    task_id = a.start("sleepy")
    with a.stream("SubscribeToTask", {"id": task_id}) as response:
        events = events_of(response)
        assert next(events)["result"]["task"]["id"] == task_id
        canceled_at = time.monotonic()
        assert b.rpc("CancelTask", {"id": task_id})["result"]["status"]["state"] == (
            "TASK_STATE_CANCELED"
        )
        last = next(events)
    assert last["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
    cut = requests.get(f"{a.url}/test/cut/{task_id}", timeout=5).json()
    latency = cut["at"] - canceled_at
    print(f"\nreplica cut latency: {latency * 1000:.0f} ms (poll {LIVE_POLL * 1000:.0f} ms)")
    assert cut["how"] == "TaskCanceled"
    assert latency < 2 * LIVE_POLL, latency


@pytest.mark.live
@pytest.mark.postgres
def test_live_subscribe_on_b_sees_progress_of_a_run_on_a(
    live_pair: tuple[Replica, Replica],
) -> None:
    a, b = live_pair
    task_id = a.start("steps")
    with b.stream("SubscribeToTask", {"id": task_id}) as response:
        events = list(events_of(response))
    lengths = [
        len(e["result"]["task"].get("artifacts", [{"parts": []}])[0]["parts"]) for e in events
    ]
    assert len(events) >= 3, lengths  # a snapshot, progress, the end
    assert lengths == sorted(lengths) and lengths[-1] == 6
    assert events[-1]["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.live
@pytest.mark.postgres
def test_live_kill_9_of_the_running_replica_leaves_the_task_readable_and_cancelable(
    live_pair: tuple[Replica, Replica],
) -> None:
    a, b = live_pair
    task_id = a.start("sleepy")
    assert wait_for(
        lambda: (
            b.rpc("GetTask", {"id": task_id})["result"]["status"]["state"]
            == TaskState.WORKING.value
        )
    )
    a.kill9()
    got = b.rpc("GetTask", {"id": task_id})["result"]
    assert got["status"]["state"] == "TASK_STATE_WORKING"
    answer = b.rpc("CancelTask", {"id": task_id})
    assert "result" in answer, answer
    canceled = answer["result"]
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert b.rpc("GetTask", {"id": task_id})["result"]["status"]["state"] == "TASK_STATE_CANCELED"
