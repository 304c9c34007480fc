"""Errors of a streaming method come as a stream (issue 14 item 6).

Once a request names SendStreamingMessage or SubscribeToTask, a JSON-RPC-level refusal is
``200 text/event-stream`` holding exactly one event, the JSON-RPC error response (the same
error object the JSON path answers), then EOF — except SubscribeToTask on a terminal task,
a plain JSON -32004 before any stream opens. HTTP-level refusals (401, 403, 413, 429) and
the envelope's own errors (-32700, -32600, -32601, -32009, -32005) stay plain JSON.
"""

from __future__ import annotations

import json
import threading
import typing as t

import pytest
import requests
from flask import Flask

from flask_a2a import Skill, TaskContext
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, echo
from tests.live_server import werkzeug_server

pytestmark = [
    pytest.mark.usefixtures("binding"),
    pytest.mark.jsonrpc_only(
        "JSON-RPC streams a refusal as one SSE error event; REST answers it with its HTTP "
        "status and a google.rpc.Status body (tests/bindings/test_rest.py)"
    ),
]

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def post(
    client: A2ATestClient,
    method: str,
    params: t.Any,
    *,
    token: str = "alice",
    request_id: t.Any = "e-1",
    headers: t.Mapping[str, str] | None = None,
) -> t.Any:
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return client.post(json.dumps(body), token=token, headers=headers)


def one_error_event(response: t.Any) -> dict[str, t.Any]:
    """The single event of a streamed refusal: a whole JSON-RPC error response, then EOF."""
    assert response.status_code == 200
    assert response.mimetype == "text/event-stream"
    assert response.headers["Cache-Control"] == "no-store"
    text = response.get_data(as_text=True)
    assert text.startswith("data: ") and text.endswith("\n\n") and text.count("\n\n") == 1, text
    doc = t.cast(dict[str, t.Any], json.loads(text[len("data: ") :]))
    assert set(doc) == {"jsonrpc", "id", "error"} and doc["jsonrpc"] == "2.0"
    return doc


def json_error(response: t.Any, status: int = 200) -> dict[str, t.Any]:
    assert response.status_code == status
    assert response.mimetype == "application/json"
    doc = t.cast(dict[str, t.Any], response.get_json())
    assert set(doc) == {"jsonrpc", "id", "error"}
    return doc


class Hold:
    """A handler that keeps its run going until released (fills the run cap)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def handler(self, task: TaskContext) -> None:
        task.working()
        self.entered.set()
        while not self.release.wait(0.01):
            task.check()


def ask(task: TaskContext) -> None:
    if len(task.history) < 2:
        task.require_input("name?")


@pytest.fixture
def hold() -> t.Iterator[Hold]:
    h = Hold()
    yield h
    h.release.set()


@pytest.fixture
def eapp(make_app: t.Callable[..., Flask], hold: Hold) -> Flask:
    return make_app(
        skills=[
            Skill(id="echo", name="Echo", description="Echo.", handler=echo),
            Skill(id="ask", name="Ask", description="Ask.", handler=ask),
            Skill(id="hold", name="Hold", description="Hold.", handler=hold.handler),
        ],
        config={"A2A_MAX_CONCURRENT_RUNS_PER_OWNER": 1},
    )


@pytest.fixture
def eclient(eapp: Flask) -> A2ATestClient:
    return A2ATestClient(eapp, token="alice")


def stored_count(client: A2ATestClient, token: str = "alice") -> int:
    return int(client.rpc("ListTasks", {}, token=token).result["totalSize"])


def test_subscribe_refusals_are_one_error_event_equal_to_the_json_answer(
    eclient: A2ATestClient, eapp: Flask
) -> None:
    done = eclient.send("x", skill="echo")["task"]
    paused = eclient.send(skill="ask")["task"]
    # (SubscribeToTask params, token, the same refusal on the JSON path)
    cases: list[tuple[t.Any, str, tuple[str, t.Any]]] = [
        ({"id": "no-such-task"}, "alice", ("GetTask", {"id": "no-such-task"})),
        ({"id": paused["id"]}, "bob", ("GetTask", {"id": paused["id"]})),
        ({"id": paused["id"]}, "alice-t2", ("GetTask", {"id": paused["id"]})),
        ({"id": paused["id"]}, "alice-read", ("GetTask", {"id": paused["id"]})),
        ({"id": 5}, "alice", ("GetTask", {"id": 5})),
        ({}, "alice", ("GetTask", {})),
    ]
    for params, token, (json_method, json_params) in cases:
        streamed = one_error_event(post(eclient, "SubscribeToTask", params, token=token))
        plain = json_error(post(eclient, json_method, json_params, token=token))
        assert streamed == plain, (params, token)
        assert streamed["id"] == "e-1"
    assert one_error_event(post(eclient, "SubscribeToTask", {"id": "nope"}))["error"] == {
        "code": -32001,
        "message": "Task not found",
        "data": [
            {
                "@type": ERROR_INFO,
                "reason": "TASK_NOT_FOUND",
                "domain": "a2a-protocol.org",
                "metadata": {"taskId": "nope"},
            }
        ],
    }
    # A terminal task: a plain application/json -32004, no stream (issue 24 part 3; the
    # SDK's and the conformance suite's STREAM-SUB-003 reading).
    terminal = json_error(post(eclient, "SubscribeToTask", {"id": done["id"]}, request_id=7))
    assert terminal == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32004,
            "message": "task is TASK_STATE_COMPLETED; there is nothing to subscribe to",
            "data": [
                {
                    "@type": ERROR_INFO,
                    "reason": "UNSUPPORTED_OPERATION",
                    "domain": "a2a-protocol.org",
                    "metadata": {"taskId": done["id"]},
                }
            ],
        },
    }
    exchange = eapp.extensions["a2a"].exchange
    assert exchange.seats.count("alice") == 0 and exchange.bus.subscriber_count(paused["id"]) == 0
    assert eclient.rpc("GetTask", {"id": paused["id"]}).result["status"]["state"] == (
        "TASK_STATE_INPUT_REQUIRED"
    )


def test_send_streaming_refusals_equal_send_message_refusals(
    eclient: A2ATestClient, eapp: Flask, hold: Hold
) -> None:
    done = eclient.send("x", skill="echo")["task"]
    paused = eclient.send(skill="ask")["task"]
    message = A2ATestClient.message
    cases: list[tuple[t.Any, str]] = [
        ({"message": {"role": "ROLE_USER"}}, "alice"),
        ({"message": message("x", skill="echo"), "configuration": {"historyLength": -1}}, "alice"),
        ({"message": message("x", task_id="no-such-task")}, "alice"),
        ({"message": message("x", task_id=paused["id"])}, "bob"),
        ({"message": message("x", task_id=done["id"])}, "alice"),
        ({"message": message("x", task_id=paused["id"], context_id="other")}, "alice"),
        (
            {
                "message": message("x", skill="echo"),
                "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1/hook"}},
            },
            "alice",
        ),
        (
            {
                "message": message("x", skill="echo"),
                "configuration": {
                    "taskPushNotificationConfig": {"url": "https://example.com/h", "taskId": "t"}
                },
            },
            "alice",
        ),
    ]
    before = stored_count(eclient)
    for params, token in cases:
        streamed = one_error_event(post(eclient, "SendStreamingMessage", params, token=token))
        plain = json_error(post(eclient, "SendMessage", params, token=token))
        assert streamed == plain, params
        assert streamed["error"]["code"] in (-32001, -32004, -32602), streamed
    assert stored_count(eclient) == before  # nothing written by any refusal

    # The owner's run cap (1): the one run it allows is busy.
    eclient.send(skill="hold", configuration={"returnImmediately": True})
    assert hold.entered.wait(5)
    exchange = eapp.extensions["a2a"].exchange
    slots = exchange.slots.held("alice")
    params = {"message": message("x", skill="echo")}
    streamed = one_error_event(post(eclient, "SendStreamingMessage", params))
    assert streamed == json_error(post(eclient, "SendMessage", params))
    assert streamed["error"]["message"] == "maximum concurrent task runs reached"
    assert exchange.slots.held("alice") == slots and exchange.seats.count("alice") == 0
    hold.release.set()

    exchange.shutdown(timeout=5)
    streamed = one_error_event(post(eclient, "SendStreamingMessage", params, request_id=None))
    assert streamed == json_error(post(eclient, "SendMessage", params, request_id=None))
    assert streamed["id"] is None
    assert streamed["error"]["message"] == "server is shutting down; no new runs are accepted"


def test_an_unexpected_failure_in_a_streaming_method_is_a_streamed_internal_error(
    eclient: A2ATestClient, eapp: Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = eapp.extensions["a2a"].exchange.store

    def broken(*args: t.Any, **kwargs: t.Any) -> t.Any:
        raise RuntimeError("database is on fire")

    monkeypatch.setattr(store, "get_task", broken)
    streamed = one_error_event(post(eclient, "SubscribeToTask", {"id": "t-1"}))
    assert streamed == json_error(post(eclient, "GetTask", {"id": "t-1"}))
    assert streamed["error"]["code"] == -32603
    assert "fire" not in json.dumps(streamed)


def test_http_level_and_envelope_refusals_stay_plain_json(
    make_app: t.Callable[..., Flask], gate: Gate
) -> None:
    app = make_app(
        skills=[Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler)],
        config={"A2A_MAX_STREAM_SEATS_PER_OWNER": 1, "A2A_MAX_BODY_BYTES": 2048},
    )
    client = A2ATestClient(app, token="alice")
    task = client.send(skill="gate", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(5)
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task["id"]}}
    )
    holder = client.client.post(
        client.path, data=body, headers=client.headers(), buffered=False
    )  # holds alice's one seat
    assert next(iter(holder.response))
    for method, params in [
        ("SubscribeToTask", {"id": task["id"]}),
        ("SendStreamingMessage", {"message": client.message(skill="gate")}),
    ]:
        seat = json_error(post(client, method, params), 429)  # the seat refusal
        assert seat["error"]["code"] == -31429
        assert (
            json_error(post(client, method, params, token="nobody"), 401)["error"]["code"] == -31401
        )
        version = post(client, method, params, headers={"A2A-Version": "0.3"})
        assert json_error(version)["error"]["code"] == -32009
        big = post(client, method, {"pad": "x" * 4096, **params})
        assert json_error(big, 413)["error"]["code"] == -31413
        foreign = post(client, method, params, headers={"Origin": "https://evil.example"})
        assert json_error(foreign, 403)["error"]["code"] == -31403
        plain = post(client, method, params, headers={"Content-Type": "text/plain"})
        assert json_error(plain)["error"]["code"] == -32005
    assert (
        json_error(client.post(b'{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask"'))["error"][
            "code"
        ]
        == -32700
    )
    no_version = json.dumps({"id": 1, "method": "SubscribeToTask", "params": {"id": "x"}})
    assert json_error(client.post(no_version))["error"]["code"] == -32600
    assert json_error(post(client, "SubscribeToTasks", {"id": "x"}))["error"]["code"] == -32601
    # "params" that is not an object is the envelope's error (read before the method).
    assert json_error(post(client, "SubscribeToTask", []))["error"]["code"] == -32602
    assert client.rpc("ListTasks", {}).result["totalSize"] == 1
    holder.close()
    gate.release.set()


def test_an_sse_only_reader_reads_task_not_found_over_a_socket(
    make_app: t.Callable[..., Flask],
) -> None:
    """What a browser's EventSource (or any SSE-only client) does: read events, never JSON."""
    app = make_app()
    with werkzeug_server(app) as base:
        body = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "SubscribeToTask",
            "params": {"id": "no-such-task"},
        }
        headers = {"Authorization": "Bearer alice", "Accept": "text/event-stream"}
        with requests.post(
            base + "/a2a", json=body, headers=headers, stream=True, timeout=10
        ) as response:
            assert response.status_code == 200
            assert response.headers["Content-Type"].startswith("text/event-stream")
            lines = [line for line in response.iter_lines(decode_unicode=True)]
    data = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
    assert len(data) == 1 and [line for line in lines if line] == ["data: " + data[0]]
    event = json.loads(data[0])
    assert event["id"] == 3 and event["error"]["code"] == -32001
    assert event["error"]["data"][0]["metadata"] == {"taskId": "no-such-task"}
