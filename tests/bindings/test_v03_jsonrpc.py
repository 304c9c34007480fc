"""A2A v0.3 beside v1.0 on the same endpoint (issue 24 part 1): the JSON-RPC methods over the
Flask test client.

Every v0.3 JSON-RPC method and its errors but push configs' (``test_v03_push``); the same task
seen over v1.0; owner isolation; the ``A2A-Version`` rule of docs/protocol-versions.md; the
card's v0.3 fields; and the default (1.0 alone), where a v0.3 method is -32601. The HTTP+JSON
routes are ``test_v03_rest``.
"""

from __future__ import annotations

import json
import typing as t

import pytest
from flask import Flask

from flask_a2a import AgentCard
from flask_a2a.config import ConfigError, Settings
from tests.bindings import v03_support
from tests.bindings.v03_support import (
    V03,
    Caller,
    message,
    proto_message,
    rest,
    send,
    task_count,
)
from tests.conftest import Gate

#: The v0.3 app (``make_app``'s, on each runner) and its caller, found here by pytest.
skills, app, caller = v03_support.skills, v03_support.app, v03_support.caller


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
