"""The SQL store on MariaDB/MySQL beyond the shared suite: utf8mb4 bodies, exact keys, the
trigger-kept counts, index order, timeouts, concurrent trims, the upgrade of older tables.

Runs against ``A2A_TEST_MYSQL_URL`` (CI starts MariaDB); skips with the reason when it does not
answer.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import typing as t
import uuid
from datetime import datetime, timedelta, timezone
from inspect import signature

import pytest
import sqlalchemy as sa
from flask import Flask
from sqlalchemy.engine.default import DefaultDialect

from flask_a2a.protocol.model import Message, Task, TaskState, TaskStatus, Tier
from flask_a2a.store import ListQuery, TaskRecord
from flask_a2a.store.sql import SQLStore, engine_from_url
from flask_a2a.testing import A2ATestClient
from tests.conftest import TOKENS, mysql_url
from tests.store.test_sql_store import OLD_BODY, OLD_TABLE, TIER_QUERIES, counted_and_counted_again
from tests.store.test_store import T0, make_record, moved

pytestmark = pytest.mark.mysql


@pytest.fixture
def store_kind() -> str:
    return "mysql"


@pytest.fixture
def make_store(new_store: t.Callable[..., t.Any]) -> t.Callable[..., t.Any]:
    return new_store


def prefix() -> str:
    return f"a2a_{uuid.uuid4().hex[:10]}_"


# ------------------------------------------------------------------ utf8mb4, byte for byte


def test_an_emoji_and_a_1_mib_message_round_trip_byte_for_byte(
    make_app: t.Callable[..., Flask],
) -> None:
    app = make_app(config={"A2A_MAX_BODY_BYTES": 8 * 1024 * 1024})
    client = A2ATestClient(app, "alice")
    emoji = "snake 🐍 and 𝄞 clef, ё, 漢字"
    # 1 MiB of UTF-8 with 1-, 2-, 3- and 4-byte characters and no lone surrogate.
    unit = "a€ж😀"
    big = unit * (1024 * 1024 // len(unit.encode()))
    big += "a" * (1024 * 1024 - len(big.encode()))
    assert len(big.encode()) == 1024 * 1024
    for text in (emoji, big):
        task = client.send(text)["task"]
        got = client.rpc("GetTask", {"id": task["id"]}).result
        assert got["artifacts"][0]["parts"][0]["text"].encode() == text.encode()
        assert got["history"][0]["parts"][0]["text"] == text
    store = app.extensions["a2a"].store()
    with store.engine.connect() as conn:
        kinds = dict(
            conn.execute(
                sa.text(
                    "SELECT column_name, column_type FROM information_schema.columns "
                    "WHERE table_schema = DATABASE() AND table_name = :t"
                ),
                {"t": store.tasks.name},
            ).all()
        )
    assert kinds["body"] == "longtext"  # TEXT would hold 64 KiB


# ------------------------------------------------------------------ exact keys


def test_keys_match_exactly_a_case_or_a_trailing_space_is_another_owner(
    make_app: t.Callable[..., Flask], monkeypatch: pytest.MonkeyPatch
) -> None:
    """utf8mb4_bin would be case-sensitive but PAD SPACE: 'alice ' = 'alice'. The keys use a
    NO PAD binary collation, so neither 'Alice' nor 'alice ' sees alice's tasks."""
    from flask_a2a import Principal

    monkeypatch.setitem(TOKENS, "upper", Principal("Alice"))
    monkeypatch.setitem(TOKENS, "spaced", Principal("alice "))
    monkeypatch.setitem(TOKENS, "tenant-spaced", Principal("alice", tenant="t2 "))
    client = A2ATestClient(make_app(), "alice")
    task = client.send("mine")["task"]
    tenanted = client.send("t2", token="alice-t2")["task"]
    for token in ("upper", "spaced"):
        assert client.rpc("GetTask", {"id": task["id"]}, token=token).code == -32001
        page = client.rpc("ListTasks", {}, token=token).result
        assert page["tasks"] == [] and page["totalSize"] == 0
    assert client.rpc("GetTask", {"id": tenanted["id"]}, token="tenant-spaced").code == -32001
    assert client.rpc("ListTasks", {}, token="tenant-spaced").result["totalSize"] == 0
    assert client.rpc("GetTask", {"id": task["id"].upper()}).code == -32001
    assert client.rpc("GetTask", {"id": task["id"] + " "}).code == -32001
    assert client.rpc("GetTask", {"id": task["id"]}).result["id"] == task["id"]


def test_the_longest_keys_fit_the_indexes(new_store: t.Callable[..., t.Any]) -> None:
    """255 four-byte characters in owner and tenant (1020 bytes each) and a scope set of any
    size fit InnoDB's 3072-byte index keys (the scope set is indexed by its digest)."""
    store = new_store()
    owner, tenant = "😀" * 255, "𝄞" * 255
    scopes = tuple(f"scope-{i:04d}-{'ж' * 50}" for i in range(200))
    record = store.create_task(make_record("t1", owner=owner, tenant=tenant, scopes=scopes))
    assert store.get_task("t1") == record
    page = store.list_tasks(ListQuery(owner, tenant=tenant, scopes=scopes, scoped=True))
    assert [r.task.id for r in page.records] == ["t1"] and page.total == 1
    assert store.list_tasks(ListQuery(owner, tenant=tenant, scopes=scopes[:-1],
                                      scoped=True)).total == 0  # fmt: skip


# ------------------------------------------------------------------ counts and index order


def test_totals_come_from_row_trigger_counts_whoever_writes_the_table(
    mysql_own_engine: t.Any,
) -> None:
    store = SQLStore(mysql_own_engine, prefix())
    statements: list[str] = []

    def capture(conn: t.Any, cursor: t.Any, statement: str, *args: t.Any) -> None:
        statements.append(statement)

    sa.event.listen(mysql_own_engine, "before_cursor_execute", capture)
    try:
        n = 0
        for tenant in (None, "t2", ""):
            for scopes in (None, ("r",), ()):
                for owner in ("alice", "bob"):
                    for _ in range(2):
                        n += 1
                        record = store.create_task(
                            make_record(f"t{n}", owner=owner, tenant=tenant, scopes=scopes)
                        )
                        store.update_task(
                            moved(record, TaskState.COMPLETED, T0 + timedelta(seconds=n)), 1
                        )
        store.trim_terminal_tasks(Tier("alice", None, None), 1)
        store.delete_tasks(["t4", "t5"])
        with mysql_own_engine.connect() as conn:  # SQL by hand
            conn.exec_driver_sql(f"DELETE FROM {store.tasks.name} WHERE id IN ('t7', 't8')")
        queries = [*TIER_QUERIES, ListQuery("alice", scopes=(), scoped=True)]
        for query in queries:
            total, truth = counted_and_counted_again(store, query)
            assert total == truth, query
        statements.clear()
        store.list_tasks(ListQuery("alice"))
        assert store.counts is not None
        assert any(store.counts.name in s for s in statements)
        assert not any("count(*)" in s.lower() for s in statements), statements
        store.erase_owner("bob")
        assert store.list_tasks(ListQuery("bob", tenanted=False)).total == 0
    finally:
        sa.event.remove(mysql_own_engine, "before_cursor_execute", capture)
        store.drop()


def test_a_table_without_counts_is_counted_on_open(mysql_engine: t.Any) -> None:
    name = prefix()
    first = SQLStore(mysql_engine, name)
    try:
        for i in range(5):
            first.create_task(make_record(f"t{i}", tenant="t2" if i % 2 else None))
        with mysql_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE {name}task_counts")
        reopened = SQLStore(mysql_engine, name)
        for query in TIER_QUERIES:
            total, truth = counted_and_counted_again(reopened, query)
            assert total == truth, query
        assert reopened.list_tasks(ListQuery("alice", tenant="t2")).total == 2
    finally:
        first.drop()


@pytest.mark.parametrize(
    ("query", "index"),
    [
        (ListQuery("u1"), "owner"),
        (ListQuery("u1", tenant="t"), "owner"),
        (ListQuery("u1", scoped=True), "tier"),
        (ListQuery("u1", scopes=("r",), scoped=True), "tier"),
    ],
)
def test_pages_come_in_index_order(mysql_engine: t.Any, query: ListQuery, index: str) -> None:
    store = SQLStore(mysql_engine, prefix())
    rows = [
        dict(id=f"t{i}", owner=f"u{i % 10}", tenant=None if i % 2 else "t",
             scopes=None if i % 3 else '["r"]', skill=None, version=1,
             state="TASK_STATE_COMPLETED", status_ts=i, context_id="c", created_at=i, body=OLD_BODY)
        for i in range(20_000)
    ]  # fmt: skip
    captured: list[tuple[str, t.Any]] = []

    def capture(conn: t.Any, cursor: t.Any, statement: str, parameters: t.Any, *a: t.Any) -> None:
        if statement.lstrip().startswith("SELECT") and "LIMIT" in statement:
            captured.append((statement, parameters))

    try:
        with mysql_engine.begin() as conn:
            conn.execute(store.tasks.insert(), rows)
            conn.exec_driver_sql(f"ANALYZE TABLE {store.tasks.name}")
        sa.event.listen(mysql_engine, "before_cursor_execute", capture)
        try:
            page = store.list_tasks(query)  # the first page, then the next by keyset
            store.list_tasks(dataclasses.replace(query, cursor=page.next_cursor))
        finally:
            sa.event.remove(mysql_engine, "before_cursor_execute", capture)
        with mysql_engine.connect() as conn:
            for statement, parameters in captured:
                plan = conn.exec_driver_sql(f"EXPLAIN {statement}", parameters).mappings().all()
                assert plan[0]["key"] == f"ix_{store.table_prefix}tasks_{index}", plan
                assert "filesort" not in (plan[0]["Extra"] or ""), plan  # O(page)
    finally:
        store.drop()


# ------------------------------------------------------------------ timeouts


@pytest.mark.parametrize("own_engine", [False, True], ids=["host-engine", "own-engine"])
def test_a_locked_row_times_out_instead_of_hanging(mysql_engine: t.Any, own_engine: bool) -> None:
    """Own engine: every connection carries the timeouts (connect event). Host engine: set for
    the store's transaction, the host's restored after."""
    host = sa.create_engine(mysql_url(), pool_size=1, max_overflow=0)
    engine = engine_from_url(mysql_url(), statement_timeout=1.0) if own_engine else host
    store = SQLStore(engine, prefix(), statement_timeout=1.0)
    assert store.statements.autocommits is own_engine
    try:
        first = store.create_task(make_record("t1"))
        with mysql_engine.connect() as holder:
            holder.exec_driver_sql(f"SELECT 1 FROM {store.tasks.name} WHERE id='t1' FOR UPDATE")
            started = time.monotonic()
            with pytest.raises(sa.exc.OperationalError, match="max_statement_time|Lock wait"):
                store.update_task(moved(first, first.state, first.task.status.timestamp), 1)
            assert time.monotonic() - started < 5
            holder.rollback()
        assert store.get_task("t1") == first  # nothing half-written
        with host.connect() as conn:  # the host's one connection has its own settings back
            settings = conn.exec_driver_sql(
                "SELECT @@SESSION.max_statement_time, @@SESSION.innodb_lock_wait_timeout"
            ).one()
            server = conn.exec_driver_sql(
                "SELECT @@GLOBAL.max_statement_time, @@GLOBAL.innodb_lock_wait_timeout"
            ).one()
        assert tuple(settings) == tuple(server)
    finally:
        store.drop()
        engine.dispose()
        host.dispose()


# ------------------------------------------------------------------ concurrent trims


@pytest.mark.parametrize("own_engine", [False, True], ids=["host-engine", "own-engine"])
def test_concurrent_trims_of_one_tier_never_deadlock(
    mysql_engine: t.Any, mysql_own_engine: t.Any, own_engine: bool
) -> None:
    """Settles in one tier create, settle and trim the same oldest rows at once: lock-first
    trims and row-level count triggers must neither deadlock nor miscount."""
    store = SQLStore(mysql_own_engine if own_engine else mysql_engine, prefix())
    tier = Tier("alice", None, None)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    errors: list[BaseException] = []
    workers = 12
    barrier = threading.Barrier(workers)

    def settle_and_trim(worker: int) -> None:
        try:
            for n in range(40):
                task_id = f"w{worker}-{n}"
                at = start + timedelta(milliseconds=worker * 1000 + n)
                message = Message.agent("x", context_id="c", task_id=task_id)
                task = Task(task_id, "c", TaskStatus(TaskState.WORKING, at), history=(message,))
                record = store.create_task(TaskRecord(task, "alice", None, None, at))
                if n == 0:
                    barrier.wait(10)
                store.update_task(moved(record, TaskState.COMPLETED, at), 1)
                store.trim_terminal_tasks(tier, 3)
        except BaseException as exc:  # collected: a deadlock error would land here
            errors.append(exc)

    threads = [threading.Thread(target=settle_and_trim, args=(w,)) for w in range(workers)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        store.trim_terminal_tasks(tier, 3)
        page = store.list_tasks(ListQuery(owner="alice", limit=100))
        assert page.total == 3 == len(page.records)
    finally:
        store.drop()


# ------------------------------------------------------------------ older tables


def test_an_older_case_insensitive_table_is_brought_to_exact_keys(mysql_engine: t.Any) -> None:
    """A table with the server's default collation (utf8mb4_general_ci: 'A' = 'a') and a
    64 KiB TEXT body is altered on open: exact keys, LONGTEXT, then the new columns."""
    name = prefix()
    with mysql_engine.begin() as conn:
        conn.exec_driver_sql(
            OLD_TABLE.format(name=f"{name}tasks")
            + " DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {name}tasks VALUES ('old-1', 'alice', 'echo', 3, "
            f"'TASK_STATE_COMPLETED', 1746093600000000, 'c', 1746093600000000, '{OLD_BODY}')"
        )
    store = SQLStore(mysql_engine, name)
    try:
        with mysql_engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT column_name, column_type, collation_name "
                    "FROM information_schema.columns "
                    "WHERE table_schema = DATABASE() AND table_name = :t"
                ),
                {"t": f"{name}tasks"},
            )
            columns = {row[0]: (row[1], row[2]) for row in rows}  # fmt: skip
        for key in ("id", "owner", "tenant", "context_id"):
            assert columns[key][1] in ("utf8mb4_nopad_bin", "utf8mb4_0900_bin"), columns
        assert columns["body"][0] == "longtext"
        assert store.get_task("old-1") is not None and store.get_task("OLD-1") is None
        assert store.list_tasks(ListQuery("alice")).total == 1
        assert store.list_tasks(ListQuery("ALICE")).total == 0
        big = make_record("big", owner="alice")
        text = "x" * 100_000
        message = Message.agent(text, context_id="c", task_id="big")
        big = TaskRecord(Task("big", "c", big.task.status, history=(message,)), "alice",
                         None, None, big.created_at)  # fmt: skip
        store.create_task(big)
        got = store.get_task("big")
        assert got is not None and got.task.history[0].parts[0].text == text
    finally:
        store.drop()


# ------------------------------------------------------------------ round trips


def test_a_one_statement_call_on_its_own_engine_is_one_round_trip() -> None:
    """No ROLLBACK as each call ends (PyMySQL would send one even in autocommit); a connection
    left inside a transaction is still rolled back when it goes back to the pool."""
    engine = engine_from_url(mysql_url(), statement_timeout=5.0, pool_size=1)
    if engine.dialect.driver != "pymysql":
        engine.dispose()
        pytest.skip("mysqlclient keeps no server status: its connections are rolled back always")
    store = SQLStore(engine, prefix())

    def questions() -> int:
        with engine.connect() as conn:
            row = conn.exec_driver_sql("SHOW SESSION STATUS LIKE 'Questions'").one()
        return int(row[1])

    try:
        store.create_task(make_record("t1"))
        before = questions()
        for _ in range(20):
            assert store.get_task("t1") is not None
        # 20 SELECTs and the SHOW itself (and, before SQLAlchemy 2.0.43, the ROLLBACK that
        # closing the first SHOW's connection sends: no skip_autocommit_rollback there)
        closing = 0 if "skip_autocommit_rollback" in signature(DefaultDialect).parameters else 1
        assert questions() - before == 20 + 1 + closing
        with engine.connect() as conn:  # left open, as a crash between statements would
            conn.exec_driver_sql("START TRANSACTION")
            conn.exec_driver_sql(f"DELETE FROM {store.tasks.name}")
        assert store.get_task("t1") is not None
    finally:
        store.drop()
        engine.dispose()
