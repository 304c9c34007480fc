"""What the database cannot hold, and what happens when it goes away (issue 13, defects 1-3).

- Values no store can hold (ids, context ids, push-config ids, owners and tenants longer than
  their columns; NUL characters) are refused up front with -32602 naming the field, on every
  store, and nothing is stored.
- One row of a group-commit INSERT that PostgreSQL refuses fails only its own create.
- A run whose settle meets a dead connection retries it; a task that still cannot be settled is
  settled FAILED "internal error" later, never left WORKING; no driver text reaches a caller.
"""

from __future__ import annotations

import threading
import typing as t
import uuid

import pytest
import sqlalchemy as sa
from flask import Flask

from flask_a2a import Principal, Skill, TaskContext
from flask_a2a.protocol.errors import InvalidParamsError
from flask_a2a.protocol.limits import MAX_KEY, MAX_TASK_ID
from flask_a2a.store import ListQuery
from flask_a2a.testing import A2ATestClient
from tests.conftest import TOKENS, Gate, echo, pg_url, wait_for
from tests.store.test_store import make_record


@pytest.fixture
def make_store(new_store: t.Callable[..., t.Any]) -> t.Callable[..., t.Any]:
    """Every app of this module runs on ``store_kind`` (memory, SQLite, PostgreSQL)."""
    return new_store


@pytest.fixture
def client(make_app: t.Callable[..., Flask]) -> A2ATestClient:
    app = make_app(config={"A2A_ALLOW_PRIVATE_PUSH": True})
    return A2ATestClient(app, token="alice")


def stored(client: A2ATestClient, owner: str = "alice") -> list[str]:
    store = client.app.extensions["a2a"].exchange.store
    return sorted(r.task.id for r in store.list_tasks(ListQuery(owner, tenanted=False)).records)


def refused(answer: t.Any, field: str) -> None:
    assert answer.code == -32602, answer.text
    fields = [v["field"] for v in answer.error["data"][-1]["fieldViolations"]]
    assert field in fields, answer.text
    assert field in answer.error["message"]


# ------------------------------------------------------------------ defect 2: refused up front


LONG_CONTEXT = "c" * (MAX_KEY + 1)


@pytest.mark.parametrize("returns_at_once", [False, True])
@pytest.mark.parametrize("value", [LONG_CONTEXT, "ctx\x00x"], ids=["long", "nul"])
def test_a_context_id_the_store_cannot_hold_is_refused_and_nothing_is_stored(
    client: A2ATestClient, value: str, returns_at_once: bool
) -> None:
    before = stored(client)
    params: dict[str, t.Any] = {"message": client.message("hi", context_id=value)}
    if returns_at_once:
        params["configuration"] = {"returnImmediately": True}
    refused(client.rpc("SendMessage", params), "message.contextId")
    refused(client.rpc("SendStreamingMessage", params), "message.contextId")
    assert stored(client) == before
    refused(client.rpc("ListTasks", {"contextId": value}), "contextId")


def test_values_exactly_at_the_limits_are_accepted(client: A2ATestClient, webhook: t.Any) -> None:
    context = "c" * MAX_KEY
    task = client.rpc("SendMessage", {"message": client.message("hi", context_id=context)}).result[
        "task"
    ]
    assert task["contextId"] == context and task["status"]["state"] == "TASK_STATE_COMPLETED"
    listed = client.rpc("ListTasks", {"contextId": context}).result
    assert [t["id"] for t in listed["tasks"]] == [task["id"]]
    config_id = "p" * MAX_KEY
    created = client.rpc(
        "CreateTaskPushNotificationConfig",
        {"taskId": task["id"], "id": config_id, "url": webhook.url()},
    ).result
    assert created["id"] == config_id
    ref = {"taskId": task["id"], "id": config_id}
    assert client.rpc("GetTaskPushNotificationConfig", ref).result["id"] == config_id
    # A task id at its limit is no task here, but it is a fair question.
    assert client.rpc("GetTask", {"id": "t" * MAX_TASK_ID}).code == -32001


@pytest.mark.parametrize("value", ["t" * (MAX_TASK_ID + 1), "t\x00"], ids=["long", "nul"])
def test_a_task_id_the_store_cannot_hold_is_refused_by_every_method(
    client: A2ATestClient, value: str
) -> None:
    for method, params, field in (
        ("GetTask", {"id": value}, "id"),
        ("CancelTask", {"id": value}, "id"),
        ("SubscribeToTask", {"id": value}, "id"),
        ("SendMessage", {"message": client.message("hi", task_id=value)}, "message.taskId"),
        ("GetTaskPushNotificationConfig", {"taskId": value, "id": "p"}, "taskId"),
        ("DeleteTaskPushNotificationConfig", {"taskId": value, "id": "p"}, "taskId"),
        ("ListTaskPushNotificationConfigs", {"taskId": value}, "taskId"),
        ("CreateTaskPushNotificationConfig",
         {"taskId": value, "url": "http://127.0.0.1:9/hook"}, "taskId"),
    ):  # fmt: skip
        refused(client.rpc(method, params), field)
    assert stored(client) == []


@pytest.mark.parametrize("value", ["p" * (MAX_KEY + 1), "p\x00"], ids=["long", "nul"])
def test_a_push_config_id_the_store_cannot_hold_is_refused(
    client: A2ATestClient, value: str, webhook: t.Any
) -> None:
    task = client.send("hi", configuration={"returnImmediately": True})["task"]
    refused(
        client.rpc(
            "CreateTaskPushNotificationConfig",
            {"taskId": task["id"], "id": value, "url": webhook.url()},
        ),
        "id",
    )
    inline = {"taskPushNotificationConfig": {"id": value, "url": webhook.url()}}
    answer = client.rpc("SendMessage", {"message": client.message("hi"), "configuration": inline})
    refused(answer, "configuration.taskPushNotificationConfig.id")
    for method in ("GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"):
        refused(client.rpc(method, {"taskId": task["id"], "id": value}), "id")
    store = client.app.extensions["a2a"].exchange.store
    assert store.list_push_configs(task["id"]) == []
    assert stored(client) == [task["id"]]


def test_a_page_token_holding_an_unstorable_id_is_refused(client: A2ATestClient) -> None:
    import base64
    import json

    for last_id in ("t\x00", "t" * (MAX_TASK_ID + 1)):
        raw = json.dumps(["2026-01-02T03:04:05.000Z", last_id]).encode()
        token = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        refused(client.rpc("ListTasks", {"pageToken": token}), "pageToken")


@pytest.mark.parametrize(
    ("principal", "field"),
    [
        (Principal("o" * (MAX_KEY + 1)), "principal.owner"),
        (Principal("al\x00ice"), "principal.owner"),
        (Principal("alice", tenant="t" * (MAX_KEY + 1)), "principal.tenant"),
        (Principal("alice", tenant="t\x00"), "principal.tenant"),
    ],
    ids=["long-owner", "nul-owner", "long-tenant", "nul-tenant"],
)
def test_an_owner_or_tenant_the_store_cannot_hold_is_refused(
    client: A2ATestClient, principal: Principal, field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(TOKENS, "odd", principal)
    for method, params in (
        ("SendMessage", {"message": client.message("hi")}),
        ("ListTasks", {}),
        ("GetTask", {"id": "t1"}),
    ):
        answer = client.rpc(method, params, token="odd")
        refused(answer, field)
        assert "\x00" not in answer.text and principal.owner not in answer.error["message"]
    if "\x00" not in principal.owner:  # (a store lookup by it would fail, as it should)
        assert stored(client, principal.owner) == []
    assert stored(client) == []
    at_limit = Principal("o" * MAX_KEY, tenant="t" * MAX_KEY)
    monkeypatch.setitem(TOKENS, "long", at_limit)
    task = client.send("hi", token="long")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert client.rpc("GetTask", {"id": task["id"]}, token="long").result["id"] == task["id"]


def test_nul_inside_message_content_is_stored_as_json_escapes(client: A2ATestClient) -> None:
    """A NUL in a part or metadata lives inside the JSON body (``\\u0000``): it is kept."""
    params = {"message": {**client.message("a\x00b"), "metadata": {"k\x00": "v\x00"}}}
    task = client.rpc("SendMessage", params).result["task"]
    got = client.rpc("GetTask", {"id": task["id"]}).result
    assert got["history"][0]["parts"][0]["text"] == "a\x00b"
    assert got["history"][0]["metadata"] == {"k\x00": "v\x00"}


# ------------------------------------------------------------------ defect 1: group commit


@pytest.mark.parametrize(
    "store_kind",
    [
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ],
)
def test_one_unstorable_row_fails_only_its_own_create(new_store: t.Callable[..., t.Any]) -> None:
    """Concurrent creates share INSERTs; rows PostgreSQL refuses (a context id past its column,
    written straight to the store, past the edge's check) fail only their own create."""
    store = new_store()
    threads, per_thread = 8, 25
    start = threading.Barrier(threads)
    outcomes: dict[str, BaseException | None] = {}
    lock = threading.Lock()

    def worker(n: int) -> None:
        start.wait(10)
        for i in range(per_thread):
            bad = i % 5 == 2
            record = make_record(
                f"t-{n}-{i}", owner=f"owner-{n}",
                context_id=("x" * (MAX_KEY + 1)) if bad and n % 2 else
                ("y\x00" if bad else f"ctx-{n}"),
            )  # fmt: skip
            try:
                store.create_task(record)
                error: BaseException | None = None
            except BaseException as exc:  # noqa: BLE001 -- recorded, asserted below
                error = exc
            with lock:
                outcomes[record.task.id] = error

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(30)
    assert len(outcomes) == threads * per_thread
    for task_id, error in outcomes.items():
        bad = int(task_id.rsplit("-", 1)[1]) % 5 == 2
        if bad:
            assert isinstance(error, InvalidParamsError), (task_id, error)
            assert error.field_violations[0][0] == "contextId"
            assert "psycopg" not in str(error) and "INSERT" not in str(error)
            assert store.get_task(task_id) is None
        else:
            assert error is None, (task_id, repr(error))
            assert store.get_task(task_id) is not None


# ------------------------------------------------------------------ defect 3: connection loss

DRIVER_WORDS = ("psycopg", "SQL", "sql", "terminat", "connection", "hunter2")


def assert_no_driver_text(text: str) -> None:
    for word in DRIVER_WORDS:
        assert word not in text, (word, text)


@pytest.fixture
def pg_killable(pg_engine: t.Any) -> t.Iterator[tuple[t.Any, t.Callable[[], int]]]:
    """A PostgreSQL store on its own engine, whose connections carry a unique application
    name, and a function terminating exactly those backends (other tests share the server)."""
    from flask_a2a.store.sql import SQLStore, engine_from_url

    name = f"a2a-dbfaults-{uuid.uuid4().hex[:8]}"
    engine = engine_from_url(
        pg_url(), statement_timeout=5.0,
        connect_args={"connect_timeout": 3, "application_name": name}, pool_size=4,
    )  # fmt: skip
    store = SQLStore(engine, table_prefix=f"a2a_{uuid.uuid4().hex[:10]}_")

    def terminate() -> int:
        with pg_engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    " AND application_name = :name"
                ),
                {"name": name},
            ).all()
            conn.commit()
        return len(rows)

    yield store, terminate
    store.drop()
    engine.dispose()


def settled_state(client: A2ATestClient, task_id: str) -> dict[str, t.Any]:
    task = client.rpc("GetTask", {"id": task_id}).result
    return t.cast(dict[str, t.Any], task["status"])


@pytest.mark.postgres
@pytest.mark.parametrize("store_kind", [pytest.param("postgres", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("writes_before", [True, False])
def test_backends_terminated_mid_run_never_leave_the_task_working(
    pg_killable: t.Any, make_app: t.Callable[..., Flask], gate: Gate, writes_before: bool
) -> None:
    # pg_killable first: set up before the app, it is torn down after the app shut down (its
    # replica poll and trims stopped), so no call is left holding, or opening, a connection of
    # the engine it disposes.
    store, terminate = pg_killable
    skills = [Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler)]
    if not writes_before:  # settles without an artifact write first: the settle meets it

        def quiet(task: TaskContext) -> None:
            task.working()
            gate.entered.set()
            assert gate.release.wait(10)

        skills = [Skill(id="gate", name="Gate", description="Gate.", handler=quiet)]
    app = make_app(skills=skills, store=store, config={"A2A_REPLICA_POLL_INTERVAL": 0.05})
    client = A2ATestClient(app, token="alice")
    task = client.send("hi", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(10)
    assert wait_for(lambda: settled_state(client, task["id"])["state"] == "TASK_STATE_WORKING")
    assert terminate() > 0
    gate.release.set()
    exchange = app.extensions["a2a"].exchange
    assert wait_for(lambda: not exchange.live_runs())
    status = settled_state(client, task["id"])
    assert status["state"] in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED"), status
    if status["state"] == "TASK_STATE_FAILED":
        assert status["message"]["parts"][0]["text"] == "internal error"
    got = client.rpc("GetTask", {"id": task["id"]})
    assert_no_driver_text(got.text)


class FailingSettles:
    """Wraps a store: the next ``n`` update_task calls raise a driver error (a dead database)."""

    def __init__(self, inner: t.Any, n: int) -> None:
        self.inner = inner
        self.left = n
        self.failed = threading.Event()

    def __getattr__(self, name: str) -> t.Any:
        return getattr(self.inner, name)

    def update_task(self, record: t.Any, expected_version: int) -> t.Any:
        if self.left > 0:
            self.left -= 1
            if self.left == 0:
                self.failed.set()
            raise sa.exc.OperationalError(
                "UPDATE a2a_tasks SET body=...", {}, Exception("psycopg: terminating connection")
            )
        return self.inner.update_task(record, expected_version)


@pytest.mark.parametrize("failures", [2, 12])
def test_a_settle_that_keeps_failing_ends_failed_internal_error(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any], gate: Gate,
    failures: int,
) -> None:  # fmt: skip
    """A few failures: the settle's retries store it. Many: the task is owed a FAILED settle,
    stored by a later attempt (a timer, or the next successful write)."""
    inner = new_store()
    skills = [Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler)]
    app = make_app(skills=skills, store=inner, config={"A2A_REPLICA_POLL_INTERVAL": 0.05})
    exchange = app.extensions["a2a"].exchange
    client = A2ATestClient(app, token="alice")
    task = client.send("hi", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(10)
    assert wait_for(lambda: settled_state(client, task["id"])["state"] == "TASK_STATE_WORKING")
    failing = FailingSettles(inner, failures)
    for holder in (exchange, exchange.writer, exchange.runs):
        holder.store = failing
    gate.release.set()
    assert failing.failed.wait(10)
    assert wait_for(lambda: settled_state(client, task["id"])["state"] != "TASK_STATE_WORKING")
    status = settled_state(client, task["id"])
    if failures == 2:  # the artifact write fails once, the FAILED settle once, then it lands
        assert status["state"] == "TASK_STATE_FAILED"
    assert status["state"] == "TASK_STATE_FAILED"
    assert status["message"]["parts"][0]["text"] == "internal error"
    assert_no_driver_text(client.rpc("GetTask", {"id": task["id"]}).text)
    assert client.send("after")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("store_kind", ["memory"])
def test_a_store_error_in_a_handler_write_is_no_status_text(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any]
) -> None:
    """The handler's artifact write fails (a driver error): the task settles FAILED
    "internal error", not with the driver's text and SQL."""
    inner = new_store()
    failing = FailingSettles(inner, 1)

    def writes(task: TaskContext) -> None:
        task.working()
        echo(task)

    skills = [Skill(id="w", name="W", description="W.", handler=writes)]
    app = make_app(skills=skills, store=failing, config={"A2A_BLOCKING_WRITE_DELAY": 0})
    client = A2ATestClient(app, token="alice")
    answer = client.rpc("SendMessage", {"message": client.message("hi")})
    status = answer.result["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED", answer.text
    assert status["message"]["parts"][0]["text"] == "internal error"
    assert_no_driver_text(answer.text)


def test_limits_are_the_sql_columns(new_store: t.Callable[..., t.Any], store_kind: str) -> None:
    if store_kind == "memory":
        pytest.skip("the memory store has no columns")
    store = new_store()
    c, pc = store.tasks.c, store.push_configs.c
    assert c.id.type.length == MAX_TASK_ID == pc.task_id.type.length
    for column in (c.owner, c.tenant, c.context_id, pc.id, pc.owner):
        assert column.type.length == MAX_KEY


def test_an_owed_settle_lands_with_the_next_successful_write(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any], gate: Gate
) -> None:
    """No timer soon (a long poll interval): the next write that succeeds settles it."""
    inner = new_store()
    skills = [
        Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler),
        Skill(id="echo", name="Echo", description="Echo.", handler=echo),
    ]
    app = make_app(skills=skills, store=inner, config={"A2A_REPLICA_POLL_INTERVAL": 600})
    exchange = app.extensions["a2a"].exchange
    client = A2ATestClient(app, token="alice")
    task = client.send("hi", skill="gate", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(10)
    assert wait_for(lambda: settled_state(client, task["id"])["state"] == "TASK_STATE_WORKING")
    failing = FailingSettles(inner, 4)  # the artifact write, then every try of the settle
    for holder in (exchange, exchange.writer, exchange.runs):
        holder.store = failing
    gate.release.set()
    assert wait_for(lambda: not exchange.live_runs())
    assert exchange.runs.owed.owed() == [task["id"]]
    assert settled_state(client, task["id"])["state"] == "TASK_STATE_WORKING"
    client.send("after", token="bob", skill="echo")
    assert wait_for(lambda: settled_state(client, task["id"])["state"] == "TASK_STATE_FAILED")
    assert settled_state(client, task["id"])["message"]["parts"][0]["text"] == "internal error"
    assert wait_for(lambda: exchange.runs.owed.owed() == [])  # cleared once the write returns


def test_a_cancel_whose_write_fails_is_owed_not_lost(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any], gate: Gate
) -> None:
    """The cancel's write fails (-32603, no driver text); the run stops all the same, and the
    task is settled CANCELED once the store answers, not left WORKING with no run."""
    inner = new_store()
    skills = [Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler)]
    app = make_app(skills=skills, store=inner, config={"A2A_REPLICA_POLL_INTERVAL": 0.05})
    exchange = app.extensions["a2a"].exchange
    client = A2ATestClient(app, token="alice")
    task = client.send("hi", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(10)
    assert wait_for(lambda: settled_state(client, task["id"])["state"] == "TASK_STATE_WORKING")
    failing = FailingSettles(inner, 1)
    for holder in (exchange, exchange.writer, exchange.runs):
        holder.store = failing
    answer = client.rpc("CancelTask", {"id": task["id"]})
    assert answer.code == -32603, answer.text  # the database failed: the caller may try again
    assert (
        answer.error["message"] == "Internal error: the task store is unavailable; try again later"
    )
    assert_no_driver_text(answer.text)
    assert wait_for(lambda: not exchange.live_runs())
    assert wait_for(lambda: settled_state(client, task["id"])["state"] == "TASK_STATE_CANCELED")
