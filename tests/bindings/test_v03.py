"""A2A v0.3 beside v1.0 on the same endpoint (issue 24 part 1), over the Flask test client.

Every v0.3 method and its errors; the same task seen over v1.0; owner isolation; the
``A2A-Version`` rule of docs/protocol-versions.md; v0.3-shaped webhooks; the card's v0.3
fields; and the default (1.0 alone), where a v0.3 method is -32601.
"""

from __future__ import annotations

import json
import typing as t

import pytest
from flask import Flask

from flask_a2a import AgentCard, Part, Skill, TaskContext
from flask_a2a.config import ConfigError, Settings
from flask_a2a.protocol.model import PushConfig
from tests.conftest import Gate, echo, wait_for
from tests.webhook import Webhook

V03 = {"A2A_PROTOCOL_VERSIONS": ["1.0", "0.3"], "A2A_ALLOW_PRIVATE_PUSH": True}


def replier(task: TaskContext) -> None:
    task.reply("quick answer")


def files(task: TaskContext) -> None:
    task.artifact(
        [
            Part(raw=b"\x00\x01", media_type="application/octet-stream", filename="b.bin"),
            Part(url="https://example.com/f.pdf", media_type="application/pdf"),
            Part(data=[1, 2]),
            Part(data={"k": "v"}),
        ],
        name="files",
    )


@pytest.fixture
def skills(gate: Gate) -> list[Skill]:
    return [
        Skill(id="echo", name="Echo", description="Echo.", handler=echo),
        Skill(id="gate", name="Gate", description="Held.", handler=gate.handler),
        Skill(id="reply", name="Reply", description="Replies.", handler=replier),
        Skill(id="files", name="Files", description="Files.", handler=files),
    ]


@pytest.fixture
def app(make_app: t.Callable[..., Flask], skills: list[Skill]) -> Flask:
    return make_app(skills=skills, config=V03)


class Caller:
    """JSON-RPC over the Flask test client, as a v0.3 client sends it (no A2A-Version)."""

    def __init__(self, app: Flask, token: str = "alice") -> None:
        self.http = app.test_client()
        self.token = token

    def post(
        self,
        method: str,
        params: t.Any,
        *,
        token: str | None = None,
        headers: t.Mapping[str, str] | None = None,
    ) -> t.Any:
        body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
        return self.http.post(
            "/a2a",
            data=json.dumps(body),
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {token or self.token}",
                **(headers or {}),
            },
        )

    def call(self, method: str, params: t.Any, **kw: t.Any) -> dict[str, t.Any]:
        response = self.post(method, params, **kw)
        assert response.status_code == 200, response.get_data(as_text=True)
        doc = t.cast(dict[str, t.Any], response.get_json())
        assert doc["id"] == 7 and doc["jsonrpc"] == "2.0"
        return doc

    def result(self, method: str, params: t.Any, **kw: t.Any) -> t.Any:
        doc = self.call(method, params, **kw)
        assert "error" not in doc, doc
        return doc["result"]

    def code(self, method: str, params: t.Any, **kw: t.Any) -> int:
        doc = self.call(method, params, **kw)
        assert "result" not in doc, doc
        return int(doc["error"]["code"])

    def events(self, method: str, params: t.Any, **kw: t.Any) -> list[dict[str, t.Any]]:
        response = self.post(method, params, **kw)
        assert response.headers["Content-Type"].startswith("text/event-stream")
        text = response.get_data(as_text=True)
        return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


@pytest.fixture
def caller(app: Flask) -> Caller:
    return Caller(app)


def message(text: str = "hi", skill: str = "echo", **extra: t.Any) -> dict[str, t.Any]:
    return {
        "kind": "message",
        "role": "user",
        "messageId": f"m-{text}-{skill}",
        "parts": [{"kind": "text", "text": text}],
        "metadata": {"skill": skill},
        **extra,
    }


def send(caller: Caller, msg: dict[str, t.Any] | None = None, **config: t.Any) -> t.Any:
    params: dict[str, t.Any] = {"message": msg or message()}
    if config:
        params["configuration"] = config
    return caller.result("message/send", params)


def task_count(caller: Caller, token: str = "alice") -> int:
    result = caller.result("ListTasks", {}, token=token)
    return int(result["totalSize"])


# ------------------------------------------------------------------ default: 1.0 alone


def test_default_serves_no_v03_method(make_app: t.Callable[..., Flask]) -> None:
    caller = Caller(make_app())
    for method in ("message/send", "tasks/get", "agent/getAuthenticatedExtendedCard"):
        assert caller.code(method, {"message": message(), "id": "x"}) == -32601
    # An explicit 0.3 is a version this server does not speak.
    doc = caller.call("SendMessage", {}, headers={"A2A-Version": "0.3"})
    assert doc["error"]["code"] == -32009
    assert doc["error"]["data"][0]["metadata"]["supportedVersions"] == "1.0"
    assert caller.code("message/send", {}, headers={"A2A-Version": "0.3"}) == -32009
    card = caller.http.get("/.well-known/agent-card.json").get_json()
    assert "url" not in card and "preferredTransport" not in card
    assert all(i["protocolVersion"] == "1.0" for i in card["supportedInterfaces"])


def test_settings_check_the_versions() -> None:
    assert Settings.from_config({}).protocol_versions == ("1.0",)
    both = Settings.from_config({"A2A_PROTOCOL_VERSIONS": "1.0,0.3"})
    assert both.protocol_versions == ("1.0", "0.3")
    for bad in (["0.3"], ["1.0", "0.2"], ["1.0", "2.0"]):
        with pytest.raises(ConfigError, match="A2A_PROTOCOL_VERSIONS"):
            Settings.from_config({"A2A_PROTOCOL_VERSIONS": bad})


# ------------------------------------------------------------------ the version rule


def test_a2a_version_rule(caller: Caller) -> None:
    task = send(caller)
    # A slash-form method without the header is 0.3; PascalCase is 1.0 (curl keeps working).
    assert task["kind"] == "task"
    v1 = caller.result("GetTask", {"id": task["id"]})
    assert v1["status"]["state"] == "TASK_STATE_COMPLETED"
    # An explicit header decides; the other version's names are then unknown methods.
    assert caller.code("tasks/get", {"id": task["id"]}, headers={"A2A-Version": "1.0"}) == -32601
    assert caller.code("GetTask", {"id": task["id"]}, headers={"A2A-Version": "0.3"}) == -32601
    for version in ("0.3", "0.3.0"):
        got = caller.result("tasks/get", {"id": task["id"]}, headers={"A2A-Version": version})
        assert got["status"]["state"] == "completed"
    doc = caller.call("tasks/get", {"id": task["id"]}, headers={"A2A-Version": "0.2"})
    assert doc["error"]["code"] == -32009
    assert doc["error"]["data"][0]["metadata"]["supportedVersions"] == "1.0, 0.3"


# ------------------------------------------------------------------ message/send


def test_send_answers_a_v03_task_that_v1_sees_the_same(caller: Caller) -> None:
    msg = message("hello", contextId="ctx-1")
    msg["parts"] += [
        {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "a.txt"}},
        {"kind": "file", "file": {"uri": "https://example.com/x.png", "mimeType": "image/png"}},
        {"kind": "data", "data": {"n": 1}, "metadata": {"m": True}},
    ]
    task = send(caller, msg)
    assert task["kind"] == "task" and task["contextId"] == "ctx-1"
    assert task["status"]["state"] == "completed"
    (sent,) = task["history"]
    assert sent["kind"] == "message" and sent["role"] == "user"
    assert sent["parts"] == msg["parts"]
    assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "hello"}]
    # The same task over v1.0: one exchange underneath.
    v1 = caller.result("GetTask", {"id": task["id"]})
    assert v1["history"][0]["role"] == "ROLE_USER"
    assert v1["history"][0]["parts"][1] == {
        "raw": "aGk=",
        "mediaType": "text/plain",
        "filename": "a.txt",
    }
    assert v1["history"][0]["parts"][2] == {
        "url": "https://example.com/x.png",
        "mediaType": "image/png",
    }
    assert v1["history"][0]["parts"][3] == {"data": {"n": 1}, "metadata": {"m": True}}
    assert [t["id"] for t in caller.result("ListTasks", {})["tasks"]] == [task["id"]]


def test_agent_parts_in_v03_shape(caller: Caller) -> None:
    task = send(caller, message("x", "files"))
    assert task["artifacts"][0]["parts"] == [
        {
            "kind": "file",
            "file": {"bytes": "AAE=", "mimeType": "application/octet-stream", "name": "b.bin"},
        },
        {
            "kind": "file",
            "file": {"uri": "https://example.com/f.pdf", "mimeType": "application/pdf"},
        },
        {"kind": "data", "data": {"value": [1, 2]}},  # v0.3 data parts hold an object
        {"kind": "data", "data": {"k": "v"}},
    ]


def test_send_answered_by_a_message(caller: Caller) -> None:
    got = send(caller, message("q", "reply"))
    assert got["kind"] == "message" and got["role"] == "agent"
    assert got["parts"] == [{"kind": "text", "text": "quick answer"}]


def test_non_blocking_send_and_history_length(caller: Caller, gate: Gate) -> None:
    task = send(caller, message("w", "gate"), blocking=False, historyLength=0)
    assert task["status"]["state"] in ("submitted", "working")
    assert "history" not in task
    assert gate.entered.wait(10)
    gate.release.set()
    got = caller.result("tasks/get", {"id": task["id"], "historyLength": 1})
    assert len(got["history"]) == 1


@pytest.mark.parametrize(
    "bad,field",
    [
        ({"kind": "message", "role": "bot", "messageId": "m", "parts": []}, "message.role"),
        ({"role": "user", "parts": []}, "message.messageId"),
        (
            {"role": "user", "messageId": "m", "parts": [{"text": "no kind"}]},
            "message.parts[0].kind",
        ),
        (
            {
                "role": "user",
                "messageId": "m",
                "parts": [{"kind": "file", "file": {"bytes": "aGk=", "uri": "https://e.com"}}],
            },
            "message.parts[0].file",
        ),
        (
            {"role": "user", "messageId": "m", "parts": [{"kind": "data", "data": [1]}]},
            "message.parts[0].data",
        ),
        (
            {
                "role": "user",
                "messageId": "m",
                "parts": [{"kind": "file", "file": {"bytes": "not base64!"}}],
            },
            "message.parts[0].file.bytes",
        ),
        ("not an object", "message"),
    ],
)
def test_bad_v03_message_is_32602_and_writes_nothing(
    caller: Caller, bad: t.Any, field: str
) -> None:
    doc = caller.call("message/send", {"message": bad})
    assert doc["error"]["code"] == -32602
    violations = doc["error"]["data"][1]["fieldViolations"]
    assert violations[0]["field"] == field
    assert task_count(caller) == 0


@pytest.mark.parametrize("role", [["user"], {"user": True}, [], {}, True, 1.0])
def test_a_role_of_another_type_is_32602_on_every_v03_send(caller: Caller, role: t.Any) -> None:
    """An array or object role was looked up in a dict of names (unhashable: -32603, a 500
    over HTTP+JSON); v1.0 answered -32602 for the same. Neither ``true`` nor ``1.0`` is
    ``ROLE_USER`` (1) over HTTP+JSON."""
    bad = message(role=role)
    assert caller.code("message/send", {"message": bad}) == -32602
    (event,) = caller.events("message/stream", {"message": bad})
    assert event["error"]["code"] == -32602
    assert event["error"]["data"][1]["fieldViolations"][0]["field"] == "message.role"
    proto = {**proto_message(), "role": role}
    for route in ("/message:send", "/message:stream"):
        response = rest(caller, "POST", route, {"message": proto})
        assert response.status_code == 400, response.get_data(as_text=True)
        error = response.get_json()["error"]
        assert error["details"][1]["fieldViolations"][0]["field"] == "message.role"
    assert task_count(caller) == 0


def test_a_v03_request_without_id(caller: Caller, make_app: t.Callable[..., Flask]) -> None:
    """JSON-RPC calls it a notification; the v0.3 suite wants an unknown method -32601 and bad
    params -32602 (it was -32600 for both). A known method is never run without an id: -32602,
    as the a2a-sdk 0.3 server answers. v1.0, and the server with 0.3 off, keep -32600."""

    def post(app_caller: Caller, doc: dict[str, t.Any], **headers: str) -> t.Any:
        response = app_caller.http.post(
            "/a2a",
            data=json.dumps(doc),
            headers={
                "Content-Type": "application/json",
                "Authorization": "Bearer alice",
                **headers,
            },
        )
        assert response.status_code == 200
        answer = response.get_json()
        assert answer["id"] is None and "result" not in answer, answer
        return answer["error"]

    unknown = {"jsonrpc": "2.0", "method": "message/ssend", "params": {}}
    assert post(caller, unknown)["code"] == -32601
    assert post(caller, {**unknown, "method": "SendMessage"}, **{"A2A-Version": "0.3"})["code"] == (
        -32601
    )
    bad = {"jsonrpc": "2.0", "method": "message/send", "params": {"": "not_a_dict"}}
    assert post(caller, bad)["code"] == -32602
    good = {"jsonrpc": "2.0", "method": "message/send", "params": {"message": message()}}
    refused = post(caller, good)
    assert refused["code"] == -32602
    assert refused["data"][1]["fieldViolations"] == [{"field": "id", "description": "is required"}]
    assert post(caller, {"jsonrpc": "aaa", "method": "message/send", "params": {}})["code"] == (
        -32600
    )
    assert post(caller, {"jsonrpc": "2.0", "params": {}})["code"] == -32600
    assert task_count(caller) == 0  # nothing ran
    # v1.0 keeps its envelope rule: no id is -32600, whatever follows.
    v1 = {"jsonrpc": "2.0", "method": "NoSuchMethod", "params": {}}
    assert post(caller, v1)["code"] == -32600
    assert (
        post(caller, {**unknown, "method": "message/ssend"}, **{"A2A-Version": "1.0"})["code"]
        == -32600
    )
    off = Caller(make_app())
    assert post(off, unknown)["code"] == -32600


def test_bad_configuration_is_32602(caller: Caller) -> None:
    params = {"message": message(), "configuration": {"blocking": "yes"}}
    assert caller.code("message/send", params) == -32602
    params = {
        "message": message(),
        "configuration": {
            "pushNotificationConfig": {
                "url": "https://e.com/h",
                "authentication": {"schemes": [], "credentials": "c"},
            },
        },
    }
    assert caller.code("message/send", params) == -32602
    assert task_count(caller) == 0


# ------------------------------------------------------------------ get / cancel, isolation


def test_get_and_cancel_errors_and_owner_isolation(caller: Caller, gate: Gate) -> None:
    assert caller.code("tasks/get", {"id": "nope"}) == -32001
    assert caller.code("tasks/get", {}) == -32602
    task = send(caller, message("w", "gate"), blocking=False)
    assert gate.entered.wait(10)
    # Bob sees nothing of Alice's task, over either version, and changes nothing.
    for method in ("tasks/get", "tasks/cancel", "tasks/resubscribe"):
        if method == "tasks/resubscribe":
            (event,) = caller.events(method, {"id": task["id"]}, token="bob")
            assert event["error"]["code"] == -32001
        else:
            assert caller.code(method, {"id": task["id"]}, token="bob") == -32001
    assert (
        caller.code("tasks/pushNotificationConfig/list", {"id": task["id"]}, token="bob") == -32001
    )
    assert caller.code("GetTask", {"id": task["id"]}, token="bob") == -32001
    canceled = caller.result("tasks/cancel", {"id": task["id"]})
    assert canceled["kind"] == "task" and canceled["status"]["state"] == "canceled"
    assert caller.code("tasks/cancel", {"id": task["id"]}) == -32002
    assert caller.result("GetTask", {"id": task["id"]})["status"]["state"] == (
        "TASK_STATE_CANCELED"
    )


def test_a_v1_task_is_readable_over_v03(caller: Caller) -> None:
    body = {"message": {"messageId": "v1", "role": "ROLE_USER", "parts": [{"text": "one"}]}}
    made = caller.result("SendMessage", body)["task"]
    got = caller.result("tasks/get", {"id": made["id"]})
    assert got["id"] == made["id"] and got["kind"] == "task"
    assert got["history"][0]["parts"] == [{"kind": "text", "text": "one"}]


# ------------------------------------------------------------------ streams


def test_message_stream_events_in_v03_shape(caller: Caller) -> None:
    events = caller.events("message/stream", {"message": message("s")})
    kinds = [e["result"]["kind"] for e in events]
    assert kinds[0] == "task" and kinds[-1] == "status-update"
    assert "artifact-update" in kinds
    last = events[-1]["result"]
    assert last["status"]["state"] == "completed" and last["final"] is True
    assert all(e["id"] == 7 for e in events)


def test_resubscribe_follows_a_running_task(caller: Caller, gate: Gate) -> None:
    task = send(caller, message("r", "gate"), blocking=False)
    assert gate.entered.wait(10)
    response = caller.post("tasks/resubscribe", {"id": task["id"]})
    chunks = iter(response.response)
    first = json.loads(next(chunks).decode()[6:])
    assert first["result"]["kind"] == "task" and first["result"]["status"]["state"] == "working"
    gate.release.set()
    rest = b"".join(chunks).decode()
    response.close()
    events = [json.loads(line[6:]) for line in rest.splitlines() if line.startswith("data: ")]
    assert events[-1]["result"]["final"] is True
    assert events[-1]["result"]["status"]["state"] == "completed"


def test_resubscribe_to_a_settled_task_is_a_plain_json_error(caller: Caller) -> None:
    """As over v1.0 (docs/errors.md): a terminal task's subscribe is refused before any stream
    opens; an unknown one keeps its single SSE error event."""
    task = send(caller)
    assert caller.post("tasks/resubscribe", {"id": task["id"]}).mimetype == "application/json"
    assert caller.code("tasks/resubscribe", {"id": task["id"]}) == -32004
    (event,) = caller.events("tasks/resubscribe", {"id": "nope"})
    assert event["error"]["code"] == -32001


def test_stream_refusal_is_one_error_event(caller: Caller) -> None:
    (event,) = caller.events("message/stream", {"message": {"role": "user"}})
    assert event["error"]["code"] == -32602


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


# ------------------------------------------------------------------ the card


def test_card_carries_the_v03_fields(caller: Caller) -> None:
    card = caller.http.get("/.well-known/agent-card.json").get_json()
    assert card["protocolVersion"] == "0.3.0"
    assert card["url"] == "http://localhost/a2a"
    assert card["preferredTransport"] == "JSONRPC"
    assert card["additionalInterfaces"] == [
        {"url": "http://localhost/a2a", "transport": "JSONRPC"},
        {"url": "http://localhost/a2a/rest", "transport": "HTTP+JSON"},
    ]
    versions = [(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]]
    assert versions == [
        ("JSONRPC", "1.0"),
        ("HTTP+JSON", "1.0"),
        ("JSONRPC", "0.3"),
        ("HTTP+JSON", "0.3"),
    ]
    # Security schemes readable by both: the v1.0 member and the v0.3 keys beside it.
    bearer = card["securitySchemes"]["bearer"]
    assert bearer["httpAuthSecurityScheme"] == {"scheme": "Bearer"}
    assert bearer["type"] == "http" and bearer["scheme"] == "Bearer"
    assert card["security"] == [{"bearer": []}]


def test_extended_card_over_v03(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(config=V03, extended_card=lambda p: AgentCard(name=f"for {p.owner}"))
    caller = Caller(app)
    card = caller.result("agent/getAuthenticatedExtendedCard", {})
    assert card["name"] == "for alice" and card["protocolVersion"] == "0.3.0"
    public = caller.http.get("/.well-known/agent-card.json").get_json()
    assert public["supportsAuthenticatedExtendedCard"] is True
    none = Caller(make_app(config=V03))
    assert none.code("agent/getAuthenticatedExtendedCard", {}) == -32007


def test_unauthenticated_v03_call_is_refused(caller: Caller) -> None:
    response = caller.http.post(
        "/a2a",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "message/send",
            "params": {"message": message()},
        },
    )
    assert response.status_code == 401


# ------------------------------------------------------------------ HTTP+JSON v0.3 routes

REST = "/a2a/rest/v1"


def rest(
    caller: Caller, verb: str, path: str, body: t.Any = None, token: str = "alice", **headers: str
) -> t.Any:
    return caller.http.open(
        REST + path,
        method=verb,
        json=body,
        headers={
            "Authorization": f"Bearer {token}",
            **headers,
        },
    )


def proto_message(text: str = "hi", skill: str = "echo") -> dict[str, t.Any]:
    return {
        "messageId": f"p-{text}",
        "role": "ROLE_USER",
        "content": [{"text": text}],
        "metadata": {"skill": skill},
    }


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


def test_own_verifier_reads_a_signed_card_with_03_on(make_app: t.Callable[..., Flask]) -> None:
    """The signatures cover the v1.0 card: the v0.3 fields beside it are left out of the
    payload, as the official SDK's proto parse leaves them out."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from flask_a2a.card.signing import SigningKey, verify_card

    app = make_app(
        config={**V03, "A2A_PUBLIC_BASE_URL": "https://agent.example"},
        signing_keys=[SigningKey("k1", ec.generate_private_key(ec.SECP256R1()))],
    )
    http = app.test_client()
    card = http.get("/.well-known/agent-card.json").get_json()
    assert card["url"] == "https://agent.example/a2a" and card["signatures"]
    assert verify_card(card, http.get("/.well-known/jwks.json").get_json()) == "k1"
    # A v1.0 field changed breaks it; so does any change to the signed part.
    tampered = {**card, "name": "other"}
    with pytest.raises(Exception, match="signature"):
        verify_card(tampered, http.get("/.well-known/jwks.json").get_json())
