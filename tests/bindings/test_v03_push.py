"""A2A v0.3 push notification configs over the Flask test client: set, get, list and delete
(and the one config a v0.3 client asks for by its task), their errors, v0.3-shaped webhooks
beside v1.0's, and the version a stored config remembers on every store.
"""

from __future__ import annotations

import json
import typing as t

from flask import Flask

from flask_a2a.protocol.model import PushConfig
from tests.bindings import v03_support
from tests.bindings.v03_support import V03, Caller, message, rest, send
from tests.conftest import Gate, wait_for
from tests.webhook import Webhook

#: The v0.3 app (``make_app``'s, on each runner) and its caller, found here by pytest.
skills, app, caller = v03_support.skills, v03_support.app, v03_support.caller


# ------------------------------------------------------------------ push configs


def test_push_config_set_get_list_delete(caller: Caller, webhook: Webhook) -> None:
    task = send(caller)
    config = {
        "url": webhook.url(),
        "token": "tok",
        "authentication": {"schemes": ["Bearer"], "credentials": "c"},
    }
    made = caller.result(
        "tasks/pushNotificationConfig/set", {"taskId": task["id"], "pushNotificationConfig": config}
    )
    # v0.3 servers name a config given without an id after its task.
    assert made == {"taskId": task["id"], "pushNotificationConfig": {**config, "id": task["id"]}}
    second = caller.result(
        "tasks/pushNotificationConfig/set",
        {
            "taskId": task["id"],
            "pushNotificationConfig": {"id": "c2", "url": webhook.url()},
        },
    )
    assert second["pushNotificationConfig"]["id"] == "c2"
    listed = caller.result("tasks/pushNotificationConfig/list", {"id": task["id"]})
    assert [c["pushNotificationConfig"]["id"] for c in listed] == [task["id"], "c2"]
    got = caller.result(
        "tasks/pushNotificationConfig/get", {"id": task["id"], "pushNotificationConfigId": "c2"}
    )
    assert got["pushNotificationConfig"]["url"] == webhook.url()
    first = caller.result("tasks/pushNotificationConfig/get", {"id": task["id"]})
    assert first["pushNotificationConfig"]["id"] == task["id"]
    # Two configs: an id naming neither is -32001 (which one would be a guess).
    unnamed = {"id": task["id"], "pushNotificationConfigId": "default"}
    assert caller.code("tasks/pushNotificationConfig/get", unnamed) == -32001
    assert (
        caller.result(
            "tasks/pushNotificationConfig/delete",
            {"id": task["id"], "pushNotificationConfigId": "c2"},
        )
        is None
    )
    # One left: an id naming no config answers the task's only one, as v0.3 servers do.
    lone = caller.result(
        "tasks/pushNotificationConfig/get", {"id": task["id"], "pushNotificationConfigId": "c2"}
    )
    assert lone["pushNotificationConfig"]["id"] == task["id"]
    # v1.0 sees the same configs (in its own shape).
    v1 = caller.result("ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert [c["id"] for c in v1["configs"]] == [task["id"]]


def test_get_with_only_the_task_id_answers_its_one_config(caller: Caller) -> None:
    """A v0.3 client asks for "the" config of a task: the a2a-sdk 0.3 client with no config id
    (over HTTP+JSON its path then ends in ``None``), the v0.3 suite with ``default`` after a
    set without an id. With one config on the task, that config answers (it was -32001)."""
    task = send(caller)
    hook = "https://example.com/webhook"
    caller.result(
        "tasks/pushNotificationConfig/set",
        {"taskId": task["id"], "pushNotificationConfig": {"url": hook}},
    )
    for params in (
        {"id": task["id"]},
        {"id": task["id"], "pushNotificationConfigId": "default"},
        {"id": task["id"], "pushNotificationConfigId": task["id"]},
    ):
        got = caller.result("tasks/pushNotificationConfig/get", params)
        assert got == {
            "taskId": task["id"],
            "pushNotificationConfig": {"id": task["id"], "url": hook},
        }
    base = f"/tasks/{task['id']}/pushNotificationConfigs"
    for config_id in ("None", "default"):
        response = rest(caller, "GET", f"{base}/{config_id}")
        assert response.status_code == 200, response.get_json()
        assert response.get_json()["pushNotificationConfig"] == {"id": task["id"], "url": hook}
    # Not another owner's, not a task without configs, not v1.0's exact lookup.
    assert caller.code("tasks/pushNotificationConfig/get", {"id": task["id"]}, token="bob") == (
        -32001
    )
    assert rest(caller, "GET", f"{base}/None", token="bob").status_code == 404
    bare = send(caller, message("other"))
    assert caller.code("tasks/pushNotificationConfig/get", {"id": bare["id"]}) == -32001
    v1 = caller.code("GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "default"})
    assert v1 == -32001


def test_push_config_errors(caller: Caller, make_app: t.Callable[..., Flask]) -> None:
    task = send(caller)
    assert (
        caller.code(
            "tasks/pushNotificationConfig/set",
            {
                "taskId": task["id"],
                "pushNotificationConfig": {"url": "https://e.com/h"},
            },
            token="bob",
        )
        == -32001
    )
    assert (
        caller.code(
            "tasks/pushNotificationConfig/set",
            {
                "taskId": task["id"],
                "pushNotificationConfig": {"url": "ftp://e.com/h"},
            },
        )
        == -32602
    )
    assert caller.code("tasks/pushNotificationConfig/set", {"taskId": task["id"]}) == -32602
    off = Caller(make_app(config={**V03, "A2A_DISABLE_PUSH_NOTIFICATIONS": True}))
    made = off.result("message/send", {"message": message()})
    assert off.code("tasks/pushNotificationConfig/list", {"id": made["id"]}) == -32003


def test_webhooks_take_the_shape_of_the_version_that_registered(
    caller: Caller, gate: Gate, webhook: Webhook
) -> None:
    task = send(caller, message("p", "gate"), blocking=False)
    assert gate.entered.wait(10)
    caller.result(
        "tasks/pushNotificationConfig/set",
        {
            "taskId": task["id"],
            "pushNotificationConfig": {"id": "old", "url": webhook.url("/v03"), "token": "t3"},
        },
    )
    caller.result(
        "CreateTaskPushNotificationConfig",
        {"taskId": task["id"], "id": "new", "url": webhook.url("/v1")},
    )
    gate.release.set()

    def final(path: str) -> bool:
        return any(h.path == path and "completed" in h.body.decode().lower() for h in webhook.hits)

    webhook.wait_for(2)
    assert wait_for(lambda: final("/v03") and final("/v1"))
    v03_hits = [h for h in webhook.hits if h.path == "/v03"]
    v1_hits = [h for h in webhook.hits if h.path == "/v1"]
    assert v03_hits[0].headers["X-A2A-Notification-Token"] == "t3"
    for hit in v03_hits:  # the whole v0.3 Task each time (spec v0.3 §9.5)
        assert hit.json["kind"] == "task" and hit.json["id"] == task["id"]
    assert v03_hits[-1].json["status"]["state"] == "completed"
    assert all("kind" not in json.dumps(h.json) for h in v1_hits)
    assert v1_hits[-1].json["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_inline_push_config_sends_v03_webhooks(caller: Caller, webhook: Webhook) -> None:
    task = send(caller, message("i"), pushNotificationConfig={"url": webhook.url()})
    assert wait_for(
        lambda: any(h.json.get("status", {}).get("state") == "completed" for h in webhook.hits)
    )
    assert all(h.json["kind"] == "task" and h.json["id"] == task["id"] for h in webhook.hits)


def test_stored_push_config_remembers_its_version(new_store: t.Callable[..., t.Any]) -> None:
    from flask_a2a.protocol.model import (
        Message,
        Part,
        Principal,
        Role,
        Task,
        TaskState,
        TaskStatus,
        utcnow,
    )
    from flask_a2a.store.base import TaskRecord

    store = new_store()
    task = Task(
        "t-1",
        "c-1",
        TaskStatus(TaskState.WORKING, utcnow()),
        history=(Message("m", Role.USER, (Part(text="x"),)),),
    )
    store.create_task(TaskRecord(task, Principal("alice").owner, None, None, utcnow()))
    legacy = PushConfig("a", "t-1", "https://e.com", protocol_version="0.3")
    store.put_push_config("alice", legacy, 8)
    store.put_push_config("alice", PushConfig("b", "t-1", "https://e.com"), 8)
    versions = {c.id: c.protocol_version for c in store.list_push_configs("t-1")}
    assert versions == {"a": "0.3", "b": "1.0"}
    assert store.get_push_config("t-1", "a").protocol_version == "0.3"
