"""A2A 1.0.1's corrections of 1.0.0, one test each (docs/errors.md lists them), and the wire
corners of issue 24 part 3: SubscribeToTask on a terminal task is plain JSON, every answer under
the REST prefix is a google.rpc.Status body. Test client on both bindings, and a live gevent
server for the corners."""

from __future__ import annotations

import json
import os
import typing as t

import pytest
import requests

from flask_a2a.bindings import rest
from flask_a2a.protocol.errors import (
    ContentTypeNotSupportedError,
    InvalidAgentResponseError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from flask_a2a.testing import A2ATestClient
from tests.live_server import gunicorn_server
from tests.wire_app import create_app

pytestmark = pytest.mark.usefixtures("binding")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AUTH = {"Authorization": "Bearer alice-token"}
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


@pytest.fixture
def client() -> A2ATestClient:
    return A2ATestClient(create_app({"A2A_CHECK_MEDIA_TYPES": "refuse"}), token="alice-token")


def task_of(client: A2ATestClient, skill: str, text: str = "hi") -> dict[str, t.Any]:
    return t.cast(dict[str, t.Any], client.send(text, skill=skill)["task"])


# ----------------------------------------------------------------- §5.4: the error mapping


@pytest.mark.jsonrpc_only("the HTTP status table of the REST binding")
def test_5_4_error_mapping_is_the_1_0_1_table() -> None:
    assert rest.status_of(TaskNotCancelableError()) == (400, "FAILED_PRECONDITION")  # was 409
    assert rest.status_of(ContentTypeNotSupportedError()) == (400, "INVALID_ARGUMENT")  # was 415
    for error in (PushNotificationNotSupportedError(), UnsupportedOperationError(),
                  VersionNotSupportedError()):  # fmt: skip
        assert rest.status_of(error) == (400, "FAILED_PRECONDITION")  # was UNIMPLEMENTED
    assert rest.status_of(InvalidAgentResponseError()) == (500, "INTERNAL")  # was 502


def test_5_4_not_cancelable_and_content_type_answer_400(client: A2ATestClient) -> None:
    done = task_of(client, "echo")
    refused = client.rpc("CancelTask", {"id": done["id"]})
    assert refused.code == -32002
    wrong = client.rpc("SendMessage", {"message": client.message("hi", skill="json_only")})
    assert wrong.code == -32005
    if client.binding == "rest":
        assert (refused.status, refused.json["rest"]["status"]) == (400, "FAILED_PRECONDITION")
        assert (wrong.status, wrong.json["rest"]["status"]) == (400, "INVALID_ARGUMENT")
        wrong_type = client.rest("SendMessage", {"message": client.message("hi", skill="echo")},
                                 headers={"Content-Type": "text/plain"})  # fmt: skip
        assert wrong_type.status_code == 400
    else:
        assert refused.status == wrong.status == 200  # JSON-RPC errors travel with HTTP 200


# ------------------------------------------------------- error details: @type on every one


def test_every_error_detail_carries_its_type(client: A2ATestClient) -> None:
    done = task_of(client, "fail")
    answers = [
        client.rpc("GetTask", {"id": "nope"}),
        client.rpc("CancelTask", {"id": done["id"]}),
        client.rpc("SendMessage", {"message": {"role": "ROLE_USER", "parts": []}}),
        client.rpc("SendMessage", {"message": client.message("x", skill="json_only")}),
        client.rpc("SendMessage", {"message": client.message("x", task_id=done["id"])}),
        client.rpc("ListTasks", {"pageSize": 0}),
        client.rpc("GetExtendedAgentCard", {}),
        client.rpc("ListTasks", {}, headers={"A2A-Version": "9.0"}),
    ]
    for answer in answers:
        details = answer.error["data"]
        assert details and all(isinstance(d, dict) and "@type" in d for d in details), answer.json
        assert details[0]["@type"] == ERROR_INFO  # an A2A error leads with its ErrorInfo


# ------------------------------------------------------------ application/a2a+json


def test_a2a_json_is_read_on_both_bindings_and_answered_on_rest(client: A2ATestClient) -> None:
    params = {"message": client.message("hi", skill="echo")}
    if client.binding == "rest":
        answer = client.rest("SendMessage", params,
                             headers={"Content-Type": "application/a2a+json"})  # fmt: skip
        assert answer.status_code == 200 and answer.mimetype == "application/a2a+json"
    else:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params})
        answer = client.post(body, headers={"Content-Type": "application/a2a+json"})
        assert answer.status_code == 200 and "result" in answer.get_json()
    refused = client.post("{}", headers={"Content-Type": "text/plain"})
    assert refused.get_json()["error"]["message"] == (
        "Incompatible content types: send application/json or application/a2a+json"
    )


# ------------------------------------------------------------ tenant, a routing label


def test_tenant_is_a_routing_label_not_a_key(client: A2ATestClient) -> None:
    task = task_of(client, "echo")
    # The label is handed to the method; visibility still follows the principal's tenant.
    labelled = client.rpc("GetTask", {"id": task["id"], "tenant": "acme"})
    assert labelled.result["id"] == task["id"]
    if client.binding == "rest":
        through_path = client.app.test_client().get(f"/a2a/rest/acme/tasks/{task['id']}",
                                                    headers=AUTH)  # fmt: skip
        assert through_path.status_code == 200
    assert client.rpc("GetTask", {"id": task["id"], "tenant": "acme"}, token="bob-token").code == (
        -32001  # a label never opens another owner's task
    )


# ------------------------------------------------------- a message to a FAILED task


def test_a_message_to_a_failed_task_is_unsupported_operation(client: A2ATestClient) -> None:
    failed = task_of(client, "fail")
    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    again = client.rpc("SendMessage", {"message": client.message("again", task_id=failed["id"])})
    assert again.code == -32004
    assert again.error["message"] == "task is TASK_STATE_FAILED; a follow-up needs a new task"
    # Nothing written: still the failed task, its history as it was.
    assert len(client.rpc("GetTask", {"id": failed["id"]}).result["history"]) == len(
        failed["history"]
    )


# ------------------------------------------------ §7.6.4: in-task authorization scope


def test_auth_required_grants_nothing_by_itself(client: A2ATestClient) -> None:
    paused = client.send(data={}, skill="sign_in")["task"]
    assert paused["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    resume = client.message(data={"ok": True}, task_id=paused["id"])
    # Another caller cannot resume it: the resuming message is checked like any request.
    assert client.rpc("SendMessage", {"message": resume}, token="bob-token").code == -32001
    assert client.rpc("GetTask", {"id": paused["id"]}).result["status"]["state"] == (
        "TASK_STATE_AUTH_REQUIRED"
    )
    # The owner resumes it; the run gets that request's credentials, and they are not stored.
    done = client.rpc("SendMessage", {"message": resume},
                      headers={"X-API-Key": "second-key"}).result["task"]  # fmt: skip
    assert done["artifacts"][0]["parts"][0]["text"] == "key=second-key"
    stored = client.rpc("GetTask", {"id": paused["id"]}).result
    assert "second-key" not in json.dumps(stored["history"])  # only the handler's own artifact
    assert "X-API-Key" not in json.dumps(stored)


# ---------------------------------------------- SubscribeToTask: terminal vs unknown


def test_subscribe_to_a_terminal_task_is_plain_json_before_any_stream(
    client: A2ATestClient,
) -> None:
    done = task_of(client, "echo")
    answer = client.rpc("SubscribeToTask", {"id": done["id"]})
    assert answer.response.mimetype == ("application/a2a+json" if client.binding == "rest"
                                        else "application/json")  # fmt: skip
    assert answer.code == -32004
    assert answer.error["message"] == (
        "task is TASK_STATE_COMPLETED; there is nothing to subscribe to"
    )
    assert answer.status == (400 if client.binding == "rest" else 200)


@pytest.mark.jsonrpc_only("REST answers every refusal before a stream as a plain error")
def test_subscribe_to_an_unknown_task_keeps_its_one_sse_error_event(
    client: A2ATestClient,
) -> None:
    for params, token in (({"id": "nope"}, "alice-token"),
                          ({"id": task_of(client, "echo")["id"]}, "bob-token")):  # fmt: skip
        response, events = client.stream("SubscribeToTask", params, token=token)
        assert response.mimetype == "text/event-stream"
        assert [e["error"]["code"] for e in events] == [-32001]


# --------------------------------------------------------- REST: no HTML under the prefix


@pytest.mark.jsonrpc_only("HTTP corners of the REST prefix (no JSON-RPC shape)")
@pytest.mark.parametrize(("method", "path", "status", "grpc", "reason"), [
    ("GET", "/a2a/rest/", 404, "NOT_FOUND", "METHOD_NOT_FOUND"),
    ("GET", "/a2a/rest//tasks", 404, "NOT_FOUND", "METHOD_NOT_FOUND"),
    ("GET", "/a2a/rest/tasks/", 400, "INVALID_ARGUMENT", "INVALID_PARAMS"),  # an empty id
    ("GET", "/a2a/rest/acme//tasks", 404, "NOT_FOUND", "METHOD_NOT_FOUND"),
    ("PUT", "/a2a/rest/tasks", 405, "METHOD_NOT_ALLOWED", "METHOD_NOT_ALLOWED"),
    ("TRACE", "/a2a/rest/tasks", 405, "METHOD_NOT_ALLOWED", "METHOD_NOT_ALLOWED"),
    ("PROPFIND", "/a2a/rest/tasks/x", 405, "METHOD_NOT_ALLOWED", "METHOD_NOT_ALLOWED"),
    # a percent-encoded newline in a segment: werkzeug routes it to the binding all the same
    ("GET", "/a2a/rest/tasks%0A", 404, "NOT_FOUND", "METHOD_NOT_FOUND"),
    ("PUT", "/a2a/rest/tasks/%0A", 405, "METHOD_NOT_ALLOWED", "METHOD_NOT_ALLOWED"),
])  # fmt: skip
def test_every_answer_under_the_rest_prefix_is_a_status_body(
    client: A2ATestClient, method: str, path: str, status: int, grpc: str, reason: str
) -> None:
    response = client.app.test_client().open(path, method=method, headers=AUTH)
    assert response.status_code == status
    assert response.mimetype == "application/a2a+json"
    error = response.get_json()["error"]
    assert (error["code"], error["status"], error["details"][0]["reason"]) == (status, grpc, reason)
    if status == 405:
        assert response.headers["Allow"] == "GET"
    # Paths outside the prefix keep the host's own (HTML) answers.
    assert client.app.test_client().get("/elsewhere/").mimetype == "text/html"


@pytest.mark.jsonrpc_only("one live server, both bindings")
def test_the_corners_over_a_live_gevent_server() -> None:
    with gunicorn_server("tests.wire_app:create_app()", chdir=ROOT) as url:
        with requests.Session() as http:
            http.headers.update(AUTH)
            for method, path, status in (("GET", "/a2a/rest/", 404),
                                         ("GET", "/a2a/rest//tasks", 404),
                                         ("PROPFIND", "/a2a/rest/tasks", 405)):  # fmt: skip
                answer = http.request(method, url + path, allow_redirects=False, timeout=30)
                assert answer.status_code == status
                assert answer.headers["Content-Type"] == "application/a2a+json"
                assert "error" in answer.json()
            sent = http.post(url + "/a2a/rest/message:send", timeout=30, json={"message": {
                "messageId": "l-1", "role": "ROLE_USER", "parts": [{"text": "hi"}],
                "metadata": {"skill": "echo"}}}).json()["task"]  # fmt: skip
            subscribe = {"jsonrpc": "2.0", "id": 5, "method": "SubscribeToTask",
                         "params": {"id": sent["id"]}}  # fmt: skip
            plain = http.post(url + "/a2a", json=subscribe, timeout=30)
            assert plain.headers["Content-Type"] == "application/json"
            assert plain.json()["error"]["code"] == -32004
            subscribe["params"] = {"id": "nope"}
            streamed = http.post(url + "/a2a", json=subscribe, timeout=30)
            assert streamed.headers["Content-Type"].startswith("text/event-stream")
            assert json.loads(streamed.text.removeprefix("data: "))["error"]["code"] == -32001
