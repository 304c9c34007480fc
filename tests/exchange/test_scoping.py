"""Owner, scope-set and tenant isolation: the wrong caller always gets what an unknown id gets."""

from __future__ import annotations

import dataclasses
import json
import typing as t

import pytest
from flask import Flask

from flask_a2a import Part, Skill, TaskContext
from flask_a2a.store import MemoryStore
from flask_a2a.store.base import ListQuery, TaskPage
from flask_a2a.testing import A2ATestClient
from tests.conftest import echo

pytestmark = pytest.mark.usefixtures("binding")


def ask(task: TaskContext) -> None:
    if len(task.history) == 1:
        task.require_input("more?")
    else:
        task.artifact([Part(text="resumed")])


SKILLS = [
    Skill(id="echo", name="Echo", description="Echo.", handler=echo),
    Skill(id="ask", name="Ask", description="Ask.", handler=ask),
]


@pytest.fixture
def app(make_app: t.Callable[..., Flask]) -> Flask:
    return make_app(skills=SKILLS)


@pytest.fixture
def client(app: Flask) -> A2ATestClient:
    return A2ATestClient(app, token="alice")


def paused(client: A2ATestClient, token: str) -> dict[str, t.Any]:
    task = client.send("hi", skill="ask", token=token)["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return t.cast(dict[str, t.Any], task)


def done(client: A2ATestClient, token: str) -> dict[str, t.Any]:
    task = client.send("hi", skill="echo", token=token)["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return t.cast(dict[str, t.Any], task)


def without_task_id(error: dict[str, t.Any]) -> dict[str, t.Any]:
    """The error object with ``ErrorInfo.metadata.taskId`` removed (it names the asked id)."""
    error = json.loads(json.dumps(error))
    for detail in error.get("data") or []:
        if isinstance(detail, dict):
            detail.get("metadata", {}).pop("taskId", None)
    return error


def attempts(client: A2ATestClient, task_id: str, token: str) -> dict[str, dict[str, t.Any]]:
    """Every way to touch a task by id, as ``token``; each answer's error object."""
    out = {
        method: client.rpc(method, {"id": task_id}, token=token).error
        for method in ("GetTask", "CancelTask")
    }
    resume = {"message": A2ATestClient.message("x", skill="ask", task_id=task_id)}
    out["SendMessage"] = client.rpc("SendMessage", resume, token=token).error
    for method, params in (("SubscribeToTask", {"id": task_id}), ("SendStreamingMessage", resume)):
        _, events = client.stream(method, params, token=token)  # JSON-RPC: one error event
        assert len(events) == 1, events
        out[method] = events[0]["error"]
    return out


def assert_invisible(
    client: A2ATestClient, task: dict[str, t.Any], token: str, owner_token: str = "alice"
) -> None:
    """``token`` gets exactly the unknown-id answer for ``task``, and the task is unchanged."""
    before = client.rpc("GetTask", {"id": task["id"]}, token=owner_token).result
    foreign = attempts(client, task["id"], token)
    unknown = attempts(client, "no-such-task", token)
    for method, error in foreign.items():
        assert error["code"] == -32001, (method, error)
        assert without_task_id(error) == without_task_id(unknown[method]), method
    after = client.rpc("GetTask", {"id": task["id"]}, token=owner_token).result
    assert after == before


def listed(client: A2ATestClient, token: str, **params: t.Any) -> tuple[set[str], int]:
    page = client.rpc("ListTasks", params, token=token).result
    assert page["pageSize"] == len(page["tasks"])
    return {task["id"] for task in page["tasks"]}, int(page["totalSize"])


# ----------------------------------------------------------------------------- owners


def test_another_owner_cannot_touch_a_task(client: A2ATestClient) -> None:
    task = paused(client, "alice")
    assert_invisible(client, task, "bob")
    assert client.rpc("GetTask", {"id": task["id"]}).result["status"]["state"] == (
        "TASK_STATE_INPUT_REQUIRED"
    )
    assert listed(client, "bob") == (set(), 0)


def test_another_owner_cannot_cancel_a_finished_task_either(client: A2ATestClient) -> None:
    task = done(client, "alice")
    error = client.rpc("CancelTask", {"id": task["id"]}, token="bob").error
    assert error["code"] == -32001  # not -32002: that would confirm the id exists


# ----------------------------------------------------------------------------- scope sets


def test_narrowed_token_sees_only_its_scope_set(client: A2ATestClient) -> None:
    session = paused(client, "alice")
    read = paused(client, "alice-read")
    read_done = done(client, "alice-read")

    assert_invisible(client, session, "alice-read")
    assert listed(client, "alice-read") == ({read["id"], read_done["id"]}, 2)
    assert client.rpc("GetTask", {"id": read["id"]}, token="alice-read").result["id"] == read["id"]


def test_narrowed_tokens_do_not_see_each_other(client: A2ATestClient) -> None:
    read = paused(client, "alice-read")
    write = paused(client, "alice-write")
    assert_invisible(client, read, "alice-write", owner_token="alice-read")
    assert_invisible(client, write, "alice-read", owner_token="alice-write")
    assert listed(client, "alice-write") == ({write["id"]}, 1)


def test_session_sees_every_task_of_its_owner(client: A2ATestClient) -> None:
    made = {done(client, token)["id"] for token in ("alice", "alice-read", "alice-write")}
    read_paused = paused(client, "alice-read")
    assert listed(client, "alice") == (made | {read_paused["id"]}, 4)
    for task_id in made:
        assert client.rpc("GetTask", {"id": task_id}).result["id"] == task_id
    resumed = client.rpc(
        "SendMessage",
        {"message": A2ATestClient.message("x", skill="ask", task_id=read_paused["id"])},
    ).result["task"]
    assert resumed["status"]["state"] == "TASK_STATE_COMPLETED"
    # The resume by the session did not move the task out of the narrowed token's tier.
    assert read_paused["id"] in listed(client, "alice-read")[0]


# ----------------------------------------------------------------------------- tenants


def test_tenants_are_separate(client: A2ATestClient) -> None:
    home = paused(client, "alice")
    away = paused(client, "alice-t2")
    away_done = done(client, "alice-t2")
    assert_invisible(client, home, "alice-t2")
    assert_invisible(client, away, "alice", owner_token="alice-t2")
    assert listed(client, "alice") == ({home["id"]}, 1)
    assert listed(client, "alice-t2") == ({away["id"], away_done["id"]}, 2)


# ----------------------------------------------------------------------------- custom stores


class UnfilteredStore(MemoryStore):
    """A store that cannot filter by scope set or tenant: it lists every task of the owner."""

    filters_scope = False
    filters_tenant = False

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[ListQuery] = []

    def list_tasks(self, query: ListQuery) -> TaskPage:
        self.queries.append(query)
        return super().list_tasks(dataclasses.replace(query, scoped=False, tenanted=False))


class MisdeclaredStore(UnfilteredStore):
    """Claims to filter, but does not: the server must still hand out no other tier's task."""

    filters_scope = True
    filters_tenant = True


def walk(client: A2ATestClient, token: str, size: int) -> tuple[list[str], list[int]]:
    """Every page of ``token``'s listing: the ids in order and each page's totalSize."""
    ids: list[str] = []
    totals: list[int] = []
    params: dict[str, t.Any] = {"pageSize": size}
    for _ in range(20):
        page = client.rpc("ListTasks", params, token=token).result
        assert page["pageSize"] == len(page["tasks"])
        ids.extend(task["id"] for task in page["tasks"])
        totals.append(page["totalSize"])
        if page["nextPageToken"] == "":
            return ids, totals
        params["pageToken"] = page["nextPageToken"]
    raise AssertionError("the listing never ended")


def test_server_walks_a_store_that_cannot_filter(make_app: t.Callable[..., Flask]) -> None:
    store = UnfilteredStore()
    client = A2ATestClient(make_app(skills=SKILLS, store=store), token="alice")
    mine = {
        token: [done(client, token)["id"] for _ in range(n)]
        for token, n in (("alice", 3), ("alice-read", 2), ("alice-write", 1), ("alice-t2", 2))
    }
    ids, totals = walk(client, "alice-read", 1)
    assert sorted(ids) == sorted(mine["alice-read"]) and totals == [2, 2]
    ids, totals = walk(client, "alice-t2", 1)
    assert sorted(ids) == sorted(mine["alice-t2"]) and totals == [2, 2]
    ids, totals = walk(client, "alice", 2)
    session_view = mine["alice"] + mine["alice-read"] + mine["alice-write"]
    assert sorted(ids) == sorted(session_view) and set(totals) == {6} and len(totals) == 3
    assert walk(client, "bob", 5) == ([], [0])
    assert store.queries, "the server read through the store"
    filtered = client.rpc(
        "ListTasks", {"status": "TASK_STATE_COMPLETED", "pageSize": 1}, token="alice-read"
    ).result
    assert filtered["totalSize"] == 2 and filtered["nextPageToken"] != ""


def test_server_drops_other_tiers_from_a_misdeclaring_store(
    make_app: t.Callable[..., Flask],
) -> None:
    client = A2ATestClient(make_app(skills=SKILLS, store=MisdeclaredStore()), token="alice")
    session = done(client, "alice")
    read = done(client, "alice-read")
    home = done(client, "alice-t2")
    ids, _ = walk(client, "alice-read", 10)
    assert ids == [read["id"]]
    ids, _ = walk(client, "alice-t2", 10)
    assert ids == [home["id"]]
    ids, _ = walk(client, "alice", 10)
    assert sorted(ids) == sorted([session["id"], read["id"]])
