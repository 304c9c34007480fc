"""Inputs a fuzz run answered with -32603 (issue 13): each gets the refusal the spec names.

Over the Flask test client: a malformed ``Origin`` is a 403 like any foreign origin; a field of
an unexpected JSON type in a plain SendMessage, an out-of-range timestamp and an unsendable push
credential are -32602 naming the field. Every case leaves the store untouched and logs no
traceback.
"""

from __future__ import annotations

import base64
import json
import logging
import typing as t

import pytest
from flask import Flask

from flask_a2a import Skill
from flask_a2a.testing import A2ATestClient, RPCResponse
from tests.conftest import Gate, echo

pytestmark = pytest.mark.usefixtures("binding")

BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
URL = "http://127.0.0.1:9/hook"  # never dialled: these configs are all refused


@pytest.fixture(autouse=True)
def _logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="flask_a2a")


@pytest.fixture
def app(make_app: t.Callable[..., Flask], gate: Gate) -> Flask:
    skills = [
        Skill(id="echo", name="Echo", description="Echo.", handler=echo),
        Skill(id="gate", name="Gate", description="Waits.", handler=gate.handler),
    ]
    return make_app(skills=skills, config={"A2A_ALLOW_PRIVATE_PUSH": True})


def stored(app: Flask, owner: str = "alice") -> dict[str, t.Any]:
    return t.cast(dict[str, t.Any], app.extensions["a2a"].exchange.store.export_owner(owner))


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], [
        r.getMessage() for r in caplog.records
    ]


def refused_field(response: RPCResponse) -> list[str]:
    """The fields a -32602 names (asserting it is one)."""
    assert response.status == (400 if response.binding == "rest" else 200)
    assert response.code == -32602, response.text
    bad = response.error["data"][1]
    assert bad["@type"] == BAD_REQUEST
    return [v["field"] for v in bad["fieldViolations"]]


# ----------------------------------------------------------------------- 4: malformed Origin

MALFORMED_ORIGINS = [
    "http://[::1",
    "http://[",
    "http://[zz]",
    "http://[::1]x",
    "null",
    "http://localhost:99999",
    "http://localhost:-1",
    "http://:80",
    "http://\u00e9.example",
    "http://local\u00e9host",
    "\u00ff\u00fe",
    "http://",
    "",
]


@pytest.mark.parametrize("origin", MALFORMED_ORIGINS)
def test_malformed_origin_is_403_before_auth(
    app: Flask, origin: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = A2ATestClient(app)  # no token: the Origin gate answers before the principal
    response = client.rpc(
        "SendMessage", {"message": client.message("hi", skill="echo")}, headers={"Origin": origin}
    )
    assert response.status == 403, response.text
    assert response.code == -31403
    assert "Access-Control-Allow-Origin" not in response.headers
    assert stored(app)["tasks"] == []
    no_traceback(caplog)


@pytest.mark.parametrize("origin", ["http://[::1", "http://[zz]", "http://localhost:99999"])
def test_malformed_origin_preflight_is_403(
    app: Flask, origin: str, caplog: pytest.LogCaptureFixture
) -> None:
    response = app.test_client().options("/a2a", headers={"Origin": origin})
    assert response.status_code == 403
    assert json.loads(response.get_data())["error"]["code"] == -31403
    no_traceback(caplog)


# ------------------------------------------- 5: every field of a plain SendMessage, wrong types

WRONG_TYPES: list[t.Any] = [["x"], {"a": 1}, 1, 1.5, True]


def _cases() -> list[t.Any]:
    """(params, field the refusal names) for every field the fast reader looks at."""

    def message(**extra: t.Any) -> dict[str, t.Any]:
        return {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}], **extra}

    def part(**extra: t.Any) -> dict[str, t.Any]:
        return message(parts=[{"text": "hi", **extra}])

    cases: list[t.Any] = []
    for value in WRONG_TYPES:
        shown = json.dumps(value)
        each: list[tuple[str, dict[str, t.Any], str]] = [
            ("messageId", {"message": message(messageId=value)}, "message.messageId"),
            ("contextId", {"message": message(contextId=value)}, "message.contextId"),
            ("taskId", {"message": message(taskId=value)}, "message.taskId"),
            (
                "referenceTaskIds[0]",
                {"message": message(referenceTaskIds=[value])},
                "message.referenceTaskIds[0]",
            ),
            ("extensions[0]", {"message": message(extensions=[value])}, "message.extensions[0]"),
            (
                "parts[0].text",
                {"message": message(parts=[{"text": value}])},
                "message.parts[0].text",
            ),
            ("parts[0].url", {"message": message(parts=[{"url": value}])}, "message.parts[0].url"),
            ("parts[0].filename", {"message": part(filename=value)}, "message.parts[0].filename"),
            (
                "parts[0].mediaType",
                {"message": part(mediaType=value)},
                "message.parts[0].mediaType",
            ),
            (
                "acceptedOutputModes[0]",
                {"message": message(), "configuration": {"acceptedOutputModes": [value]}},
                "configuration.acceptedOutputModes[0]",
            ),
            ("tenant", {"message": message(), "tenant": value}, "tenant"),
        ]
        if not isinstance(value, list):
            each += [
                (
                    "referenceTaskIds",
                    {"message": message(referenceTaskIds=value)},
                    "message.referenceTaskIds",
                ),
                ("extensions", {"message": message(extensions=value)}, "message.extensions"),
                (
                    "acceptedOutputModes",
                    {"message": message(), "configuration": {"acceptedOutputModes": value}},
                    "configuration.acceptedOutputModes",
                ),
            ]
            each.append(("parts", {"message": message(parts=value)}, "message.parts"))
            each.append(("parts[0]", {"message": message(parts=[value])}, "message.parts[0]"))
        if not isinstance(value, dict):
            each += [
                ("metadata", {"message": message(metadata=value)}, "message.metadata"),
                (
                    "parts[0].metadata",
                    {"message": part(metadata=value)},
                    "message.parts[0].metadata",
                ),
                ("params.metadata", {"message": message(), "metadata": value}, "metadata"),
                ("configuration", {"message": message(), "configuration": value}, "configuration"),
                ("message", {"message": value}, "message"),
            ]
        if value is not True:
            each.append(
                (
                    "returnImmediately",
                    {"message": message(), "configuration": {"returnImmediately": value}},
                    "configuration.returnImmediately",
                )
            )
        if not isinstance(value, int) or isinstance(value, bool):  # 1 is ROLE_USER's number
            each.append(("role", {"message": message(role=value)}, "message.role"))
            each.append(
                (
                    "historyLength",
                    {"message": message(), "configuration": {"historyLength": value}},
                    "configuration.historyLength",
                )
            )
        cases += [pytest.param(params, field, id=f"{name}={shown}") for name, params, field in each]
    return cases


@pytest.mark.parametrize(("params", "field"), _cases())
def test_a_field_of_an_unexpected_type_is_32602(
    app: Flask, params: dict[str, t.Any], field: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = A2ATestClient(app, token="alice")
    response = client.rpc("SendMessage", params)
    assert field in refused_field(response)
    assert stored(app)["tasks"] == []
    no_traceback(caplog)


@pytest.mark.parametrize("role", [["ROLE_USER"], {"ROLE_USER": 1}], ids=["list", "object"])
def test_role_as_a_list_or_object_streams_nothing(
    app: Flask, role: t.Any, caplog: pytest.LogCaptureFixture
) -> None:
    client = A2ATestClient(app, token="alice")
    message = {"messageId": "m-1", "role": role, "parts": [{"text": "hi"}]}
    response = client.rpc("SendStreamingMessage", {"message": message})
    assert "message.role" in refused_field(response)
    assert stored(app)["tasks"] == []
    no_traceback(caplog)


# -------------------------------------------------------------- 6: out-of-range timestamps


def page_token(stamp: t.Any, task_id: t.Any = "t-1") -> str:
    raw = json.dumps([stamp, task_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "stamp",
    [
        "0001-01-01T00:00:00+01:00",
        "0001-01-01T00:59:59.999+01:00",
        "9999-12-31T23:59:59-01:00",
        "9999-12-31T23:30:00.5-00:31",
    ],
)
def test_status_timestamp_out_of_range_in_utc_is_32602(
    client: A2ATestClient, stamp: str, caplog: pytest.LogCaptureFixture
) -> None:
    response = client.rpc("ListTasks", {"statusTimestampAfter": stamp})
    assert refused_field(response) == ["statusTimestampAfter"]
    no_traceback(caplog)


@pytest.mark.parametrize(
    "stamp", ["0001-01-01T01:00:00+01:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"]
)
def test_timestamps_at_the_edges_of_the_range_are_read(client: A2ATestClient, stamp: str) -> None:
    task = client.send("hi", skill="echo")["task"]
    listed = client.rpc("ListTasks", {"statusTimestampAfter": stamp}).result
    ids = [t["id"] for t in listed["tasks"]]
    assert ids == ([task["id"]] if stamp.startswith("0001") else [])


@pytest.mark.parametrize("stamp", ["0001-01-01T01:00:00+01:00", "9999-12-31T23:59:59.999Z"])
def test_edge_timestamps_and_page_tokens_on_every_store(
    make_app: t.Callable[..., Flask],
    new_store: t.Callable[..., t.Any],
    stamp: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = A2ATestClient(make_app(store=new_store()), token="alice")
    task = client.send("hi", skill="echo")["task"]
    early = stamp.startswith("0001")
    listed = client.rpc("ListTasks", {"statusTimestampAfter": stamp}).result
    assert [t["id"] for t in listed["tasks"]] == ([task["id"]] if early else [])
    # A cursor at either end of time: everything is after year 1, nothing after year 9999.
    paged = client.rpc("ListTasks", {"pageToken": page_token(stamp, "~")}).result
    assert [t["id"] for t in paged["tasks"]] == ([] if early else [task["id"]])
    no_traceback(caplog)


@pytest.mark.parametrize(
    "token",
    [
        page_token("9999-12-31T23:59:59.000-01:00"),
        page_token("0001-01-01T00:00:00.000+01:00"),
        page_token("2026-13-01T00:00:00.000Z"),
        page_token(["2026-01-01T00:00:00.000Z"]),
        page_token(7),
        base64.urlsafe_b64encode(b'{"a": 1}').decode(),
        base64.urlsafe_b64encode(b"\xff\xfe\x00").decode(),
        base64.urlsafe_b64encode(b"[" * 5000).decode(),
        "not a token!",
        "a",
    ],
    ids=[
        "year-9999-offset",
        "year-1-offset",
        "month-13",
        "list-stamp",
        "int-stamp",
        "object",
        "binary",
        "deep",
        "garbage",
        "one-char",
    ],
)
def test_a_page_token_this_server_did_not_issue_is_32602(
    client: A2ATestClient, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    client.send("hi", skill="echo")
    response = client.rpc("ListTasks", {"pageToken": token})
    assert refused_field(response) == ["pageToken"]
    no_traceback(caplog)


# ---------------------------------------------------------- 9: push credentials that cannot go

UNSENDABLE = [
    pytest.param("\u20ac-key", id="euro-not-latin-1"),
    pytest.param("\u4e2d\u6587", id="cjk"),
    pytest.param("key\r\nX-Injected: 1", id="crlf"),
    pytest.param("key\n", id="trailing-lf"),
    pytest.param("key\x00", id="nul"),
    pytest.param("key\x7f", id="del"),
    pytest.param(" key", id="leading-space"),
]


def push_params(task_id: str, **config: t.Any) -> dict[str, t.Any]:
    return {"taskId": task_id, "url": URL, **config}


def running_task(client: A2ATestClient, gate: Gate) -> str:
    task = client.send("hold", skill="gate", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(10)
    return str(task["id"])


@pytest.mark.parametrize("value", UNSENDABLE)
@pytest.mark.parametrize(
    ("where", "field"),
    [("credentials", "authentication.credentials"), ("token", "token")],
)
def test_unsendable_push_credentials_are_refused_at_registration(
    app: Flask,
    client: A2ATestClient,
    gate: Gate,
    value: str,
    where: str,
    field: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    task_id = running_task(client, gate)
    if where == "credentials":
        config: dict[str, t.Any] = {"authentication": {"scheme": "Bearer", "credentials": value}}
    else:
        config = {"token": value}
    response = client.rpc("CreateTaskPushNotificationConfig", push_params(task_id, **config))
    assert refused_field(response) == [field]
    assert field in response.error["message"]
    assert stored(app)["pushConfigs"] == []
    listed = client.rpc("ListTaskPushNotificationConfigs", {"taskId": task_id}).result
    assert listed.get("configs", []) == []
    gate.release.set()
    no_traceback(caplog)


@pytest.mark.parametrize("value", UNSENDABLE)
@pytest.mark.parametrize(
    ("where", "field"),
    [("credentials", "authentication.credentials"), ("token", "token")],
)
def test_unsendable_inline_push_credentials_refuse_the_send(
    app: Flask,
    client: A2ATestClient,
    value: str,
    where: str,
    field: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    if where == "credentials":
        inline: dict[str, t.Any] = {
            "url": URL,
            "authentication": {"scheme": "Bearer", "credentials": value},
        }
    else:
        inline = {"url": URL, "token": value}
    params = {
        "message": client.message("hi", skill="echo"),
        "configuration": {"taskPushNotificationConfig": inline},
    }
    response = client.rpc("SendMessage", params)
    assert refused_field(response) == [f"configuration.taskPushNotificationConfig.{field}"]
    assert stored(app)["tasks"] == []
    no_traceback(caplog)


@pytest.mark.parametrize("scheme", ["Bearer token", "Bea\u20acrer", "Bearer\r\n", ""])
def test_an_auth_scheme_that_is_no_http_token_is_refused(
    client: A2ATestClient, gate: Gate, scheme: str
) -> None:
    task_id = running_task(client, gate)
    config = {"authentication": {"scheme": scheme, "credentials": "key"}}
    response = client.rpc("CreateTaskPushNotificationConfig", push_params(task_id, **config))
    assert refused_field(response) == ["authentication.scheme"]
    gate.release.set()


def test_sendable_credentials_are_delivered_as_given(
    make_app: t.Callable[..., Flask], webhook: t.Any, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(config={"A2A_ALLOW_PRIVATE_PUSH": True})
    client = A2ATestClient(app, token="alice")
    auth = {"scheme": "Basic", "credentials": 'dXNlcjpw\u00e9ss== realm="a b"'}
    inline = {"url": webhook.url(), "token": "tok\u00e9-1", "authentication": auth}
    client.send("hi", skill="echo", configuration={"taskPushNotificationConfig": inline})
    (config,) = stored(app)["pushConfigs"]
    assert config["token"] == "tok\u00e9-1" and config["authentication"] == auth
    hit = webhook.wait_for(1)[0]  # the snapshot of a task not yet settled, or its last state
    assert hit.headers["A2A-Notification-Token"] == "tok\u00e9-1"
    assert hit.headers["Authorization"] == 'Basic dXNlcjpw\u00e9ss== realm="a b"'
    # Nothing failed to encode (a delivery that loses the race with the webhook's close is
    # another matter: its transport error is logged, and not this test's concern).
    assert not [
        r for r in caplog.records if "Encode" in r.getMessage() or "panicked" in r.getMessage()
    ]


# ------------------------------------------- l-fuzz: JSON nested deeper than anything encodes


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def send_body(data_json: str) -> str:
    return (
        '{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m",'
        '"role":"ROLE_USER","parts":[{"data":' + data_json + '}],"metadata":{"skill":"echo"}}}}'
    )


def test_json_nested_past_the_depth_limit_is_a_parse_error(
    app: Flask, client: A2ATestClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by tests/protocol/test_fuzz.py: a body nested just under the parser's recursion limit
    parsed, then failed to encode (a deeper stack) and was answered -32603. Every depth past
    the limit is now a parse error, whatever the interpreter's recursion limit."""
    import sys

    limit = sys.getrecursionlimit()
    for depth in [101, *range(max(102, limit - 200), limit + 5)]:
        response = client.post(send_body(nested(depth - 5)))  # the body holds 5 levels
        body = response.get_json()
        assert body["error"]["code"] == -32700, (depth, body)
        assert body["id"] is None
        if depth == 101:
            assert body["error"]["message"] == "Invalid JSON payload: nested deeper than 100 levels"
    assert stored(app)["tasks"] == []
    no_traceback(caplog)


def test_json_nested_to_the_depth_limit_is_read(client: A2ATestClient) -> None:
    response = client.post(send_body(nested(100 - 5)))
    task = response.get_json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["history"][0]["parts"][0]["data"] == json.loads(nested(95))


def test_objects_nested_past_the_depth_limit_are_a_parse_error(client: A2ATestClient) -> None:
    inner = '{"a":' * 95 + "{}" + "}" * 95  # levels 6..101
    body = client.post(send_body(inner)).get_json()
    assert body["error"]["code"] == -32700 and body["id"] is None
