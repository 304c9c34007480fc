"""The SQL store beyond the shared suite: upgrades, indexes, timeouts, errors, wiring, and
the exchange over the wire on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import typing as t
import uuid

import pytest
import sqlalchemy as sa
from flask import Flask

from flask_a2a import A2A, Principal, Skill, TaskContext
from flask_a2a.store import ListQuery, MemoryStore, sql_versions
from flask_a2a.store.sql import SQLStore, engine_from_url
from flask_a2a.testing import A2ATestClient
from tests.conftest import SQL_KINDS, echo, next_millisecond, token_principal


@pytest.fixture(params=SQL_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return t.cast(str, request.param)


@pytest.fixture
def make_store(new_store: t.Callable[..., t.Any]) -> t.Callable[..., t.Any]:
    """Every app of this module runs on the SQL store (SQLite, then PostgreSQL)."""
    return new_store


def engine_of(store_kind: str, request: pytest.FixtureRequest, tmp_path: t.Any) -> t.Any:
    if store_kind == "postgres":
        return request.getfixturevalue("pg_engine")
    if store_kind == "mysql":
        return request.getfixturevalue("mysql_engine")
    return sa.create_engine(f"sqlite:///{tmp_path / 'old.db'}")


# ------------------------------------------------------------------ schema


OLD_TABLE = """CREATE TABLE {name} (
    id VARCHAR(128) PRIMARY KEY, owner VARCHAR(255) NOT NULL, skill VARCHAR(255),
    version INTEGER NOT NULL, state VARCHAR(32) NOT NULL, status_ts BIGINT NOT NULL,
    context_id VARCHAR(255), created_at BIGINT NOT NULL, body TEXT NOT NULL)"""
OLD_BODY = (
    '{"id":"old-1","contextId":"c","status":{"state":"TASK_STATE_COMPLETED",'
    '"timestamp":"2025-05-01T10:00:00.000Z"}}'
)


def test_an_older_table_gains_tenant_and_scopes_and_its_rows_read_as_a_sessions(
    store_kind: str, request: pytest.FixtureRequest, tmp_path: t.Any
) -> None:
    engine = engine_of(store_kind, request, tmp_path)
    prefix = f"a2a_{uuid.uuid4().hex[:10]}_"
    with engine.begin() as conn:
        conn.exec_driver_sql(OLD_TABLE.format(name=f"{prefix}tasks"))
        conn.exec_driver_sql(
            f"INSERT INTO {prefix}tasks VALUES "
            f"('old-1', 'alice', 'echo', 3, 'TASK_STATE_COMPLETED', 1746093600000000, 'c', "
            f"1746093600000000, '{OLD_BODY}')"
        )
    store = SQLStore(engine, prefix)
    try:
        columns = {c["name"] for c in sa.inspect(engine).get_columns(f"{prefix}tasks")}
        assert {"tenant", "scopes"} <= columns
        record = store.get_task("old-1")
        assert record is not None
        assert (record.owner, record.tenant, record.scopes, record.version) == (
            "alice",
            None,
            None,
            3,
        )
        assert record.visible_to(Principal("alice"))
        assert not record.visible_to(Principal("alice", tenant="t2"))
        assert not record.visible_to(Principal("alice", scopes=frozenset({"tasks:read"})))
        assert store.list_tasks(ListQuery("alice", tenant="t2")).total == 0
        assert store.list_tasks(ListQuery("alice")).total == 1
        SQLStore(engine, prefix)  # opening again changes nothing
        assert store.get_task("old-1") == record
    finally:
        store.drop()


def test_listing_indexes_exist(new_store: t.Callable[..., t.Any]) -> None:
    store = new_store()
    catalog = {  # reflection skips expression indexes on SQLite: ask the catalogs
        "sqlite": "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :t",
        "postgresql": "SELECT indexname FROM pg_indexes WHERE tablename = :t",
        "mysql": "SELECT index_name FROM information_schema.statistics "
        "WHERE table_schema = DATABASE() AND table_name = :t",
    }[store.dialect.name]
    with store.engine.connect() as conn:
        names = set(conn.execute(sa.text(catalog), {"t": store.tasks.name}).scalars())
    prefix = store.table_prefix
    assert {f"ix_{prefix}tasks_tier", f"ix_{prefix}tasks_owner"} <= names


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("query", "index"),
    [
        (ListQuery("u1"), "owner"),
        (ListQuery("u1", tenant="t"), "owner"),
        (ListQuery("u1", scoped=True), "tier"),
    ],
)
def test_postgres_pages_come_in_index_order(pg_engine: t.Any, query: ListQuery, index: str) -> None:
    store = SQLStore(pg_engine, f"a2a_{uuid.uuid4().hex[:10]}_")
    rows = [
        dict(id=f"t{i}", owner=f"u{i % 10}", tenant=None if i % 2 else "t",
             scopes=None if i % 3 else '["r"]', skill=None, version=1,
             state="TASK_STATE_COMPLETED", status_ts=i, context_id="c", created_at=i, body=OLD_BODY)
        for i in range(20_000)
    ]  # fmt: skip
    captured: list[str] = []

    def capture(conn: t.Any, cursor: t.Any, statement: str, *args: t.Any) -> None:
        if not (statement.lstrip().startswith("SELECT") and "LIMIT" in statement):
            return
        if hasattr(cursor, "mogrify"):  # psycopg2 (the PostgreSQL driver of SQLAlchemy 1.4)
            captured.append(cursor.mogrify(statement, args[0]).decode())
        else:
            import psycopg

            captured.append(psycopg.ClientCursor(cursor.connection).mogrify(statement, args[0]))

    try:
        with pg_engine.begin() as conn:
            conn.execute(store.tasks.insert(), rows)
            conn.exec_driver_sql(f"ANALYZE {store.tasks.name}")
        sa.event.listen(pg_engine, "before_cursor_execute", capture)
        try:
            store.list_tasks(query)
        finally:
            sa.event.remove(pg_engine, "before_cursor_execute", capture)
        with pg_engine.begin() as conn:
            plan = "\n".join(r[0] for r in conn.exec_driver_sql(f"EXPLAIN {captured[-1]}"))
        assert f"Index Scan using ix_{store.table_prefix}tasks_{index}" in plan, plan
        assert "Sort" not in plan, plan  # the index gives the order: a page costs O(page)
    finally:
        store.drop()


# ------------------------------------------------------------------ timeouts and drivers


@pytest.mark.postgres
@pytest.mark.parametrize("own_engine", [False, True], ids=["host-engine", "own-engine"])
def test_a_locked_row_times_out_instead_of_hanging(pg_engine: t.Any, own_engine: bool) -> None:
    """On the host's engine the timeout is SET LOCAL per transaction; on an engine from
    ``engine_from_url`` every connection carries it."""
    from tests.conftest import pg_url
    from tests.store.test_store import make_record, moved

    engine = engine_from_url(pg_url(), statement_timeout=0.3) if own_engine else pg_engine
    store = SQLStore(engine, f"a2a_{uuid.uuid4().hex[:10]}_", statement_timeout=0.3)
    assert store.statements.autocommits is own_engine
    try:
        first = store.create_task(make_record("t1"))
        with pg_engine.connect() as holder:
            holder.exec_driver_sql(f"SELECT 1 FROM {store.tasks.name} WHERE id='t1' FOR UPDATE")
            started = time.monotonic()
            with pytest.raises(sa.exc.OperationalError, match="statement timeout"):
                store.update_task(moved(first, first.state, first.task.status.timestamp), 1)
            assert time.monotonic() - started < 3
            holder.rollback()
        assert store.get_task("t1") == first  # nothing half-written
    finally:
        store.drop()
        if own_engine:
            engine.dispose()


def test_a_locked_sqlite_database_times_out_instead_of_hanging(tmp_path: t.Any) -> None:
    from tests.store.test_store import make_record

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'locked.db'}")
    store = SQLStore(engine, statement_timeout=0.3)
    holder = engine.raw_connection()
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the database
        started = time.monotonic()
        with pytest.raises(sa.exc.OperationalError, match="locked"):
            store.create_task(make_record("t1"))
        assert 0.2 < time.monotonic() - started < 3
        holder.rollback()
    finally:
        holder.close()
    assert store.get_task("t1") is None
    engine.dispose()


@pytest.mark.skipif(not sql_versions.IS_2, reason="psycopg 3 has no dialect in SQLAlchemy 1.4")
def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ImportError, match=r"pip install flask-a2a\[postgres\]"):
        engine_from_url("postgresql+psycopg://postgres@127.0.0.1:5432/test")


def test_a_missing_psycopg2_names_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    with pytest.raises(ImportError, match=r"pip install psycopg2-binary"):
        engine_from_url("postgresql+psycopg2://postgres@127.0.0.1:5432/test")


def test_the_lazy_export_names_the_extra_when_sqlalchemy_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import flask_a2a.store as stores

    monkeypatch.delitem(sys.modules, "flask_a2a.store.sql")
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)
    with pytest.raises(ImportError, match=r"pip install flask-a2a\[postgres\]"):
        stores.SQLStore  # noqa: B018


# ------------------------------------------------------------------ database errors

#: What a caller hears when the store's database fails (``store.base.unavailable_error``).
UNAVAILABLE = "Internal error: the task store is unavailable; try again later"


class Failing:
    """Wraps a store; the named methods raise OperationalError (a connection dropped)."""

    def __init__(self, inner: t.Any, *methods: str) -> None:
        self.inner = inner
        self.failing = set(methods)

    def __getattr__(self, name: str) -> t.Any:
        attr = getattr(self.inner, name)
        if name not in self.failing:
            return attr

        def fail(*args: t.Any, **kwargs: t.Any) -> t.Any:
            raise sa.exc.OperationalError(
                "UPDATE a2a_tasks", {}, Exception("server at 10.1.2.3 closed; password=hunter2")
            )

        return fail


def test_a_failed_create_is_internal_error_and_writes_nothing(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any],
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    inner = new_store()
    store = Failing(inner, "create_task")
    client = A2ATestClient(make_app(store=store), "alice")
    with caplog.at_level(logging.ERROR, "flask_a2a"):
        answer = client.rpc("SendMessage", {"message": client.message("hi", skill="echo")})
    assert answer.status == 200 and answer.code == -32603
    assert answer.error["message"] == UNAVAILABLE  # the database failed: try again later
    assert "hunter2" not in answer.text and "10.1.2.3" not in answer.text
    assert "hunter2" in caplog.text  # the details are in the log only
    assert inner.list_tasks(ListQuery("alice", tenanted=False)).total == 0
    store.failing.clear()  # the refused call held no run slot
    assert client.send("again", skill="echo")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_failed_read_is_internal_error(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any]
) -> None:
    store = Failing(new_store())
    client = A2ATestClient(make_app(store=store), "alice")
    task = client.send("hi", skill="echo")["task"]
    store.failing.update({"get_task", "list_tasks"})
    for method, params in (("GetTask", {"id": task["id"]}), ("ListTasks", {})):
        answer = client.rpc(method, params)
        assert answer.code == -32603 and answer.error["message"] == UNAVAILABLE
        assert "hunter2" not in answer.text


def test_a_failed_write_in_a_run_leaves_the_last_stored_state(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any]
) -> None:
    inner = new_store()
    store = Failing(inner)
    entered, go = threading.Event(), threading.Event()

    def two_steps(task: TaskContext) -> None:
        task.working()
        entered.set()
        assert go.wait(10)
        echo(task)

    skills = [Skill(id="two", name="Two", description="Two.", handler=two_steps)]
    client = A2ATestClient(make_app(skills=skills, store=store), "alice")
    task = client.send("hi", configuration={"returnImmediately": True})["task"]
    assert entered.wait(10)
    store.failing.add("update_task")
    go.set()
    app = client.app
    deadline = time.monotonic() + 10
    while app.extensions["a2a"].exchange.live_runs() and time.monotonic() < deadline:
        time.sleep(0.01)  # the run ends on its own thread; no event to await from here
    stored = inner.get_task(task["id"])
    assert stored.state.value == "TASK_STATE_WORKING" and stored.task.artifacts == ()
    assert stored.version == 2


# ------------------------------------------------------------------ default wiring


def build(app: Flask, **options: t.Any) -> t.Any:
    skills = [Skill(id="echo", name="Echo", description="Echo.", handler=echo)]
    a2a = A2A(app, skills=skills, principal=token_principal, **options)
    return a2a


def test_without_a_database_the_store_is_in_memory() -> None:
    app = Flask("plain")
    a2a = build(app)
    assert isinstance(a2a.store(app), MemoryStore)
    a2a.shutdown(1)


def test_a2a_database_url_selects_the_sql_store(tmp_path: t.Any) -> None:
    app = Flask("url")
    app.config.update(A2A_DATABASE_URL=f"sqlite:///{tmp_path / 'a2a.db'}", A2A_STATEMENT_TIMEOUT=2)
    a2a = build(app)
    store = a2a.store()
    assert isinstance(store, SQLStore) and store.statement_timeout == 2
    assert A2ATestClient(app, "alice").send("hi")["task"]["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )
    a2a.shutdown(1)
    store.engine.dispose()


def test_flask_sqlalchemy_engine_is_used_when_registered(tmp_path: t.Any) -> None:
    from flask_sqlalchemy import SQLAlchemy

    app = Flask("fsa")
    app.config["SQLALCHEMY_DATABASE_URI"] = f"sqlite:///{tmp_path / 'app.db'}"
    db = SQLAlchemy(app)
    a2a = build(app)
    store = a2a.store()
    with app.app_context():
        assert isinstance(store, SQLStore) and store.engine is db.engine
        assert sa.inspect(db.engine).has_table("a2a_tasks")
    a2a.shutdown(1)


# ------------------------------------------------------------------ over the wire


def test_isolation_and_paging_over_sql(client: A2ATestClient) -> None:
    mine = [client.send(f"s{i}")["task"]["id"] for i in range(5)]
    read = client.send("r", token="alice-read")["task"]["id"]
    other_tenant = client.send("t", token="alice-t2")["task"]["id"]
    client.send("b", token="bob")
    for token, expected in (("alice-read", {read}), ("alice-t2", {other_tenant})):
        page = client.rpc("ListTasks", {}, token=token).result
        assert {task["id"] for task in page["tasks"]} == expected and page["totalSize"] == 1
    for token in ("alice-write", "alice-t2", "bob"):
        assert client.rpc("GetTask", {"id": read}, token=token).code == -32001
        assert client.rpc("CancelTask", {"id": mine[0]}, token=token).code == -32001
    seen: list[str] = []
    params: dict[str, t.Any] = {"pageSize": 2}
    for _ in range(10):
        page = client.rpc("ListTasks", params).result
        assert page["totalSize"] == 6
        seen.extend(task["id"] for task in page["tasks"])
        if not page["nextPageToken"]:
            break
        params["pageToken"] = page["nextPageToken"]
    assert sorted(seen) == sorted(mine + [read]) and len(seen) == 6


def test_retention_trims_one_tier_over_sql(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(config={"A2A_TERMINAL_TASK_RETENTION": 2})
    client = A2ATestClient(app, "alice")
    scoped = client.send("keep me", token="alice-read")["task"]["id"]
    ids = []
    for i in range(4):
        next_millisecond()  # distinct timestamps: "oldest" is well defined
        ids.append(client.send(f"s{i}")["task"]["id"])
    page = client.rpc("ListTasks", {}).result
    # A session sees every tier; the scoped tier's task was not pushed out by the session's.
    assert [task["id"] for task in page["tasks"]] == [ids[3], ids[2], scoped]
    assert page["totalSize"] == 3
    assert client.rpc("GetTask", {"id": scoped}, token="alice-read").result["id"] == scoped


def test_export_and_erase_user_data(new_store: t.Callable[..., t.Any]) -> None:
    app = Flask("erase")
    a2a = build(app, store=new_store())
    client = A2ATestClient(app, "alice")
    for i in range(3):
        client.send(f"a{i}")
    bob = client.send("b", token="bob")["task"]
    exported = a2a.export_user_data("alice")
    assert len(exported["tasks"]) == 3 and {r["owner"] for r in exported["tasks"]} == {"alice"}
    assert a2a.erase_user_data("alice") == 3
    assert a2a.export_user_data("alice") == {"tasks": [], "pushConfigs": []}
    assert client.rpc("ListTasks", {}).result["totalSize"] == 0
    assert client.rpc("GetTask", {"id": bob["id"]}, token="bob").result["id"] == bob["id"]
    assert [r["task"]["id"] for r in a2a.export_user_data("bob")["tasks"]] == [bob["id"]]
    store = a2a.exchange(app).store
    if store.counts is not None:  # PostgreSQL's per-tier counts: alice's rows are gone too
        with store.engine.connect() as conn:
            owners = conn.execute(sa.select(store.counts.c.owner)).scalars().all()
        assert owners == ["bob"]
    a2a.shutdown(1)


# ------------------------------------------------------------------ totalSize by tier counts


def counted_and_counted_again(store: t.Any, query: ListQuery) -> tuple[int, int]:
    """totalSize from the store, and a COUNT(*) of the same rows by hand."""
    c = store.tasks.c
    where = [c.owner == query.owner]
    if query.tenanted:
        where.append(c.tenant.is_(None) if query.tenant is None else c.tenant == query.tenant)
    if query.scoped:
        text = (
            None
            if query.scopes is None
            else json.dumps(sorted(query.scopes), separators=(",", ":"))
        )
        where.append(c.scopes.is_(None) if text is None else c.scopes == text)
    with store.engine.connect() as conn:
        truth = conn.execute(sa.select(sa.func.count()).where(*where)).scalar_one()
    return store.list_tasks(query).total, truth


TIER_QUERIES = [
    ListQuery("alice"),
    ListQuery("alice", tenant="t2"),
    ListQuery("alice", tenant=""),
    ListQuery("alice", scoped=True),
    ListQuery("alice", scopes=("r",), scoped=True),
    ListQuery("alice", tenanted=False),
    ListQuery("bob"),
]


@pytest.mark.postgres
def test_totals_come_from_trigger_kept_counts_whoever_writes_the_table(
    pg_own_engine: t.Any,
) -> None:
    """Inserts, trims, deletes, an erase, SQL by hand and a TRUNCATE: every total stays exact."""
    from datetime import timedelta

    from flask_a2a.protocol.model import TaskState, Tier
    from tests.store.test_store import T0, make_record, moved

    store = SQLStore(pg_own_engine, f"a2a_{uuid.uuid4().hex[:10]}_")
    statements: list[str] = []

    def capture(conn: t.Any, cursor: t.Any, statement: str, *args: t.Any) -> None:
        statements.append(statement)

    sa.event.listen(pg_own_engine, "before_cursor_execute", capture)
    try:
        n = 0
        for tenant in (None, "t2", ""):
            for scopes in (None, ("r",)):
                for owner in ("alice", "bob"):
                    for _ in range(3):
                        n += 1
                        record = store.create_task(
                            make_record(f"t{n}", owner=owner, tenant=tenant, scopes=scopes)
                        )
                        at = T0 + timedelta(seconds=n)
                        store.update_task(moved(record, TaskState.COMPLETED, at), 1)
        store.trim_terminal_tasks(Tier("alice", None, None), 1)
        store.delete_tasks(["t4", "t5"])
        with store.engine.connect() as conn:
            conn.exec_driver_sql(f"DELETE FROM {store.tasks.name} WHERE id IN ('t7', 't8')")
            conn.commit()
        for query in TIER_QUERIES:
            total, truth = counted_and_counted_again(store, query)
            assert total == truth, query
        statements.clear()
        store.list_tasks(ListQuery("alice"))
        assert store.counts is not None
        assert any(store.counts.name in s for s in statements)  # no COUNT over the tasks
        assert not any("count(*)" in s.lower() for s in statements), statements
        statements.clear()
        store.list_tasks(ListQuery("alice", context_id="c"))  # a filter: counted by COUNT
        assert not any(store.counts.name in s for s in statements)
        store.erase_owner("bob")
        with store.engine.connect() as conn:
            conn.exec_driver_sql(f"TRUNCATE {store.tasks.name}")
            conn.commit()
        assert store.list_tasks(ListQuery("alice", tenanted=False)).total == 0
    finally:
        sa.event.remove(pg_own_engine, "before_cursor_execute", capture)
        store.drop()


@pytest.mark.postgres
def test_a_table_without_counts_is_counted_on_open(pg_engine: t.Any) -> None:
    """An older install (rows, no counts table) gets its counts filled when a store opens."""
    from tests.store.test_store import make_record

    prefix = f"a2a_{uuid.uuid4().hex[:10]}_"
    first = SQLStore(pg_engine, prefix)
    try:
        for i in range(5):
            first.create_task(make_record(f"t{i}", owner="alice", tenant="t2" if i % 2 else None))
        with pg_engine.begin() as conn:  # what an install before the counts looked like
            from flask_a2a.store import sql_counts

            sql_counts.uninstall(conn, prefix)
            conn.exec_driver_sql(f"DROP TABLE {prefix}task_counts")
        reopened = SQLStore(pg_engine, prefix)
        for query in TIER_QUERIES:
            total, truth = counted_and_counted_again(reopened, query)
            assert total == truth, query
        assert reopened.list_tasks(ListQuery("alice", tenant="t2")).total == 2
    finally:
        first.drop()


@pytest.mark.postgres
def test_concurrent_trims_of_one_tier_never_deadlock(pg_engine: t.Any) -> None:
    """Settles in one tier trim the same oldest rows at once; PostgreSQL must not deadlock."""
    from datetime import datetime, timedelta, timezone

    from flask_a2a.protocol.model import Message, Task, TaskState, TaskStatus, Tier
    from flask_a2a.store import TaskRecord

    store = SQLStore(pg_engine, table_prefix=f"t{uuid.uuid4().hex[:10]}_")
    tier = Tier("alice", None, None)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def settle_and_trim(worker: int) -> None:
        try:
            for n in range(10):
                task_id = f"w{worker}-{n}"
                at = start + timedelta(milliseconds=worker * 100 + n)
                message = Message.agent("x", context_id="c", task_id=task_id)
                task = Task(task_id, "c", TaskStatus(TaskState.COMPLETED, at), history=(message,))
                store.create_task(TaskRecord(task, "alice", None, None, at))
                if n == 0:
                    barrier.wait(10)
                store.trim_terminal_tasks(tier, 3)
        except BaseException as exc:  # collected: a deadlock error would land here
            errors.append(exc)

    threads = [threading.Thread(target=settle_and_trim, args=(w,)) for w in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        store.trim_terminal_tasks(tier, 3)
        page = store.list_tasks(ListQuery(owner="alice", limit=100))
        assert page.total == 3
    finally:
        store.drop()
