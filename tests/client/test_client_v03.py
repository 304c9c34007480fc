"""Our client falls back to A2A v0.3 when that is all the agent's card offers (issue 24).

A live werkzeug server runs an app with v0.3 on; beside its own card it serves a v0.3-only
card (``/only03/.well-known/agent-card.json``: ``url``, ``preferredTransport``, no
``supportedInterfaces``). Every JSON-RPC method the server is asked is recorded, so the tests
see which version the client spoke.
"""

from __future__ import annotations

import io
import json
import typing as t

import pytest
from flask import Flask

from flask_a2a.client import A2AClient
from flask_a2a.client.sse import A2AClientError
from flask_a2a.client.v03 import V03Transport
from flask_a2a.protocol.errors import TaskNotCancelableError
from flask_a2a.protocol.model import Message, Task, TaskArtifactUpdateEvent, TaskState
from tests.live_server import werkzeug_server

V03 = {"A2A_PROTOCOL_VERSIONS": ["1.0", "0.3"], "A2A_ALLOW_PRIVATE_PUSH": True}


@pytest.fixture
def served(make_app: t.Callable[..., Flask]) -> t.Iterator[tuple[str, list[str]]]:
    app = make_app(config=V03)
    asked: list[str] = []
    inner = app.wsgi_app

    def record(environ: dict[str, t.Any], start_response: t.Any) -> t.Any:
        """The method of each JSON-RPC call, the body handed on unread."""
        if environ.get("PATH_INFO") == "/a2a" and environ.get("REQUEST_METHOD") == "POST":
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            asked.append(str(json.loads(body).get("method")))
        return inner(environ, start_response)

    app.wsgi_app = record  # type: ignore[method-assign]

    @app.get("/only03/.well-known/agent-card.json")
    def only03() -> dict[str, t.Any]:
        return {
            "name": "old agent",
            "protocolVersion": "0.3.0",
            "url": "/a2a",
            "preferredTransport": "JSONRPC",
            "version": "1",
            "capabilities": {},
            "defaultInputModes": [],
            "defaultOutputModes": [],
            "skills": [],
        }

    with werkzeug_server(app) as base:
        yield base, asked


def test_falls_back_to_v03_when_the_card_offers_nothing_newer(
    served: tuple[str, list[str]],
) -> None:
    base, asked = served
    with A2AClient.from_card_url(
        base + "/only03/.well-known/agent-card.json", token="alice"
    ) as client:
        assert isinstance(client.transport, V03Transport) and client.endpoint == base + "/a2a"
        task = client.send_message("hello")
        assert isinstance(task, Task) and task.status.state is TaskState.COMPLETED
        assert task.artifacts[0].parts[0].text == "hello"
        assert client.get_task(task.id, history_length=1).id == task.id
        events = list(client.send_streaming_message("streamed"))
        last = events[-1]
        assert isinstance(events[0], Task)
        assert not isinstance(last, (Message, TaskArtifactUpdateEvent))
        assert last.status.state is TaskState.COMPLETED
        made = client.create_task_push_notification_config(task.id, "http://127.0.0.1:9/h")
        assert made.task_id == task.id
        assert client.get_task_push_notification_config(task.id, made.id).url == made.url
        with pytest.raises(A2AClientError):
            client.list_tasks()  # no v0.3 method
        with pytest.raises(TaskNotCancelableError):
            client.cancel_task(task.id)  # -32002 from the server, raised as its class
    assert asked[:3] == ["message/send", "tasks/get", "message/stream"]
    assert all("/" in method for method in asked)


def test_prefers_v1_when_the_card_offers_both(served: tuple[str, list[str]]) -> None:
    base, asked = served
    with A2AClient.from_card_url(base, token="alice") as client:
        assert not isinstance(client.transport, V03Transport)
        assert isinstance(client.send_message("hi"), (Task, Message))
    assert asked == ["SendMessage"]


@pytest.mark.parametrize(
    "card,expected",
    [
        (
            {
                "supportedInterfaces": [
                    {"url": "/a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                    {"url": "/b", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                ]
            },
            None,
        ),
        (
            {
                "supportedInterfaces": [
                    {"url": "/b", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
                ]
            },
            "https://h.example/b",
        ),
        (
            {
                "protocolVersion": "0.3.0",
                "url": "https://h.example/rest",
                "preferredTransport": "HTTP+JSON",
                "additionalInterfaces": [{"url": "https://h.example/rpc", "transport": "JSONRPC"}],
            },
            "https://h.example/rpc",
        ),
        ({"protocolVersion": "0.3.0", "url": "https://h.example/rpc"}, "https://h.example/rpc"),
        (
            {
                "protocolVersion": "0.3.0",
                "url": "https://h.example/rest",
                "preferredTransport": "HTTP+JSON",
            },
            None,
        ),
        ({"protocolVersion": "0.2.5", "url": "https://h.example/rpc"}, None),
    ],
)
def test_legacy_endpoint(card: dict[str, t.Any], expected: str | None) -> None:
    from flask_a2a.client.v03 import legacy_endpoint

    assert legacy_endpoint(card, "https://h.example/.well-known/agent-card.json") == expected
