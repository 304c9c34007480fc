"""Run leases in process: two apps on one SQL store's tables (SQLite file, PostgreSQL, MariaDB).

What a lease is for (a process killed mid-run) is tested with real processes in
tests/live/test_run_leases_live.py and tests/live/test_fleet.py; here: a slow run keeps its lease, a
handed-off task holds none, a resumed run takes one, a settle or pause ends it, exactly one
process wins a lapsed task's settle, a task past its deadline is settled "task timed out", the
memory store keeps none, and an older table gets the lease columns.
"""

from __future__ import annotations

import logging
import threading
import typing as t
import uuid
import warnings

import pytest
import sqlalchemy as sa
from flask import Flask

from flask_a2a import Skill, TaskContext
from flask_a2a.protocol.model import Task, TaskState, TaskStatus, utcnow
from flask_a2a.store import MemoryStore, migrations
from flask_a2a.store.base import TaskRecord
from flask_a2a.store.leases import TIMED_OUT, WORKER_STOPPED, holder
from flask_a2a.store.sql import MissingTablesError, SQLStore
from flask_a2a.testing import A2ATestClient
from tests.conftest import SQL_KINDS, Gate, wait_for

POLL = 0.05
#: The lease's floor, lowered from 2 s (each lease the tests sit through is a wait); it stays
#: above 10 polls (0.5 s), so the floor is what sets the lease.
MIN_LEASE = 1.0
CONFIG = {
    "A2A_REPLICA_POLL_INTERVAL": POLL,
    "A2A_BLOCKING_WRITE_DELAY": POLL,
    "A2A_MIN_RUN_LEASE": MIN_LEASE,
}


@pytest.fixture(params=SQL_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return t.cast(str, request.param)


@pytest.fixture
def pair(new_store: t.Callable[..., t.Any]) -> tuple[t.Any, t.Any]:
    """Two store objects (two engines for SQLite) on the same tables: replica A and B."""
    prefix = f"a2a_{uuid.uuid4().hex[:10]}_"
    return new_store(table_prefix=prefix), new_store(table_prefix=prefix)


def exchange(app: Flask) -> t.Any:
    return app.extensions["a2a"].exchange


def lease(store: SQLStore, task_id: str) -> tuple[t.Any, ...]:
    """The row's (run_by, lease_until, run_deadline)."""
    c = store.tasks.c
    with store.engine.connect() as conn:
        row = conn.execute(
            sa.select(c.run_by, c.lease_until, c.run_deadline).where(c.id == task_id)
        ).one()
    return tuple(row)


def lapse(store: SQLStore, task_id: str, deadline: int | None = None) -> None:
    """The row's lease ended long ago (as if its process died then)."""
    c = store.tasks.c
    with store.engine.begin() as conn:
        conn.execute(
            store.tasks.update().where(c.id == task_id)
            .values(lease_until=1, run_deadline=deadline)
        )  # fmt: skip


def sweeps_after(app: Flask, n: int) -> None:
    """Wait until ``app`` swept ``n`` more times (``n`` periods: a third of a lease each)."""
    leases = exchange(app).leases
    leases.serving()  # as at its first request
    start = leases.sweeps
    assert wait_for(lambda: leases.sweeps >= start + n, timeout=30)


def orphan(store: SQLStore) -> str:
    """A WORKING task whose run is nowhere (created with a lease, as a run's first write)."""
    task_id = uuid.uuid4().hex
    task = Task(task_id, uuid.uuid4().hex, TaskStatus(TaskState.WORKING, utcnow()))
    store.create_task(TaskRecord(task, "alice", None, None, utcnow(), skill="gate"))
    return task_id


def state_of(client: A2ATestClient, task_id: str) -> dict[str, t.Any]:
    return t.cast(dict[str, t.Any], client.rpc("GetTask", {"id": task_id}).result["status"])


def test_a_slow_run_keeps_its_lease_over_many_periods_and_completes(
    make_app: t.Callable[..., Flask], pair: tuple[t.Any, t.Any], gate: Gate
) -> None:
    skills = [Skill(id="gate", name="Gate", description="Waits.", handler=gate.handler)]
    app_a = make_app(skills=skills, config=CONFIG, store=pair[0])
    app_b = make_app(skills=skills, config=CONFIG, store=pair[1])
    a = A2ATestClient(app_a, "alice")
    task = a.send("go", skill="gate", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(10)
    run_by, until, deadline = lease(pair[0], task["id"])
    assert run_by == holder() and until is not None and deadline is not None

    ttl = exchange(app_a).leases.ttl
    sweeps_after(app_b, 4 * 3)  # four leases long, B sweeping every third of one
    assert state_of(a, task["id"])["state"] == "TASK_STATE_WORKING"
    assert lease(pair[0], task["id"])[1] > until  # renewed meanwhile
    assert ttl == MIN_LEASE  # 10 polls would be less

    gate.release.set()
    assert wait_for(lambda: state_of(a, task["id"])["state"] == "TASK_STATE_COMPLETED")
    assert lease(pair[0], task["id"])[1:] == (None, None)  # the settle ended the lease


def test_a_paused_task_holds_no_lease_and_a_resumed_run_takes_one(
    make_app: t.Callable[..., Flask], pair: tuple[t.Any, t.Any], gate: Gate
) -> None:
    def asks_then_waits(task: TaskContext) -> None:
        if len(task.history) < 2:
            task.require_input("which one?")
            return
        gate.handler(task)

    skills = [Skill(id="asks", name="Asks", description="Asks.", handler=asks_then_waits)]
    app_a = make_app(skills=skills, config=CONFIG, store=pair[0])
    app_b = make_app(skills=skills, config=CONFIG, store=pair[1])
    a, b = A2ATestClient(app_a, "alice"), A2ATestClient(app_b, "alice")
    task = a.send("go", skill="asks")["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert lease(pair[0], task["id"])[1:] == (None, None)
    sweeps_after(app_b, 4)
    assert state_of(a, task["id"])["state"] == "TASK_STATE_INPUT_REQUIRED"  # untouched

    params = {"message": {**b.message("this one"), "taskId": task["id"]},
              "configuration": {"returnImmediately": True}}  # fmt: skip
    assert b.rpc("SendMessage", params).result["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert gate.entered.wait(10)
    assert wait_for(lambda: lease(pair[0], task["id"])[1] is not None)  # B took the lease
    assert lease(pair[0], task["id"])[2] is not None  # ... and its run's deadline
    gate.release.set()
    assert wait_for(lambda: state_of(a, task["id"])["state"] == "TASK_STATE_COMPLETED")


def test_a_handed_off_task_holds_no_lease(
    make_app: t.Callable[..., Flask], pair: tuple[t.Any, t.Any]
) -> None:
    def hands_off(task: TaskContext) -> None:
        task.hand_off("queued")

    skills = [Skill(id="job", name="Job", description="Hands off.", handler=hands_off)]
    app_a = make_app(skills=skills, config=CONFIG, store=pair[0])
    app_b = make_app(skills=skills, config=CONFIG, store=pair[1])
    a = A2ATestClient(app_a, "alice")
    task = a.send("go", skill="job")["task"]
    assert task["status"]["state"] == "TASK_STATE_WORKING"
    assert wait_for(lambda: lease(pair[0], task["id"])[1:] == (None, None))  # released
    sweeps_after(app_b, 2 * 3)  # two leases long
    assert state_of(a, task["id"])["state"] == "TASK_STATE_WORKING"  # the job's to settle
    exchange(app_b).task_updater(task["id"]).complete("done")
    assert state_of(a, task["id"])["state"] == "TASK_STATE_COMPLETED"


def test_exactly_one_process_settles_a_lapsed_task_and_publishes_it(
    make_app: t.Callable[..., Flask], pair: tuple[t.Any, t.Any],
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    apps = [make_app(config=CONFIG, store=store) for store in pair]
    task_id = orphan(pair[0])
    a = A2ATestClient(apps[0], "alice")
    subscriptions = [exchange(app).bus.subscribe(task_id) for app in apps]
    start = threading.Barrier(2)
    won: list[int] = []

    def sweep(app: Flask) -> None:
        start.wait(10)
        won.append(exchange(app).leases.sweep())

    with caplog.at_level(logging.WARNING, "flask_a2a"):
        lapse(pair[0], task_id)
        threads = [threading.Thread(target=sweep, args=(app,)) for app in apps]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert wait_for(lambda: state_of(a, task_id)["state"] == "TASK_STATE_FAILED")
        assert wait_for(lambda: "the lease of its run" in caplog.text)  # published by then
    settled = [r for r in caplog.records if "the lease of its run" in r.getMessage()]
    assert len(settled) == 1, settled  # the loops' own sweeps may have won it: still one
    assert sum(won) <= 1
    status = state_of(a, task_id)
    assert status["message"]["parts"][0]["text"] == WORKER_STOPPED
    assert pair[0].get_task(task_id).version == 2  # one write
    assert lease(pair[0], task_id)[1:] == (None, None)
    # Published on the winner's bus (a stream there ends with it; elsewhere streams poll).
    events = [subscription.get(timeout=0) for subscription in subscriptions]
    (event,) = [event for event in events if event is not None]
    assert event.final and event.version == 2
    for subscription in subscriptions:
        subscription.close()


def test_a_lapsed_task_past_its_deadline_is_settled_timed_out(
    make_app: t.Callable[..., Flask], pair: tuple[t.Any, t.Any]
) -> None:
    app = make_app(config=CONFIG, store=pair[1])
    client = A2ATestClient(app, "alice")
    task_id = orphan(pair[0])
    lapse(pair[0], task_id, deadline=2)
    assert wait_for(lambda: state_of(client, task_id)["state"] == "TASK_STATE_FAILED")
    assert state_of(client, task_id)["message"]["parts"][0]["text"] == TIMED_OUT


def test_the_memory_store_and_in_memory_sqlite_keep_no_lease_and_the_key_turns_them_off(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any]
) -> None:
    assert exchange(make_app(store=MemoryStore())).leases is None
    engine = sa.create_engine("sqlite://")
    assert exchange(make_app(store=SQLStore(engine))).leases is None
    engine.dispose()
    store = new_store()
    app = make_app(store=store, config={"A2A_RUN_LEASES": False})
    assert exchange(app).leases is None
    task = A2ATestClient(app, "alice").send("hi", configuration={"returnImmediately": True})
    assert lease(store, task["task"]["id"]) == (None, None, None)


def test_an_older_table_gets_the_lease_columns_on_open_or_by_migration(
    new_store: t.Callable[..., t.Any],
) -> None:
    store = new_store()
    task_id = orphan(store)
    quote = store.engine.dialect.identifier_preparer.quote
    table = quote(store.tasks.name)
    with store.engine.begin() as conn:  # the table as the release before leases made it
        if store.mysql:
            conn.exec_driver_sql(f"DROP INDEX {quote(store.lease_index.name)} ON {table}")
        else:
            conn.exec_driver_sql(f"DROP INDEX {quote(store.lease_index.name)}")
        for name in ("run_by", "lease_until", "run_deadline"):
            conn.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {name}")

    migrated = SQLStore(store.engine, store.table_prefix, create_tables=False)
    with pytest.raises(MissingTablesError, match="lease_until"):
        migrated.get_task(task_id)
    with store.engine.begin() as conn:  # what a migration's revision runs
        migrations.create_tables(conn, store.table_prefix)
    assert migrated.get_task(task_id) is not None
    assert lease(store, task_id) == (None, None, None)  # older rows: no lease, never swept
    with warnings.catch_warnings():  # SQLAlchemy does not reflect expression indexes
        warnings.simplefilter("ignore", sa.exc.SAWarning)
        indexes = {ix["name"] for ix in sa.inspect(store.engine).get_indexes(store.tasks.name)}
    assert store.lease_index.name in indexes


def test_a_lapsed_task_is_settled_once_the_store_answered_a_whole_lease(
    make_app: t.Callable[..., Flask], pair: tuple[t.Any, t.Any]
) -> None:
    """After the store failed this process, a lapse may be the outage's doing (nobody could
    renew): no settle until the store has answered for a whole lease again."""
    app = make_app(config=CONFIG, store=pair[1])
    leases = exchange(app).leases
    task_id = orphan(pair[0])
    leases._failed(RuntimeError("store gone"))  # as after a failed renewal or sweep
    leases._answered()
    lapse(pair[0], task_id)
    assert leases.sweep() == 0
    assert pair[0].get_task(task_id).state is TaskState.WORKING
    client = A2ATestClient(app, "alice")
    assert wait_for(lambda: state_of(client, task_id)["state"] == "TASK_STATE_FAILED")


def settled_rows(store: t.Any, count: int) -> t.Any:
    """``INSERT ... SELECT`` of ``count`` settled tasks, made by the database itself (ids
    ``t000000``...): one short statement, where sending 20,000 rows took longer than the store
    engine's read bound on a loaded machine."""
    digits = sa.union_all(*(sa.select(sa.literal(d).label("d")) for d in range(10))).subquery()
    places = [digits.alias(f"d{i}") for i in range(5)]
    n = sum((place.c.d * 10**i for i, place in enumerate(places)), sa.literal(0))
    crossed: t.Any = places[0]
    for place in places[1:]:  # every digit with every other: 100,000 numbers
        crossed = crossed.join(place, sa.true())
    c = store.tasks.c
    rows = sa.select(
        sa.literal("t") + sa.func.lpad(sa.cast(n, sa.String), 6, "0"), sa.literal("alice"),
        sa.literal("echo"), sa.literal(2), sa.literal("TASK_STATE_COMPLETED"), n,
        sa.literal("c"), n, sa.literal("{}"),
    ).select_from(crossed).where(n < count)  # fmt: skip
    columns = [c.id, c.owner, c.skill, c.version, c.state, c.status_ts, c.context_id,
               c.created_at, c.body]  # fmt: skip
    return store.tasks.insert().from_select(columns, rows)


@pytest.mark.parametrize("store_kind", [
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
])  # fmt: skip
def test_the_sweep_reads_the_lease_index_not_the_table(
    new_store: t.Callable[..., t.Any],
) -> None:
    """Among many settled tasks (no lease), the sweep is a range of the lease index: it costs
    what lapsed, not what is stored (ListTasks at 100k tasks: bench ``list``)."""
    store = new_store()
    with store.engine.begin() as conn, warnings.catch_warnings():
        # the numbers are a cartesian product on purpose (SQLAlchemy's linter warns of one)
        warnings.filterwarnings("ignore", "SELECT statement has a cartesian product")
        conn.execute(settled_rows(store, 20_000))
    lapsed = orphan(store)
    lapse(store, lapsed)
    with store.engine.connect() as conn:
        conn.exec_driver_sql(f"ANALYZE {'TABLE ' if store.mysql else ''}{store.tasks.name}")
        c = store.tasks.c
        query = sa.select(c.id).where(c.lease_until < 10**18).order_by(c.lease_until).limit(100)
        compiled = query.compile(conn, compile_kwargs={"literal_binds": True})
        plan = " ".join(str(row) for row in conn.exec_driver_sql(f"EXPLAIN {compiled}"))
    assert store.lease_index.name in plan, plan
    assert [run.task_id for run in store.lapsed_runs(10**18, 100)] == [lapsed]


def test_a_process_sweeps_from_its_first_request_on(
    make_app: t.Callable[..., Flask], pair: tuple[t.Any, t.Any]
) -> None:
    """Not from its construction: a process that forks after building the app (gunicorn
    ``--preload``) must not sweep on connections its workers inherit."""
    app = make_app(config=CONFIG, store=pair[1])
    task_id = orphan(pair[0])
    lapse(pair[0], task_id)
    leases = exchange(app).leases
    assert leases.sweeps == 0 and pair[0].get_task(task_id).state is TaskState.WORKING
    client = A2ATestClient(app, "alice")
    assert client.rpc("ListTasks", {}).result["totalSize"] == 1  # its first request
    assert wait_for(lambda: state_of(client, task_id)["state"] == "TASK_STATE_FAILED")
