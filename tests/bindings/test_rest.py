"""What only the HTTP+JSON binding has: its routes, its error bodies and statuses, its mount.

Every method's behaviour is tested over both bindings by the method-test modules (the
``binding`` fixture); this module checks the REST envelope itself, over the Flask test client and
one stream over a real socket.
"""

from __future__ import annotations

import io
import json
import typing as t

import pytest
import requests
from flask import Flask

from flask_a2a import A2A, ConfigError, Principal, Skill
from flask_a2a.bindings import rest
from flask_a2a.exchange.calls import HTTPRequest
from flask_a2a.testing import A2ATestClient, parse_sse
from tests.conftest import Gate, echo
from tests.live_server import werkzeug_server

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
MEDIA = "application/a2a+json"
AUTH = {"Authorization": "Bearer alice"}
JSON = {**AUTH, "Content-Type": "application/json"}


def send_body(text: str = "hi", **message: t.Any) -> str:
    return json.dumps({"message": A2ATestClient.message(text, **message)})


def status_error(response: t.Any, status: int, grpc: str, reason: str) -> dict[str, t.Any]:
    """The google.rpc.Status body of spec §11.6, asserting its shape."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == MEDIA
    body = response.get_json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "status", "message", "details"}
    assert (error["code"], error["status"]) == (status, grpc)
    info = error["details"][0]
    assert (info["@type"], info["reason"], info["domain"]) == (
        ERROR_INFO,
        reason,
        "a2a-protocol.org",
    )
    return t.cast(dict[str, t.Any], error)


@pytest.fixture
def http(app: Flask) -> t.Any:
    return app.test_client()


# ------------------------------------------------------------------------------- routes


def test_every_route_answers_its_bare_proto_json(http: t.Any) -> None:
    sent = http.post("/a2a/rest/message:send", data=send_body("hello"), headers=JSON)
    assert sent.status_code == 200 and sent.mimetype == MEDIA
    task = sent.get_json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    got = http.get(f"/a2a/rest/tasks/{task['id']}?historyLength=1", headers=AUTH).get_json()
    assert got["id"] == task["id"] and len(got["history"]) == 1
    listed = http.get("/a2a/rest/tasks?pageSize=1&includeArtifacts=true", headers=AUTH)
    assert listed.get_json()["tasks"][0]["artifacts"][0]["parts"] == [{"text": "hello"}]
    assert listed.get_json()["pageSize"] == 1
    without = http.get("/a2a/rest/tasks?includeArtifacts=false", headers=AUTH).get_json()
    assert "artifacts" not in without["tasks"][0]
    configs = f"/a2a/rest/tasks/{task['id']}/pushNotificationConfigs"
    created = http.post(
        configs, headers=JSON, data=json.dumps({"id": "c1", "url": "https://example.com/hook"})
    )
    assert created.status_code == 200
    assert created.get_json() == {"taskId": task["id"], "id": "c1",
                                  "url": "https://example.com/hook"}  # fmt: skip
    assert http.get(configs + "/c1", headers=AUTH).get_json()["id"] == "c1"
    assert [c["id"] for c in http.get(configs, headers=AUTH).get_json()["configs"]] == ["c1"]
    deleted = http.delete(configs + "/c1", headers=AUTH)
    assert deleted.status_code == 200 and deleted.get_json() == {}  # google.protobuf.Empty
    assert http.get(configs, headers=AUTH).get_json() == {"configs": []}


def test_cancel_and_subscribe_take_an_empty_body_and_subscribe_both_verbs(
    make_app: t.Callable[..., Flask], gate: Gate
) -> None:
    app = make_app(skills=[Skill(id="gate", name="G", description="G.", handler=gate.handler)])
    http = app.test_client()
    body = json.dumps({"message": A2ATestClient.message("x", skill="gate"),
                       "configuration": {"returnImmediately": True}})  # fmt: skip
    task_id = http.post("/a2a/rest/message:send", data=body, headers=JSON).get_json()["task"]["id"]
    assert gate.entered.wait(10)
    for verb in ("GET", "POST"):  # the proto says GET, the spec's text POST
        stream = http.open(f"/a2a/rest/tasks/{task_id}:subscribe", method=verb, headers=AUTH,
                           buffered=False)  # fmt: skip
        assert stream.status_code == 200 and stream.mimetype == "text/event-stream"
        first = t.cast(bytes, next(iter(stream.response)))
        assert json.loads(first.decode()[len("data: ") :])["task"]["id"] == task_id
        stream.close()
    canceled = http.post(f"/a2a/rest/tasks/{task_id}:cancel", headers=AUTH)  # no body at all
    assert canceled.status_code == 200
    assert canceled.get_json()["status"]["state"] == "TASK_STATE_CANCELED"


def test_a_stream_event_is_the_bare_stream_response(http: t.Any) -> None:
    response = http.post("/a2a/rest/message:stream", data=send_body("yo"), headers=JSON)
    assert response.status_code == 200 and response.mimetype == "text/event-stream"
    events = parse_sse(response.get_data(as_text=True))
    assert "task" in events[0] and "jsonrpc" not in events[0]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_the_tenant_prefix_is_the_params_tenant(make_app: t.Callable[..., Flask]) -> None:
    """``/{tenant}/...`` carries what JSON-RPC's ``params.tenant`` carries: a routing label.
    Visibility follows the principal's tenant on both bindings, so a path tenant never opens
    another tenant's tasks."""
    app = make_app()
    http = app.test_client()
    home = http.post("/a2a/rest/message:send", data=send_body(), headers=JSON).get_json()["task"]
    t2 = {"Authorization": "Bearer alice-t2", "Content-Type": "application/json"}
    away = http.post("/a2a/rest/t2/message:send", data=send_body(), headers=t2).get_json()["task"]
    status_error(http.get(f"/a2a/rest/t2/tasks/{home['id']}", headers=t2), 404, "NOT_FOUND",
                 "TASK_NOT_FOUND")  # fmt: skip
    assert http.get(f"/a2a/rest/t2/tasks/{away['id']}", headers=t2).get_json()["id"] == away["id"]
    listed = http.get("/a2a/rest/t2/tasks", headers=t2).get_json()["tasks"]
    assert [t["id"] for t in listed] == [away["id"]]
    # The same routing label on the same caller's other tenant: still only its own tasks.
    assert [t["id"] for t in http.get("/a2a/rest/t2/tasks", headers=AUTH).get_json()["tasks"]] == [
        home["id"]
    ]


# ------------------------------------------------------------------------------- errors


def test_errors_carry_the_http_status_of_the_spec_and_the_json_rpc_reason(http: t.Any) -> None:
    task = http.post("/a2a/rest/message:send", data=send_body(), headers=JSON).get_json()["task"]
    error = status_error(http.get("/a2a/rest/tasks/nope", headers=AUTH), 404, "NOT_FOUND",
                         "TASK_NOT_FOUND")  # fmt: skip
    assert error["message"] == "Task not found"
    assert error["details"][0]["metadata"] == {"taskId": "nope"}
    status_error(http.post(f"/a2a/rest/tasks/{task['id']}:cancel", headers=AUTH), 400,
                 "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE")  # fmt: skip
    status_error(http.post(f"/a2a/rest/tasks/{task['id']}:subscribe", headers=AUTH), 400,
                 "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION")  # fmt: skip
    status_error(http.get("/a2a/rest/extendedAgentCard", headers=AUTH), 400,
                 "FAILED_PRECONDITION", "EXTENDED_AGENT_CARD_NOT_CONFIGURED")  # fmt: skip
    bad = status_error(http.get("/a2a/rest/tasks?pageSize=0", headers=AUTH), 400,
                       "INVALID_ARGUMENT", "INVALID_PARAMS")  # fmt: skip
    assert bad["details"][1]["fieldViolations"][0]["field"] == "pageSize"
    status_error(http.get("/a2a/rest/tasks?status=BOGUS", headers=AUTH), 400,
                 "INVALID_ARGUMENT", "INVALID_PARAMS")  # fmt: skip
    status_error(http.get("/a2a/rest/tasks?includeArtifacts=yes", headers=AUTH), 400,
                 "INVALID_ARGUMENT", "INVALID_PARAMS")  # fmt: skip
    # A query parameter given twice is refused, as a repeated JSON key is.
    status_error(http.get("/a2a/rest/tasks?pageSize=1&pageSize=2", headers=AUTH), 400,
                 "INVALID_ARGUMENT", "INVALID_PARAMS")  # fmt: skip


def test_a_streaming_route_refuses_with_its_http_status_before_any_stream(http: t.Any) -> None:
    refused = http.post("/a2a/rest/tasks/nope:subscribe", headers=AUTH)
    status_error(refused, 404, "NOT_FOUND", "TASK_NOT_FOUND")
    follow_up = send_body(task_id="nope")
    status_error(http.post("/a2a/rest/message:stream", data=follow_up, headers=JSON), 404,
                 "NOT_FOUND", "TASK_NOT_FOUND")  # fmt: skip


def test_unknown_routes_and_verbs(http: t.Any) -> None:
    status_error(http.get("/a2a/rest/nothing/here/at/all", headers=AUTH), 404, "NOT_FOUND",
                 "METHOD_NOT_FOUND")  # fmt: skip
    status_error(http.get("/a2a/rest", headers=AUTH), 404, "NOT_FOUND", "METHOD_NOT_FOUND")
    wrong = http.delete("/a2a/rest/tasks", headers=AUTH)
    status_error(wrong, 405, "METHOD_NOT_ALLOWED", "METHOD_NOT_ALLOWED")
    assert wrong.headers["Allow"] == "GET"
    assert http.get("/a2a/rest/message:send", headers=AUTH).headers["Allow"] == "POST"
    configs = http.put("/a2a/rest/tasks/x/pushNotificationConfigs", headers=AUTH)
    assert configs.status_code == 405 and configs.headers["Allow"] == "POST, GET"


# ------------------------------------------------------------------------- the pipeline


def test_the_shared_checks_in_their_order(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(config={"A2A_MAX_BODY_BYTES": 2000})
    http = app.test_client()
    status_error(
        http.post(
            "/a2a/rest/message:send",
            data=send_body(),
            headers={**JSON, "Origin": "http://evil.example"},
        ),
        403,
        "PERMISSION_DENIED",
        "FORBIDDEN_ORIGIN",
    )
    status_error(http.post("/a2a/rest/message:send", data="x" * 2001, headers=JSON), 413,
                 "INVALID_ARGUMENT", "PAYLOAD_TOO_LARGE")  # fmt: skip
    status_error(http.post("/a2a/rest/message:send", data=send_body(), headers={
        **AUTH, "Content-Type": "text/plain"}), 400, "INVALID_ARGUMENT",
        "CONTENT_TYPE_NOT_SUPPORTED")  # fmt: skip
    status_error(http.post("/a2a/rest/message:send", data='{"a": 1, "a": 2}', headers=JSON),
                 400, "INVALID_ARGUMENT", "PARSE_ERROR")  # fmt: skip
    status_error(http.post("/a2a/rest/message:send", data='{"a": NaN}', headers=JSON),
                 400, "INVALID_ARGUMENT", "PARSE_ERROR")  # fmt: skip
    status_error(http.post("/a2a/rest/message:send", data="[1]", headers=JSON),
                 400, "INVALID_ARGUMENT", "INVALID_PARAMS")  # fmt: skip
    nobody = http.post(
        "/a2a/rest/message:send", data=send_body(), headers={"Content-Type": "application/json"}
    )
    status_error(nobody, 401, "UNAUTHENTICATED", "UNAUTHENTICATED")
    assert nobody.headers["WWW-Authenticate"] == "Bearer"
    old = http.get("/a2a/rest/tasks", headers={**AUTH, "A2A-Version": "0.3"})
    status_error(old, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED")
    a2a_json = http.post(
        "/a2a/rest/message:send",
        data=send_body(),
        headers={**AUTH, "Content-Type": "application/a2a+json"},
    )
    assert a2a_json.status_code == 200
    # Nothing refused above was written.
    assert http.get("/a2a/rest/tasks", headers=AUTH).get_json()["totalSize"] == 1


def test_the_origin_gate_answers_before_the_body_is_read(app: Flask) -> None:
    exchange = app.extensions["a2a"].exchange

    def unread(size: int) -> bytes:
        raise AssertionError("the body was read")

    reply = rest.handle(HTTPRequest(
        method="POST", headers={"Origin": "http://evil.example",
                                "Content-Type": "application/json"},
        host="localhost", content_length=10, read_body=unread,
        resolve_principal=lambda: Principal("alice"),
    ), "message:send", exchange.settings, exchange.methods, exchange.extensions)  # fmt: skip
    assert reply.status == 403


def test_a_browser_preflight_names_the_rest_verbs(app: Flask) -> None:
    http = app.test_client()
    ok = http.options("/a2a/rest/tasks", headers={"Origin": "http://localhost"})
    assert ok.status_code == 204
    assert ok.headers["Access-Control-Allow-Methods"] == "GET, POST, DELETE"
    refused = http.options("/a2a/rest/tasks", headers={"Origin": "http://evil.example"})
    status_error(refused, 403, "PERMISSION_DENIED", "FORBIDDEN_ORIGIN")


def test_a_foreign_callers_writes_are_refused_and_change_nothing(http: t.Any) -> None:
    task = http.post("/a2a/rest/message:send", data=send_body(), headers=JSON).get_json()["task"]
    bob = {"Authorization": "Bearer bob", "Content-Type": "application/json"}
    configs = f"/a2a/rest/tasks/{task['id']}/pushNotificationConfigs"
    status_error(http.post(configs, data=json.dumps({"url": "https://example.com/h"}),
                           headers=bob), 404, "NOT_FOUND", "TASK_NOT_FOUND")  # fmt: skip
    status_error(http.delete(configs + "/x", headers=bob), 404, "NOT_FOUND", "TASK_NOT_FOUND")
    assert http.get(configs, headers=AUTH).get_json() == {"configs": []}


# ---------------------------------------------------------------------- mount and card


def card_of(app: Flask) -> dict[str, t.Any]:
    return t.cast(dict[str, t.Any], app.test_client().get("/.well-known/agent-card.json").json)


def test_the_card_lists_both_interfaces_json_rpc_first(app: Flask) -> None:
    assert card_of(app)["supportedInterfaces"] == [
        {"url": "http://localhost/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "http://localhost/a2a/rest", "protocolBinding": "HTTP+JSON",
         "protocolVersion": "1.0"},
    ]  # fmt: skip


def test_the_rest_path_follows_a2a_path_and_may_be_moved_or_preferred(
    make_app: t.Callable[..., Flask],
) -> None:
    app = make_app(config={"A2A_PATH": "/agents/rpc"})
    assert card_of(app)["supportedInterfaces"][1]["url"] == "http://localhost/agents/rpc/rest"
    app = make_app(config={"A2A_REST_PATH": "/api/a2a", "A2A_PREFERRED_BINDING": "HTTP+JSON"})
    interfaces = card_of(app)["supportedInterfaces"]
    assert [(i["protocolBinding"], i["url"]) for i in interfaces] == [
        ("HTTP+JSON", "http://localhost/api/a2a"),
        ("JSONRPC", "http://localhost/a2a"),
    ]
    assert app.test_client().get("/api/a2a/tasks", headers=AUTH).status_code == 200
    assert app.test_client().get("/a2a/rest/tasks", headers=AUTH).status_code == 404


def test_an_empty_rest_path_serves_no_rest_binding(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(config={"A2A_REST_PATH": ""})
    assert [i["protocolBinding"] for i in card_of(app)["supportedInterfaces"]] == ["JSONRPC"]
    answer = app.test_client().get("/a2a/rest/tasks", headers=AUTH)
    assert answer.status_code == 404 and answer.mimetype != MEDIA  # Flask's own 404


@pytest.mark.parametrize(("config", "problem"), [
    ({"A2A_REST_PATH": "rest"}, "must start with '/'"),
    ({"A2A_REST_PATH": "/a2a"}, "must differ from A2A_PATH"),
    ({"A2A_PREFERRED_BINDING": "SOAP"}, "A2A_PREFERRED_BINDING must be one of"),
    ({"A2A_PREFERRED_BINDING": "GRPC"}, "A2A_GRPC_URL is unset"),
    ({"A2A_REST_PATH": "", "A2A_PREFERRED_BINDING": "HTTP+JSON"}, "turns REST off"),
])  # fmt: skip
def test_bad_rest_settings_fail_at_startup(config: dict[str, t.Any], problem: str) -> None:
    app = Flask("bad_rest")
    app.config.update(config)
    with pytest.raises(ConfigError, match=problem):
        A2A(
            app,
            principal=lambda: Principal("alice"),
            skills=[Skill(id="echo", name="E", description="E.", handler=echo)],
        )


def test_a_host_route_under_the_rest_path_fails_at_startup() -> None:
    app = Flask("taken")
    app.add_url_rule("/a2a/rest/status", "status", lambda: "ok")
    with pytest.raises(ConfigError, match="A2A_REST_PATH"):
        A2A(
            app,
            principal=lambda: Principal("alice"),
            skills=[Skill(id="echo", name="E", description="E.", handler=echo)],
        )


def test_the_agent_role_serves_the_rest_binding(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(config={"A2A_ROLE": "agent"})
    app.add_url_rule("/admin", "admin", lambda: "secret")
    http = app.test_client()
    assert http.get("/admin").status_code == 404
    assert http.get("/a2a/rest/tasks", headers=AUTH).status_code == 200


# ---------------------------------------------------------------------------- a real socket


def test_a_rest_stream_over_a_socket(make_app: t.Callable[..., Flask]) -> None:
    app = make_app()
    with (
        werkzeug_server(app) as base,
        requests.post(
            base + "/a2a/rest/message:stream",
            data=send_body("over the wire"),
            headers=JSON,
            stream=True,
            timeout=30,
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        text = io.StringIO()
        for chunk in response.iter_content(chunk_size=None, decode_unicode=True):
            text.write(chunk)
    events = parse_sse(text.getvalue())
    assert list(events[0]) == ["task"]
    artifact = next(e["artifactUpdate"] for e in events if "artifactUpdate" in e)
    assert artifact["artifact"]["parts"] == [{"text": "over the wire"}]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
