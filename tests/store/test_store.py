"""The store suite: every Store (memory, SQLite, PostgreSQL) passes the same cases.

The backend comes from the ``store_kind`` fixture (conftest); PostgreSQL cases skip with the
reason when ``A2A_TEST_DATABASE_URL`` does not answer.
"""

from __future__ import annotations

import dataclasses
import math
import typing as t
from datetime import datetime, timedelta, timezone

import pytest

from flask_a2a.protocol.errors import UnencodableDataError
from flask_a2a.protocol.model import Message, Part, PushConfig, Task, TaskState, TaskStatus, Tier
from flask_a2a.store import ListQuery, StaleTaskError, TaskRecord

T0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
TERMINAL = (TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED)


def make_record(
    task_id: str,
    *,
    owner: str = "alice",
    tenant: str | None = None,
    scopes: tuple[str, ...] | None = None,
    state: TaskState = TaskState.SUBMITTED,
    at: datetime = T0,
    context_id: str = "ctx",
    skill: str | None = "echo",
) -> TaskRecord:
    message = Message.agent("hi é ✓", context_id=context_id, task_id=task_id)
    task = Task(
        task_id,
        context_id,
        TaskStatus(state, at, message),
        history=(message,),
        metadata={"n": 1, "nested": {"x": [1, None, "y"]}},
    )
    return TaskRecord(task, owner, tenant, scopes, at, skill=skill)


def moved(record: TaskRecord, state: TaskState, at: datetime) -> TaskRecord:
    task = dataclasses.replace(record.task, status=TaskStatus(state, at))
    return dataclasses.replace(record, task=task)


@pytest.fixture
def store(new_store: t.Callable[..., t.Any]) -> t.Any:
    return new_store()


def ids(records: t.Iterable[TaskRecord]) -> list[str]:
    return [r.task.id for r in records]


# ------------------------------------------------------------------ tasks


def test_create_then_get_round_trips_every_field(store: t.Any) -> None:
    record = make_record("t1", tenant="acme", scopes=("a", "b"))
    created = store.create_task(dataclasses.replace(record, version=9))
    assert created.version == 1
    got = store.get_task("t1")
    assert got == dataclasses.replace(record, version=1)
    assert got.task.history[0].parts == (Part(text="hi é ✓"),)
    assert store.get_task("t1", owner="alice") == got


def test_get_hides_unknown_and_foreign_ids(store: t.Any) -> None:
    store.create_task(make_record("t1"))
    assert store.get_task("nope") is None
    assert store.get_task("t1", owner="bob") is None


def test_duplicate_id_is_refused_and_changes_nothing(store: t.Any) -> None:
    store.create_task(make_record("t1"))
    with pytest.raises(ValueError):
        store.create_task(make_record("t1", owner="bob"))
    assert store.get_task("t1").owner == "alice"


def test_a_write_tried_again_after_its_answer_was_lost_is_that_write(store: t.Any) -> None:
    """A create or update the database took, but whose answer was lost, is tried again with the
    same content: the store finds it stored and answers it, never "exists" or a conflict
    (issue 34 item 8). A different write to the same row still is refused."""
    record = make_record("t1")
    first = store.create_task(record)
    assert store.create_task(record) == first
    with pytest.raises(ValueError):
        store.create_task(moved(record, TaskState.WORKING, T0))
    change = moved(first, TaskState.COMPLETED, T0 + timedelta(seconds=1))
    second = store.update_task(change, 1)
    assert store.update_task(change, 1) == second
    assert second.version == 2 and second.state is TaskState.COMPLETED
    with pytest.raises(StaleTaskError) as caught:
        store.update_task(moved(first, TaskState.FAILED, T0 + timedelta(seconds=1)), 1)
    assert caught.value.current == second
    assert store.get_task("t1") == second


def test_update_bumps_the_version_and_stale_writes_fail(store: t.Any) -> None:
    first = store.create_task(make_record("t1"))
    second = store.update_task(moved(first, TaskState.WORKING, T0 + timedelta(seconds=1)), 1)
    assert second.version == 2 and second.state is TaskState.WORKING
    with pytest.raises(StaleTaskError) as caught:
        store.update_task(moved(first, TaskState.COMPLETED, T0 + timedelta(seconds=2)), 1)
    assert caught.value.current == second
    assert store.get_task("t1") == second


def test_update_of_a_deleted_task_is_stale_with_no_current(store: t.Any) -> None:
    first = store.create_task(make_record("t1"))
    assert store.delete_tasks(["t1"]) == 1
    with pytest.raises(StaleTaskError) as caught:
        store.update_task(moved(first, TaskState.WORKING, T0), 1)
    assert caught.value.current is None
    assert store.get_task("t1") is None


def test_update_never_moves_creation_owner_tenant_or_scopes(store: t.Any) -> None:
    first = store.create_task(make_record("t1", tenant="acme", scopes=("r",)))
    hijack = dataclasses.replace(
        moved(first, TaskState.WORKING, T0), owner="bob", tenant="evil", scopes=None
    )
    updated = store.update_task(hijack, 1)
    for record in (updated, store.get_task("t1")):
        assert (record.owner, record.tenant, record.scopes) == ("alice", "acme", ("r",))
    assert store.get_task("t1", owner="bob") is None


def test_unencodable_tasks_are_refused_before_writing(store: t.Any) -> None:
    bad = make_record("t1")
    bad = dataclasses.replace(bad, task=dataclasses.replace(bad.task, metadata={"x": math.nan}))
    with pytest.raises(UnencodableDataError):
        store.create_task(bad)
    assert store.get_task("t1") is None
    first = store.create_task(make_record("t2"))
    worse = dataclasses.replace(first, task=dataclasses.replace(first.task, metadata={"f": print}))
    with pytest.raises(UnencodableDataError):
        store.update_task(worse, 1)
    assert store.get_task("t2") == first


# ------------------------------------------------------------------ listing


def seed_tiers(store: t.Any) -> None:
    store.create_task(make_record("session", at=T0))
    store.create_task(make_record("read", scopes=("tasks:read",), at=T0 + timedelta(seconds=1)))
    store.create_task(make_record("write", scopes=("tasks:write",), at=T0 + timedelta(seconds=2)))
    store.create_task(make_record("t2", tenant="t2", at=T0 + timedelta(seconds=3)))
    store.create_task(make_record("bob", owner="bob", at=T0 + timedelta(seconds=4)))


def test_list_by_owner_tenant_and_scope_set(store: t.Any) -> None:
    seed_tiers(store)
    session = store.list_tasks(ListQuery("alice"))
    assert ids(session.records) == ["write", "read", "session"] and session.total == 3
    read = store.list_tasks(ListQuery("alice", scopes=("tasks:read",), scoped=True))
    assert ids(read.records) == ["read"] and read.total == 1
    only_session_tier = store.list_tasks(ListQuery("alice", scoped=True))
    assert ids(only_session_tier.records) == ["session"]
    other = store.list_tasks(ListQuery("alice", scopes=("nothing",), scoped=True))
    assert other.records == [] and other.total == 0
    tenant = store.list_tasks(ListQuery("alice", tenant="t2"))
    assert ids(tenant.records) == ["t2"] and tenant.total == 1
    everywhere = store.list_tasks(ListQuery("alice", tenanted=False))
    assert ids(everywhere.records) == ["t2", "write", "read", "session"]
    assert ids(store.list_tasks(ListQuery("bob")).records) == ["bob"]
    assert store.list_tasks(ListQuery("carol")).total == 0


def test_keyset_pages_are_newest_first_with_ties_broken_by_id(store: t.Any) -> None:
    # Three share a timestamp: the id decides, in the same order on every backend.
    stamps = [T0, T0 + timedelta(seconds=1), T0 + timedelta(seconds=1), T0 + timedelta(seconds=1)]
    stamps += [T0 + timedelta(seconds=2), T0 + timedelta(seconds=3), T0 + timedelta(seconds=4)]
    names = ["a", "b-1", "b-2", "B", "c", "d", "e"]
    assert len(names) == len(stamps)
    for name, stamp in zip(names, stamps):
        store.create_task(make_record(name, at=stamp))
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        page = store.list_tasks(ListQuery("alice", limit=3, cursor=cursor))
        assert page.total == 7
        seen.extend(ids(page.records))
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ["e", "d", "c", "b-2", "b-1", "B", "a"]


def test_a_full_last_page_has_no_cursor(store: t.Any) -> None:
    for i in range(4):
        store.create_task(make_record(f"t{i}", at=T0 + timedelta(seconds=i)))
    first = store.list_tasks(ListQuery("alice", limit=2))
    second = store.list_tasks(ListQuery("alice", limit=2, cursor=first.next_cursor))
    assert ids(second.records) == ["t1", "t0"] and second.next_cursor is None


def test_list_filters_context_state_and_time(store: t.Any) -> None:
    store.create_task(make_record("old", at=T0, context_id="c1"))
    store.create_task(make_record("mid", at=T0 + timedelta(seconds=5), context_id="c2"))
    done = store.create_task(make_record("new", at=T0 + timedelta(seconds=9), context_id="c1"))
    store.update_task(moved(done, TaskState.COMPLETED, T0 + timedelta(seconds=10)), 1)
    by_context = store.list_tasks(ListQuery("alice", context_id="c1"))
    assert ids(by_context.records) == ["new", "old"] and by_context.total == 2
    by_state = store.list_tasks(ListQuery("alice", states=frozenset({TaskState.COMPLETED})))
    assert ids(by_state.records) == ["new"] and by_state.total == 1
    after = store.list_tasks(ListQuery("alice", status_after=T0 + timedelta(seconds=5)))
    assert ids(after.records) == ["new", "mid"] and after.total == 2


# ------------------------------------------------------------------ retention


def test_trim_keeps_the_newest_terminal_rows_of_one_tier_only(store: t.Any) -> None:
    for i in range(5):
        record = store.create_task(make_record(f"done{i}", at=T0 + timedelta(seconds=i)))
        store.update_task(moved(record, TERMINAL[i % 4], T0 + timedelta(seconds=i)), 1)
    store.create_task(make_record("running", at=T0 - timedelta(seconds=10)))
    other = store.create_task(make_record("scoped", scopes=("r",), at=T0 - timedelta(seconds=9)))
    store.update_task(moved(other, TaskState.COMPLETED, T0 - timedelta(seconds=9)), 1)
    tenant = store.create_task(make_record("tenant", tenant="t2", at=T0 - timedelta(seconds=8)))
    store.update_task(moved(tenant, TaskState.COMPLETED, T0 - timedelta(seconds=8)), 1)
    store.put_push_config("alice", PushConfig("p1", "done0", "https://example.com/h"), 8)
    store.put_push_config("alice", PushConfig("p2", "done4", "https://example.com/h"), 8)

    deleted = store.trim_terminal_tasks(Tier("alice", None, None), 2)

    assert sorted(deleted) == ["done0", "done1", "done2"]
    left = store.list_tasks(ListQuery("alice", tenanted=False, limit=100))
    assert sorted(ids(left.records)) == ["done3", "done4", "running", "scoped", "tenant"]
    assert store.list_push_configs("done0") == []
    assert [c.id for c in store.list_push_configs("done4")] == ["p2"]
    assert store.trim_terminal_tasks(Tier("alice", None, None), 2) == []


def test_trim_also_drops_the_owners_orphan_push_configs(store: t.Any) -> None:
    # A config registered for a task an earlier trim already deleted.
    store.put_push_config("alice", PushConfig("lost", "gone-task", "https://example.com/h"), 8)
    store.put_push_config("bob", PushConfig("bobs", "gone-too", "https://example.com/h"), 8)
    for i in range(2):
        record = store.create_task(make_record(f"d{i}", at=T0 + timedelta(seconds=i)))
        store.update_task(moved(record, TaskState.COMPLETED, T0 + timedelta(seconds=i)), 1)
    assert store.trim_terminal_tasks(Tier("alice", None, None), 1) == ["d0"]
    assert store.get_push_config("gone-task", "lost") is None
    assert store.get_push_config("gone-too", "bobs") is not None


def test_delete_tasks_removes_their_push_configs(store: t.Any) -> None:
    store.create_task(make_record("t1"))
    store.create_task(make_record("t2"))
    store.put_push_config("alice", PushConfig("p", "t1", "https://example.com/h"), 8)
    assert store.delete_tasks(["t1", "t1", "missing"]) == 1
    assert store.list_push_configs("t1") == []
    assert store.get_task("t2") is not None


# ------------------------------------------------------------------ push configs


def test_push_configs_replace_order_and_bound(store: t.Any) -> None:
    store.create_task(make_record("t1"))
    first = PushConfig("a", "t1", "https://example.com/a", token="tok")
    store.put_push_config("alice", first, 3)
    store.put_push_config("alice", PushConfig("b", "t1", "https://example.com/b"), 3)
    store.put_push_config("alice", PushConfig("c", "t1", "https://example.com/c"), 3)
    replaced = PushConfig("a", "t1", "https://example.com/a2", tenant="acme")
    store.put_push_config("alice", replaced, 3)
    assert [c.id for c in store.list_push_configs("t1")] == ["b", "c", "a"]
    assert store.get_push_config("t1", "a") == replaced
    store.put_push_config("alice", PushConfig("d", "t1", "https://example.com/d"), 3)
    assert [c.id for c in store.list_push_configs("t1")] == ["c", "a", "d"]
    assert store.delete_push_config("t1", "c") is True
    assert store.delete_push_config("t1", "c") is False
    assert store.get_push_config("t1", "c") is None
    assert store.get_push_config("t1", "b") is None


# ------------------------------------------------------------------ export and erasure


def test_export_is_json_ready_and_only_the_owners(store: t.Any) -> None:
    import json

    seed_tiers(store)
    store.put_push_config("alice", PushConfig("p", "session", "https://example.com/h"), 8)
    store.put_push_config("bob", PushConfig("q", "bob", "https://example.com/h"), 8)
    data = store.export_owner("alice")
    assert json.loads(json.dumps(data)) == data
    assert [row["task"]["id"] for row in data["tasks"]] == ["session", "read", "write", "t2"]
    assert {row["owner"] for row in data["tasks"]} == {"alice"}
    assert data["tasks"][1]["scopes"] == ["tasks:read"]
    assert data["pushConfigs"] == [{"id": "p", "taskId": "session", "url": "https://example.com/h"}]
    assert store.export_owner("nobody") == {"tasks": [], "pushConfigs": []}


def test_erase_removes_every_row_of_the_owner_and_nothing_else(store: t.Any) -> None:
    seed_tiers(store)
    store.put_push_config("alice", PushConfig("p", "session", "https://example.com/h"), 8)
    store.put_push_config("bob", PushConfig("q", "bob", "https://example.com/h"), 8)
    before = store.export_owner("bob")
    assert store.erase_owner("alice") == 5
    assert store.export_owner("alice") == {"tasks": [], "pushConfigs": []}
    assert store.list_tasks(ListQuery("alice", tenanted=False)).total == 0
    assert store.get_task("session") is None
    assert store.export_owner("bob") == before
    assert store.erase_owner("alice") == 0


def test_owners_lists_every_owner_holding_a_task(store: t.Any) -> None:
    assert store.owners() == []
    seed_tiers(store)
    assert store.owners() == ["alice", "bob"]
    store.erase_owner("bob")
    assert store.owners() == ["alice"]


def test_trim_after_other_deletions_still_keeps_the_newest(store: t.Any) -> None:
    for i in range(6):
        record = store.create_task(make_record(f"done{i}", at=T0 + timedelta(seconds=i)))
        store.update_task(moved(record, TaskState.COMPLETED, T0 + timedelta(seconds=i)), 1)
    store.delete_tasks(["done0", "done4"])  # the host deleted some (older and newer) itself
    deleted = store.trim_terminal_tasks(Tier("alice", None, None), 2)
    assert sorted(deleted) == ["done1", "done2"]
    left = store.list_tasks(ListQuery("alice", limit=100))
    assert sorted(ids(left.records)) == ["done3", "done5"]
    store.erase_owner("alice")
    again = store.create_task(make_record("again", at=T0))
    store.update_task(moved(again, TaskState.COMPLETED, T0), 1)
    assert store.trim_terminal_tasks(Tier("alice", None, None), 0) == ["again"]
