"""A2A v0.3's HTTP+JSON routes (``/a2a/rest/v1/...``) over the Flask test client: send, get,
cancel, stream and subscribe, push configs, refusals, and ProtoJSON's own spellings; the same
task seen over v1.0.
"""

from __future__ import annotations

import json
import typing as t

from flask import Flask

from tests.bindings import v03_support
from tests.bindings.v03_support import REST, Caller, proto_message, rest, task_count
from tests.conftest import Gate
from tests.webhook import Webhook

#: The v0.3 app (``make_app``'s, on each runner) and its caller, found here by pytest.
skills, app, caller = v03_support.skills, v03_support.app, v03_support.caller


def test_rest_send_get_and_the_same_task_over_v1(caller: Caller) -> None:
    msg = proto_message("rest")
    msg["content"] += [
        {"file": {"fileWithBytes": "aGk=", "mimeType": "text/plain"}},
        {"file": {"fileWithUri": "https://e.com/a", "name": "a"}},
        {"data": {"data": {"k": 1}}},
    ]
    response = rest(caller, "POST", "/message:send", {"message": msg})
    assert response.status_code == 200
    task = response.get_json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "kind" not in task
    assert task["history"][0]["content"] == msg["content"]
    assert task["artifacts"][0]["parts"] == [{"text": "rest"}]
    got = rest(caller, "GET", f"/tasks/{task['id']}?historyLength=0").get_json()
    assert got["id"] == task["id"] and "history" not in got
    v1 = caller.result("GetTask", {"id": task["id"]})
    assert v1["history"][0]["parts"][1] == {"raw": "aGk=", "mediaType": "text/plain"}
    assert v1["history"][0]["parts"][2] == {"url": "https://e.com/a", "filename": "a"}


def test_rest_cancel_spells_cancelled_and_isolates_owners(caller: Caller, gate: Gate) -> None:
    # A configuration without ``blocking`` is a proto3 false: the send does not block.
    response = rest(
        caller,
        "POST",
        "/message:send",
        {
            "message": proto_message("held", "gate"),
            "configuration": {},
        },
    )
    task = response.get_json()["task"]
    assert gate.entered.wait(10)
    assert rest(caller, "GET", f"/tasks/{task['id']}", token="bob").status_code == 404
    assert rest(caller, "POST", f"/tasks/{task['id']}:cancel", token="bob").status_code == 404
    canceled = rest(caller, "POST", f"/tasks/{task['id']}:cancel").get_json()
    assert canceled["status"]["state"] == "TASK_STATE_CANCELLED"
    again = rest(caller, "POST", f"/tasks/{task['id']}:cancel")
    assert again.status_code == 400
    assert again.get_json()["error"]["details"][0]["reason"] == "TASK_NOT_CANCELABLE"


def test_rest_stream_and_subscribe(caller: Caller) -> None:
    response = rest(caller, "POST", "/message:stream", {"message": proto_message("st")})
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = [
        json.loads(line[6:])
        for line in response.get_data(as_text=True).splitlines()
        if line.startswith("data: ")
    ]
    assert [next(iter(e)) for e in events] == ["task", "artifactUpdate", "statusUpdate"]
    assert events[-1]["statusUpdate"]["final"] is True
    task_id = events[0]["task"]["id"]
    settled = rest(caller, "GET", f"/tasks/{task_id}:subscribe")
    assert settled.status_code == 400  # nothing to subscribe to on a settled task


def test_rest_push_configs(caller: Caller, webhook: Webhook) -> None:
    task = rest(caller, "POST", "/message:send", {"message": proto_message()}).get_json()["task"]
    base = f"/tasks/{task['id']}/pushNotificationConfigs"
    name = f"tasks/{task['id']}/pushNotificationConfigs/c1"
    made = rest(
        caller,
        "POST",
        base,
        {
            "parent": f"tasks/{task['id']}",
            "configId": "c1",
            "config": {
                "name": name,
                "pushNotificationConfig": {
                    "url": webhook.url(),
                    "token": "t",
                    "authentication": {"schemes": ["Basic"]},
                },
            },
        },
    )
    assert made.status_code == 200
    assert made.get_json() == {
        "name": name,
        "pushNotificationConfig": {
            "id": "c1",
            "url": webhook.url(),
            "token": "t",
            "authentication": {"schemes": ["Basic"]},
        },
    }
    assert rest(caller, "GET", base).get_json()["configs"][0]["name"] == name
    assert rest(caller, "GET", f"{base}/c1").get_json()["name"] == name
    assert rest(caller, "GET", f"{base}/c1", token="bob").status_code == 404
    assert rest(caller, "DELETE", f"{base}/c1").get_json() == {}
    assert rest(caller, "GET", f"{base}/c1").status_code == 404


def test_rest_refusals(caller: Caller, make_app: t.Callable[..., Flask]) -> None:
    bad = rest(caller, "POST", "/message:send", {"message": {"messageId": "m", "role": "user"}})
    assert bad.status_code == 400
    assert bad.get_json()["error"]["details"][1]["fieldViolations"][0]["field"] == "message.role"
    assert rest(caller, "GET", "/nothing").status_code == 404
    wrong_verb = rest(caller, "DELETE", "/message:send")
    assert wrong_verb.status_code == 405 and wrong_verb.headers["Allow"] == "POST"
    assert rest(caller, "GET", "/tasks/x", **{"A2A-Version": "1.0"}).status_code == 404
    assert rest(caller, "GET", "/card").status_code == 400  # no extended card: -32007
    assert caller.http.get(REST + "/tasks/x").status_code == 401
    assert task_count(caller) == 0
    # 0.3 off: ``v1`` is a v1.0 tenant prefix again, and a v0.3 body is no v1.0 message.
    off = Caller(make_app())
    response = rest(off, "POST", "/message:send", {"message": proto_message()})
    assert response.status_code == 400


def test_rest_reads_protojson_snake_case_and_proto3_defaults(
    caller: Caller, webhook: Webhook
) -> None:
    """ProtoJSON readers take the proto's own field names, and a proto3 default is unset."""
    msg = {
        "message_id": "snake",
        "role": "ROLE_USER",
        "context_id": "ctx-s",
        "content": [
            {"text": "a"},
            {"file": {"file_with_uri": "", "file_with_bytes": "aGk=", "mime_type": "text/plain"}},
        ],
    }
    response = rest(caller, "POST", "/message:send", {"message": msg})
    assert response.status_code == 200, response.get_data(as_text=True)
    task = response.get_json()["task"]
    assert task["contextId"] == "ctx-s"
    assert task["history"][0]["content"][1] == {
        "file": {"fileWithBytes": "aGk=", "mimeType": "text/plain"},
    }
    got = rest(caller, "GET", f"/tasks/{task['id']}?history_length=0").get_json()
    assert "history" not in got
    made = rest(
        caller,
        "POST",
        f"/tasks/{task['id']}/pushNotificationConfigs",
        {
            "config": {
                "push_notification_config": {
                    "url": webhook.url(),
                    "authentication": {"schemes": [], "credentials": ""},
                },
            }
        },
    )
    assert made.status_code == 200, made.get_data(as_text=True)
    assert "authentication" not in made.get_json()["pushNotificationConfig"]
