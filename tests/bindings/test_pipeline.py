"""The HTTP pipeline and the JSON-RPC envelope, in the order design.md §4 runs them.

Every refusal here sends a body that *would* create a task if it were dispatched, then proves
the handler never ran, the principal hook ran only when its step was reached, and the owner's
store holds nothing.
"""

from __future__ import annotations

import io
import json
import re
import typing as t

import pytest
from flask import Flask
from werkzeug.test import TestResponse

from flask_a2a import Principal, Skill, TaskContext
from flask_a2a.protocol import errors as errs
from flask_a2a.protocol.errors import error_class_for_code, error_from_dict
from flask_a2a.testing import A2ATestClient
from tests import stack
from tests.conftest import token_principal

PATH = "/a2a"
MIB = 1024 * 1024
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
METHODS = (
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
)


class Probe:
    """An app whose handler and principal hook count their calls."""

    def __init__(self, make_app: t.Callable[..., Flask], **config: t.Any) -> None:
        self.handled = 0
        self.resolved = 0

        def handler(task: TaskContext) -> None:
            self.handled += 1

        def principal() -> Principal | None:
            self.resolved += 1
            return token_principal()

        skill = Skill(id="echo", name="Echo", description="Counts.", handler=handler)
        self.app = make_app(skills=[skill], config=config, principal=principal)
        self.client = A2ATestClient(self.app, token="alice")

    @property
    def stored(self) -> list[t.Any]:
        """Every task alice owns, in any tenant or scope set."""
        return list(self.app.extensions["a2a"].exchange.store.export_owner("alice")["tasks"])

    def post(
        self,
        body: bytes,
        *,
        headers: t.Mapping[str, str] | None = None,
        content_type: str | None = "application/json",
        token: str | None = "alice",
        **kw: t.Any,
    ) -> TestResponse:
        sent: dict[str, str] = {}
        if content_type is not None:
            sent["Content-Type"] = content_type
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        sent.update(headers or {})
        return self.client.client.post(PATH, data=body, headers=sent, **kw)

    def assert_untouched(self, *, resolved: int = 0) -> None:
        assert self.handled == 0
        assert self.resolved == resolved
        assert self.stored == []


@pytest.fixture
def probe(make_app: t.Callable[..., Flask]) -> Probe:
    return Probe(make_app)


def send_doc(request_id: t.Any = 1, **message: t.Any) -> dict[str, t.Any]:
    """A SendMessage request that creates a task when dispatched."""
    msg = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}], **message}
    return {"jsonrpc": "2.0", "id": request_id, "method": "SendMessage", "params": {"message": msg}}


def send_body(**message: t.Any) -> bytes:
    return json.dumps(send_doc(**message)).encode()


def answer(response: TestResponse, status: int, code: int) -> dict[str, t.Any]:
    """Check a refusal's HTTP status, headers and code; return its error object."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.headers["Cache-Control"] == "no-store"
    assert response.mimetype == "application/json"
    doc = json.loads(response.get_data(as_text=True))
    assert doc["jsonrpc"] == "2.0"
    assert doc["error"]["code"] == code, doc
    assert "result" not in doc
    return t.cast(dict[str, t.Any], doc)


class Tracked:
    """A request body (``read`` only, as WSGI promises) that records who read how much.

    ``trickle`` caps each read, the way a socket hands over a body in pieces.
    """

    def __init__(self, data: bytes, trickle: int | None = None) -> None:
        self.data = io.BytesIO(data)
        self.size = len(data)
        self.trickle = trickle
        self.read_calls = 0
        self.bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:
        self.read_calls += 1
        if self.trickle is not None and (size is None or size < 0 or size > self.trickle):
            size = self.trickle
        chunk = self.data.read(size)
        self.bytes_read += len(chunk)
        return chunk

    def tell(self) -> int:  # the test client measures the body (seeks without reading)
        return self.data.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.data.seek(offset, whence)

    def close(self) -> None:  # Werkzeug 2.0's test client closes the body it was given
        self.data.close()


# --------------------------------------------------------------------------- method, origin


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_non_post_is_405_with_allow_and_a_jsonrpc_body(probe: Probe, method: str) -> None:
    response = probe.client.client.open(
        PATH, method=method, data=send_body(), headers=probe.client.headers()
    )
    doc = answer(response, 405, -31405)
    assert response.headers["Allow"] == "POST"
    assert doc["id"] is None
    probe.assert_untouched()


def test_foreign_origin_is_403_before_the_body_is_read(probe: Probe) -> None:
    body = Tracked(b"{not json" + b" " * (2 * MIB))
    response = probe.post(
        b"", headers={"Origin": "https://evil.example"}, input_stream=body, content_length=body.size
    )
    doc = answer(response, 403, -31403)
    assert doc["id"] is None
    assert doc["error"]["data"][0]["reason"] == "FORBIDDEN_ORIGIN"
    assert body.read_calls == 0
    probe.assert_untouched()


@pytest.mark.parametrize(
    "body", [b"{not json", b"x" * (MIB + 1), send_body()], ids=["invalid", "oversize", "valid"]
)
def test_foreign_origin_wins_over_every_later_check(probe: Probe, body: bytes) -> None:
    response = probe.post(
        body, headers={"Origin": "http://evil.example"}, content_type=None, token=None
    )
    answer(response, 403, -31403)
    probe.assert_untouched()


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "http://localhost:8081",
        "https://localhost:8443",
        "http://localhost.evil.example",
        "http://evil.example/localhost",
        "null",
        "http://localhost:abc",
        "file://",
    ],
)
def test_origin_naming_another_authority_is_refused(probe: Probe, origin: str) -> None:
    answer(probe.post(send_body(), headers={"Origin": origin}), 403, -31403)
    probe.assert_untouched()


def test_absent_origin_passes(probe: Probe) -> None:
    response = probe.post(send_body())
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    assert (response.json or {})["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert probe.handled == 1 and len(probe.stored) == 1


@pytest.mark.parametrize(
    ("origin", "base_url"),
    [
        ("http://localhost", "http://localhost"),
        ("http://localhost:80", "http://localhost"),
        ("http://LOCALHOST", "http://localhost"),
        ("http://app.example:8080", "http://app.example:8080"),
        ("https://app.example", "https://app.example"),
        ("https://app.example:443", "https://app.example"),
        ("https://app.example", "https://app.example:443"),
        ("http://[::1]:5000", "http://[::1]:5000"),
    ],
)
def test_same_origin_passes(probe: Probe, origin: str, base_url: str) -> None:
    response = probe.post(send_body(), headers={"Origin": origin}, base_url=base_url)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert "result" in (response.json or {})
    assert probe.handled == 1


@pytest.mark.parametrize("listed", ["https://tunnel.example", "https://Tunnel.example/"])
def test_allowed_origins_permit_a_listed_origin_only(
    make_app: t.Callable[..., Flask], listed: str
) -> None:
    probe = Probe(make_app, A2A_ALLOWED_ORIGINS=[listed, "http://split.example:8080"])
    for foreign in ("https://other.example", "http://tunnel.example", "http://split.example"):
        answer(probe.post(send_body(), headers={"Origin": foreign}), 403, -31403)
    assert probe.stored == [] and probe.resolved == 0
    for origin in ("https://tunnel.example", "http://split.example:8080"):
        response = probe.post(send_body(), headers={"Origin": origin})
        assert response.status_code == 200 and "result" in (response.json or {})
    assert probe.handled == 2


def test_a_star_allows_every_origin(make_app: t.Callable[..., Flask]) -> None:
    probe = Probe(make_app, A2A_ALLOWED_ORIGINS=["*"])
    response = probe.post(send_body(), headers={"Origin": "https://anywhere.example"})
    assert response.status_code == 200 and "result" in (response.json or {})


# --------------------------------------------------------------------------- body cap


def padded_send(size: int) -> bytes:
    """A valid SendMessage body of exactly ``size`` bytes (whitespace padding)."""
    body = send_body()
    assert len(body) <= size
    return body[:-1] + b" " * (size - len(body)) + b"}"


def test_body_over_the_default_mib_is_413_and_never_dispatched(probe: Probe) -> None:
    body = padded_send(MIB + 1)
    doc = answer(probe.post(body), 413, -31413)
    assert doc["id"] is None and "data" not in doc["error"]
    probe.assert_untouched()
    response = probe.post(padded_send(MIB))
    assert response.status_code == 200 and "result" in (response.json or {})


def test_lowered_cap_is_enforced_by_content_length(make_app: t.Callable[..., Flask]) -> None:
    probe = Probe(make_app, A2A_MAX_BODY_BYTES=400)
    stream = Tracked(padded_send(401))
    response = probe.post(b"", input_stream=stream, content_length=401)
    answer(response, 413, -31413)
    assert stream.read_calls == 0  # refused on the declared length alone
    probe.assert_untouched()
    assert probe.post(padded_send(400)).status_code == 200
    assert probe.handled == 1


@pytest.mark.skipif(
    stack.WERKZEUG < (2, 3),
    reason="Werkzeug before 2.3 takes a short read of the body for the client leaving (a 400); "
    "the WSGI servers in use (its own, gunicorn) read whole",
)
def test_a_body_arriving_in_pieces_is_read_whole(probe: Probe) -> None:
    body = padded_send(50_000)
    stream = Tracked(body, trickle=7)
    response = probe.post(b"", input_stream=stream, content_length=len(body))
    assert response.status_code == 200 and "result" in (response.json or {}), response.json
    assert stream.bytes_read == len(body)
    assert probe.handled == 1


def test_lowered_cap_is_enforced_without_content_length(make_app: t.Callable[..., Flask]) -> None:
    probe = Probe(make_app, A2A_MAX_BODY_BYTES=400)
    stream = Tracked(padded_send(10_000))
    response = probe.post(
        b"", input_stream=stream, environ_overrides={"wsgi.input_terminated": True}
    )
    answer(response, 413, -31413)
    assert stream.bytes_read <= 401  # read at most the cap plus one byte
    probe.assert_untouched()


# --------------------------------------------------------------------------- content type


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/a2a+json",
        "application/a2a+json; charset=utf-8",
        "Application/JSON",
    ],
)
def test_json_content_types_pass(probe: Probe, content_type: str) -> None:
    response = probe.post(send_body(), content_type=content_type)
    assert response.status_code == 200 and "result" in (response.json or {})
    assert probe.handled == 1


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
        "text/json",
    ],
)
def test_other_content_types_are_32005_at_http_200(probe: Probe, content_type: str | None) -> None:
    doc = answer(probe.post(send_body(), content_type=content_type), 200, -32005)
    assert doc["error"]["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    probe.assert_untouched()


# --------------------------------------------------------------------------- strict JSON, envelope


@pytest.mark.parametrize(
    "body",
    [
        b"[" + send_body() + b"]",
        b"[]",
        b'"SendMessage"',
        b"42",
        b"null",
    ],
    ids=["batch", "empty-batch", "string", "number", "null"],
)
def test_anything_but_one_object_is_32600(probe: Probe, body: bytes) -> None:
    doc = answer(probe.post(body), 200, -32600)
    assert doc["id"] is None
    probe.assert_untouched()


def _raw_send(message_json: str, *, head: str = '"jsonrpc":"2.0","id":5') -> bytes:
    return (
        "{" + head + ',"method":"SendMessage","params":{"message":' + message_json + "}}"
    ).encode()


MESSAGE = '{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hi"}]}'


@pytest.mark.parametrize(
    "body",
    [
        _raw_send(MESSAGE, head='"jsonrpc":"2.0","id":5,"id":6'),
        _raw_send(MESSAGE, head='"jsonrpc":"2.0","jsonrpc":"2.0","id":5'),
        _raw_send(
            '{"messageId":"m-1","messageId":"m-2","role":"ROLE_USER","parts":[{"text":"a"}]}'
        ),
        _raw_send('{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a","text":"b"}]}'),
        _raw_send(MESSAGE, head='"jsonrpc":"2.0","id":5,"Method":"GetTask"'),
        _raw_send(MESSAGE, head='"jsonrpc":"2.0","id":5,"ID":7'),
        _raw_send(
            '{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a"}],"metadata":{"x":NaN}}'
        ),
        _raw_send('{"messageId":"m","role":"ROLE_USER","parts":[{"data":Infinity}]}'),
        _raw_send('{"messageId":"m","role":"ROLE_USER","parts":[{"data":-Infinity}]}'),
        _raw_send('{"messageId":"m","role":"ROLE_USER","parts":[{"data":1e400}]}'),
        _raw_send('{"messageId":"\\ud800","role":"ROLE_USER","parts":[{"text":"a"}]}'),
        _raw_send('{"messageId":"m","role":"ROLE_USER","parts":[{"text":"\\udfff"}]}'),
        _raw_send(MESSAGE).replace(b"hi", b"h\xffi"),
        _raw_send(MESSAGE).replace(b"hi", b"h\xed\xa0\x80i"),
        _raw_send(MESSAGE).decode().encode("utf-16"),
        b"[" * 200_000 + b"]" * 200_000,
        _raw_send(MESSAGE)[:-1],
        b"",
    ],
    ids=[
        "top-repeated-id",
        "top-repeated-jsonrpc",
        "nested-repeated",
        "part-repeated",
        "method-two-cases",
        "id-two-cases",
        "nan",
        "infinity",
        "minus-infinity",
        "overflow",
        "lone-high-surrogate",
        "lone-low-surrogate",
        "not-utf8",
        "encoded-surrogate",
        "utf16",
        "deep-nesting",
        "truncated",
        "empty",
    ],
)
def test_strict_json_refuses_with_32700_and_runs_nothing(probe: Probe, body: bytes) -> None:
    doc = answer(probe.post(body), 200, -32700)
    assert doc["id"] is None
    assert "data" not in doc["error"]
    assert doc["error"]["message"].startswith("Invalid JSON payload")
    probe.assert_untouched()


def test_paired_surrogates_bom_and_case_variants_below_the_top_level_pass(probe: Probe) -> None:
    body = _raw_send(
        '{"messageId":"m","role":"ROLE_USER","parts":[{"text":"\\ud83d\\ude00"}],'
        '"metadata":{"k":1,"K":2}}'
    )
    task = json.loads(probe.post("\ufeff".encode() + body).get_data(as_text=True))["result"]["task"]
    assert task["history"][0]["parts"][0]["text"] == "\U0001f600"
    assert task["history"][0]["metadata"] == {"k": 1, "K": 2}


@pytest.mark.parametrize("version", ['"1.0"', "2.0", '"2"', "null", None])
def test_jsonrpc_must_be_2_0_answering_with_the_request_id(
    probe: Probe, version: str | None
) -> None:
    doc = send_doc(request_id="req-9")
    if version is None:
        del doc["jsonrpc"]
    else:
        doc["jsonrpc"] = json.loads(version)
    answer_doc = answer(probe.post(json.dumps(doc).encode()), 200, -32600)
    assert answer_doc["id"] == "req-9"
    assert answer_doc["error"]["data"][0]["reason"] == "INVALID_REQUEST"
    probe.assert_untouched(resolved=0)


@pytest.mark.parametrize("request_id", [True, False, 1.5, 1.0, {"a": 1}, [1], "absent"])
def test_id_is_required_and_must_be_a_string_an_integer_or_null(
    probe: Probe, request_id: t.Any
) -> None:
    doc = send_doc()
    if request_id == "absent":
        del doc["id"]
    else:
        doc["id"] = request_id
    answer_doc = answer(probe.post(json.dumps(doc).encode()), 200, -32600)
    assert answer_doc["id"] is None
    probe.assert_untouched()


@pytest.mark.parametrize("request_id", ["abc", 0, -7, 2**53, None])
def test_valid_ids_are_echoed(probe: Probe, request_id: t.Any) -> None:
    response = probe.post(json.dumps(send_doc(request_id=request_id)).encode())
    doc = json.loads(response.get_data(as_text=True))
    assert doc["id"] == request_id and "result" in doc


@pytest.mark.parametrize(
    ("method", "code"), [(None, -32600), ("", -32600), (7, -32600), ("GetTask", -32602)]
)
def test_method_and_params_shapes(probe: Probe, method: t.Any, code: int) -> None:
    doc: dict[str, t.Any] = {"jsonrpc": "2.0", "id": 3, "params": ["positional"]}
    if method is not None:
        doc["method"] = method
    answer_doc = answer(probe.post(json.dumps(doc).encode()), 200, code)
    assert answer_doc["id"] == 3
    if code == -32602:
        assert answer_doc["error"]["data"][1]["fieldViolations"][0]["field"] == "params"
    probe.assert_untouched()


# --------------------------------------------------------------------------- principal, version


@pytest.mark.parametrize("token", [None, "nobody"])
def test_no_principal_is_401_and_no_method_runs(probe: Probe, token: str | None) -> None:
    response = probe.post(send_body(), token=token)
    doc = answer(response, 401, -31401)
    assert doc["id"] == 1
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert doc["error"]["data"][0]["reason"] == "UNAUTHENTICATED"
    probe.assert_untouched(resolved=1)


def test_principal_is_resolved_after_the_envelope(probe: Probe) -> None:
    answer(probe.post(b"{oops", token=None), 200, -32700)
    probe.assert_untouched(resolved=0)


def test_principal_is_checked_before_version_and_method(probe: Probe) -> None:
    answer(probe.post(send_body(), token=None, headers={"A2A-Version": "0.3"}), 401, -31401)
    doc = send_doc()
    doc["method"] = "tasks/get"
    answer(probe.post(json.dumps(doc).encode(), token=None), 401, -31401)
    probe.assert_untouched(resolved=2)


@pytest.mark.parametrize("version", [None, "", "1.0", "1.1", "1"])
def test_supported_versions_pass(probe: Probe, version: str | None) -> None:
    headers = {} if version is None else {"A2A-Version": version}
    response = probe.post(send_body(), headers=headers)
    assert "result" in (response.json or {})
    assert probe.handled == 1


@pytest.mark.parametrize("version", ["0.3", "0.3.0", "2.0", "garbage", "1.x", "v1.0"])
def test_unsupported_versions_are_32009(probe: Probe, version: str) -> None:
    doc = answer(probe.post(send_body(), headers={"A2A-Version": version}), 200, -32009)
    assert doc["id"] == 1
    info = doc["error"]["data"][0]
    assert info["reason"] == "VERSION_NOT_SUPPORTED"
    assert all(isinstance(v, str) for v in info["metadata"].values())
    probe.assert_untouched(resolved=1)


def test_version_may_come_as_a_query_parameter(probe: Probe) -> None:
    response = probe.client.client.post(
        PATH + "?A2A-Version=0.3", data=send_body(), headers=probe.client.headers()
    )
    answer(response, 200, -32009)
    probe.assert_untouched(resolved=1)


# --------------------------------------------------------------------------- the method table


@pytest.mark.parametrize("method", METHODS)
def test_every_v1_method_is_known(probe: Probe, method: str) -> None:
    response = probe.client.rpc(method, {"id": "t-none", "taskId": "t-none"})
    assert response.status == 200
    if "error" in response.json:
        assert response.code != -32601
        assert response.code not in (-32600, -32700)


@pytest.mark.parametrize(
    "method",
    [
        "message/send",
        "message/stream",
        "tasks/get",
        "tasks/cancel",
        "tasks/resubscribe",
        "tasks/pushNotificationConfig/set",
        "agent/getAuthenticatedExtendedCard",
        "sendMessage",
        "SENDMESSAGE",
        "SendMessage ",
        "Nope",
        "rpc.discover",
    ],
)
def test_slash_names_and_unknown_methods_are_32601(probe: Probe, method: str) -> None:
    doc = send_doc(request_id=11)
    doc["method"] = method
    answer_doc = answer(probe.post(json.dumps(doc).encode()), 200, -32601)
    assert answer_doc["id"] == 11
    assert "data" not in answer_doc["error"]
    assert answer_doc["error"]["message"].startswith("Method not found")
    probe.assert_untouched(resolved=1)


# --------------------------------------------------------------------------- params


def test_snake_case_and_unknown_fields_are_accepted(probe: Probe) -> None:
    doc = send_doc(kind="message", surprise={"x": 1})
    message = doc["params"]["message"]
    message["message_id"] = message.pop("messageId")
    message["context_id"] = "ctx-snake"
    doc["params"]["configuration"] = {"history_length": 1, "returnImmediately": False}
    doc["params"]["unknownTopLevel"] = True
    task = json.loads(probe.post(json.dumps(doc).encode()).get_data(as_text=True))["result"]["task"]
    assert task["contextId"] == "ctx-snake"
    assert [m["messageId"] for m in task["history"]] == ["m-1"]
    got = probe.client.rpc("GetTask", {"id": task["id"], "history_length": 0}).result
    assert "history" not in got
    got = probe.client.rpc("GetTask", {"id": task["id"], "historyLength": 1}).result
    assert len(got["history"]) == 1 and "kind" not in got["history"][0]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (
            {"message": {"messageId": 5, "role": "ROLE_USER", "parts": [{"text": "a"}]}},
            "message.messageId",
        ),
        ({"message": {"messageId": "m", "role": "user", "parts": [{"text": "a"}]}}, "message.role"),
        (
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": {"text": "a"}}},
            "message.parts",
        ),
        (
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": 1}]}},
            "message.parts[0].text",
        ),
        (
            {
                "message": {
                    "messageId": "m",
                    "role": "ROLE_USER",
                    "parts": [{"text": "a"}],
                    "metadata": [1],
                }
            },
            "message.metadata",
        ),
        (
            {
                "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}]},
                "configuration": {"historyLength": "many"},
            },
            "configuration.historyLength",
        ),
        (
            {
                "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}]},
                "configuration": {"historyLength": 1.5},
            },
            "configuration.historyLength",
        ),
        (
            {
                "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}]},
                "configuration": {"returnImmediately": "yes"},
            },
            "configuration.returnImmediately",
        ),
        (
            {
                "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}]},
                "configuration": {"returnImmediately": 1},
            },
            "configuration.returnImmediately",
        ),
        ({}, "message"),
    ],
)
def test_bad_params_are_32602_with_field_violations(
    probe: Probe, params: dict[str, t.Any], field: str
) -> None:
    response = probe.client.rpc("SendMessage", params, request_id=21)
    doc = answer(response.response, 200, -32602)
    assert doc["id"] == 21
    info, bad = doc["error"]["data"]
    assert info["@type"] == ERROR_INFO and info["reason"] == "INVALID_PARAMS"
    assert bad["@type"] == BAD_REQUEST
    fields = [v["field"] for v in bad["fieldViolations"]]
    assert field in fields, fields
    assert all(v["description"] for v in bad["fieldViolations"])
    assert field in doc["error"]["message"]
    probe.assert_untouched(resolved=1)


# --------------------------------------------------------------------------- error objects


def _a2a_error_classes() -> list[type[errs.A2AError]]:
    return [
        c
        for c in vars(errs).values()
        if isinstance(c, type) and issubclass(c, errs.A2AError) and -32009 <= c.code <= -32001
    ]


def test_every_a2a_error_carries_error_info_first() -> None:
    classes = _a2a_error_classes()
    assert sorted(c.code for c in classes) == list(range(-32009, -32000))
    for cls in classes:
        data = cls(metadata={"taskId": "t-1", "count": 3}).to_dict()["data"]  # type: ignore[dict-item]  # an int is stringified
        info = data[0]
        expected = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__.removesuffix("Error")).upper()
        assert info == {
            "@type": ERROR_INFO,
            "reason": expected,
            "domain": "a2a-protocol.org",
            "metadata": {"taskId": "t-1", "count": "3"},
        }
        assert cls().to_dict()["data"][0]["metadata"] == {}


def test_parse_and_method_errors_carry_no_data() -> None:
    assert errs.JSONParseError().to_dict() == {"code": -32700, "message": "Invalid JSON payload"}
    assert errs.MethodNotFoundError().to_dict() == {"code": -32601, "message": "Method not found"}


def test_default_messages_follow_the_spec_wording() -> None:
    expected = {
        -32700: "Invalid JSON payload",
        -32600: "Request payload validation error",
        -32601: "Method not found",
        -32602: "Invalid parameters",
        -32603: "Internal error",
        -32001: "Task not found",
        -32002: "Task cannot be canceled",
        -32003: "Push notifications are not supported",
        -32004: "This operation is not supported",
        -32005: "Incompatible content types",
        -32006: "Invalid agent response",
        -32007: "Extended agent card is not configured",
        -32008: "Extension support is required",
        -32009: "Protocol version is not supported",
    }
    for code, message in expected.items():
        assert error_class_for_code(code)().message == message


def test_every_code_maps_back_to_its_class() -> None:
    def walk(cls: type[errs.A2AError]) -> t.Iterator[type[errs.A2AError]]:
        for sub in cls.__subclasses__():
            yield sub
            yield from walk(sub)

    classes = list(walk(errs.A2AError))
    # A code belongs to one class; a subclass refining it (its own reason) may share it.
    bases = [
        c for c in classes if not any(c.code == p.code for p in classes if c in p.__subclasses__())
    ]
    assert len({c.code for c in bases}) == len(bases), "two classes share a code"
    for cls in classes:
        base = next(c for c in bases if issubclass(cls, c) and c.code == cls.code)
        assert error_class_for_code(cls.code) is base
        rebuilt = error_from_dict(cls("custom").to_dict())
        assert type(rebuilt) is cls and rebuilt.message == "custom"
    assert error_class_for_code(-1) is errs.A2AError


def test_a2a_errors_over_the_wire(make_app: t.Callable[..., Flask]) -> None:
    probe = Probe(make_app)
    first = answer(probe.client.rpc("GetTask", {"id": "t-missing"}).response, 200, -32001)
    assert first["error"]["message"] == "Task not found"
    assert first["error"]["data"] == [
        {
            "@type": ERROR_INFO,
            "reason": "TASK_NOT_FOUND",
            "domain": "a2a-protocol.org",
            "metadata": {"taskId": "t-missing"},
        }
    ]
    task = probe.client.send("hi")["task"]
    cases = [
        ("CancelTask", {"id": task["id"]}, -32002, "TASK_NOT_CANCELABLE"),
        ("SubscribeToTask", {"id": task["id"]}, -32004, "UNSUPPORTED_OPERATION"),
        (
            "SendMessage",
            {"message": A2ATestClient.message("again", task_id=task["id"])},
            -32004,
            "UNSUPPORTED_OPERATION",
        ),
        ("GetExtendedAgentCard", {}, -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"),
    ]
    for method, params, code, reason in cases:
        if method == "SubscribeToTask":  # a streaming method: one error event (test_stream_errors)
            doc = probe.client.rpc(method, params).json
            assert doc["error"]["code"] == code
        else:
            doc = answer(probe.client.rpc(method, params).response, 200, code)
        info = doc["error"]["data"][0]
        assert (info["@type"], info["reason"], info["domain"]) == (
            ERROR_INFO,
            reason,
            "a2a-protocol.org",
        )
        assert all(isinstance(v, str) for v in info["metadata"].values())
    assert len(probe.stored) == 1
    assert probe.stored[0]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_error_from_dict_is_the_inverse_of_to_dict() -> None:
    from flask_a2a.protocol.errors import InvalidParamsError, TaskNotFoundError, error_from_dict

    for sent in (
        TaskNotFoundError(metadata={"taskId": "t-9"}),
        InvalidParamsError("Invalid parameters: x", field_violations=[("message.parts", "empty")]),
    ):
        got = error_from_dict(sent.to_dict())
        assert type(got) is type(sent)
        assert got.to_dict() == sent.to_dict()
