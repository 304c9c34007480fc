"""Our client and CLI speak every binding (issue 24 part 4): the binding picked from the card as
the official SDK picks it, ``binding=`` / ``--binding``, a URL under ``/a2a/rest`` spoken as
HTTP+JSON; and ``parse_notification``, the receiving end of push notifications. Over real
sockets: werkzeug, and ``gunicorn -k gevent``."""

from __future__ import annotations

import io
import json
import os
import threading
import typing as t

import pytest
import requests
from flask import Flask, request

from flask_a2a import (
    A2AClient,
    A2AClientError,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
)
from flask_a2a.cli import a2a_cli
from flask_a2a.client import NotificationRejected, bindings, parse_notification
from flask_a2a.client.bindings import Interface, choose
from flask_a2a.client.jsonrpc import JsonRpcTransport
from flask_a2a.client.rest import RestTransport
from flask_a2a.protocol.model import TaskArtifactUpdateEvent, TaskStatusUpdateEvent
from tests import stack
from tests.conftest import wait_for
from tests.live_server import gunicorn_server, werkzeug_server
from tests.wire_app import create_app

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CARD_URL = "https://agent.example/.well-known/agent-card.json"


def card(*interfaces: dict[str, t.Any]) -> dict[str, t.Any]:
    return {"name": "x", "supportedInterfaces": list(interfaces)}


JSONRPC = {"url": "/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
REST = {"url": "/a2a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}


# ------------------------------------------------------------------ choosing an interface


def test_the_cards_first_interface_the_client_speaks_wins() -> None:
    assert choose(card(JSONRPC, REST), CARD_URL) == Interface(
        "https://agent.example/a2a", "JSONRPC"
    )
    assert choose(card(REST, JSONRPC), CARD_URL).binding == "HTTP+JSON"
    old_grpc = {"url": "agent.example:50051", "protocolBinding": "GRPC", "protocolVersion": "0.3"}
    old = {**REST, "protocolVersion": "0.3"}
    assert choose(card(old_grpc, old, JSONRPC), CARD_URL).binding == "JSONRPC"  # 1.x only
    assert choose(card(JSONRPC, REST), CARD_URL, "rest").url == "https://agent.example/a2a/rest"
    assert choose(card(JSONRPC, REST), CARD_URL, "http+json").binding == "HTTP+JSON"
    with pytest.raises(A2AClientError, match="offers no HTTP\\+JSON 1.x interface"):
        choose(card(JSONRPC), CARD_URL, "HTTP+JSON")
    with pytest.raises(ValueError, match="unknown binding 'soap'"):
        choose(card(JSONRPC), CARD_URL, "soap")
    # The interface's tenant is what the client must send (spec 1.0.1, tenant as a label).
    tenanted = choose(card({**REST, "tenant": "acme"}), CARD_URL)
    assert tenanted.tenant == "acme"


def test_a_client_takes_its_own_transport_registry() -> None:
    """A client's ``transports=`` is the bindings it speaks and the class that speaks each: it
    picks from the card among them, talks through them, and leaves the module's registry (what
    every other client uses) as it was."""
    seen: list[str] = []
    before = dict(bindings.TRANSPORTS)

    class Recording(RestTransport):
        def call(self, method: str, params: dict[str, t.Any], timeout: t.Any) -> t.Any:
            seen.append(method)
            return super().call(method, params, timeout)

    own: dict[str, bindings.TransportClass] = {"HTTP+JSON": Recording}
    with werkzeug_server(create_app()) as base:
        # The card lists JSON-RPC first; this client speaks HTTP+JSON alone, so that is chosen.
        with A2AClient.from_card_url(base, token="alice-token", transports=own) as client:
            assert isinstance(client.transport, Recording) and client.binding == "HTTP+JSON"
            assert client.call("echo", "hi").status.state is TaskState.COMPLETED
            assert seen == ["SendMessage"]
        told_none = A2AClient(base + "/a2a/rest", token="alice-token", transports=own)
        assert told_none.binding == "HTTP+JSON"  # the first of its registry, not JSON-RPC
        with pytest.raises(ValueError, match="unknown binding 'jsonrpc': use one of HTTP\\+JSON"):
            A2AClient(base + "/a2a", transports=own, binding="jsonrpc")
        with A2AClient.from_card_url(base, token="alice-token") as default:
            assert type(default.transport) is JsonRpcTransport
            assert default.call("echo", "hi").status.state is TaskState.COMPLETED
    assert seen == ["SendMessage"]  # the default client went nowhere near the other registry
    assert bindings.TRANSPORTS == before and bindings.TRANSPORTS["HTTP+JSON"] is RestTransport


# ------------------------------------------------------------------ a live agent


@pytest.fixture(scope="module")
def gevent_agent() -> t.Iterator[str]:
    env = {"FLASK_A2A_PREFERRED_BINDING": "HTTP+JSON"}
    with gunicorn_server("tests.wire_app:create_app()", chdir=ROOT, env=env) as url:
        yield url


def test_a_card_listing_rest_first_is_spoken_over_rest(gevent_agent: str) -> None:
    with A2AClient.from_card_url(gevent_agent, token="alice-token") as client:
        assert client.binding == "HTTP+JSON" and client.endpoint == gevent_agent + "/a2a/rest"
        every_method_works(client)
    with A2AClient.from_card_url(gevent_agent, token="alice-token", binding="JSONRPC") as client:
        assert client.endpoint == gevent_agent + "/a2a"
        every_method_works(client)


def test_connect_to_the_rest_url_speaks_rest(gevent_agent: str) -> None:
    with A2AClient.connect(gevent_agent + "/a2a/rest", token="alice-token") as client:
        assert client.binding == "HTTP+JSON"
        assert client.call("echo", "hi").status.state is TaskState.COMPLETED
    # Told nothing and given no card to read, a client speaks JSON-RPC and says what it met.
    plain = A2AClient(gevent_agent + "/a2a/rest", token="alice-token")
    with pytest.raises(A2AClientError, match="not JSON-RPC but HTTP\\+JSON: use binding="):
        plain.call("echo", "hi")
    told = A2AClient(gevent_agent + "/a2a/rest", token="alice-token", binding="rest")
    assert told.call("echo", "hi").status.state is TaskState.COMPLETED


def every_method_works(client: A2AClient) -> None:
    task = client.call("echo", "hello")
    assert task.status.state is TaskState.COMPLETED
    assert task.artifacts[0].parts[0].text == "hello"
    assert client.get_task(task.id, history_length=0).history == ()
    page = client.list_tasks(page_size=1, include_artifacts=True)
    assert page.page_size == 1 and page.tasks[0].artifacts
    with pytest.raises(TaskNotCancelableError) as caught:
        client.cancel_task(task.id)
    assert caught.value.metadata == {"taskId": task.id}
    with pytest.raises(TaskNotFoundError):
        client.get_task("no-such-task")
    with pytest.raises(TaskNotFoundError):
        client.subscribe_to_task("no-such-task")
    with client.stream_call("echo", "streamed") as events:
        seen = list(events)
    assert isinstance(seen[0], Task) and events.state is TaskState.COMPLETED
    assert [e.artifact.parts[0].text for e in seen if isinstance(e, TaskArtifactUpdateEvent)] == [
        "streamed"
    ]
    paused = client.call("sign_in", data={})
    assert paused.status.state is TaskState.AUTH_REQUIRED
    config = client.create_task_push_notification_config(
        paused.id, "http://127.0.0.1:9/hook", token="tok", config_id="c1"
    )
    assert config.id == "c1"
    assert client.get_task_push_notification_config(paused.id, "c1").url == config.url
    assert [c.id for c in client.list_task_push_notification_configs(paused.id).configs] == ["c1"]
    client.delete_task_push_notification_config(paused.id, "c1")
    assert client.list_task_push_notification_configs(paused.id).configs == ()
    with client.subscribe_to_task(paused.id) as watch:
        assert isinstance(next(watch), Task)
        client.cancel_task(paused.id)
        assert [e for e in watch if isinstance(e, TaskStatusUpdateEvent)][-1].status.state is (
            TaskState.CANCELED
        )


def test_a_tenant_goes_where_the_binding_carries_it() -> None:
    app = create_app()
    seen: list[tuple[str, t.Any]] = []
    inner = app.wsgi_app

    def record(environ: dict[str, t.Any], start_response: t.Any) -> t.Any:
        """Keep each request's path and body, and hand the body on unread."""
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(body)
        seen.append((environ["PATH_INFO"], json.loads(body) if body else None))
        return inner(environ, start_response)

    app.wsgi_app = record  # type: ignore[method-assign]

    with werkzeug_server(app) as base:
        rest = A2AClient(base + "/a2a/rest", token="alice-token", binding="rest")
        rest.use(Interface(base + "/a2a/rest", "HTTP+JSON", tenant="acme"))
        assert rest.call("echo", "hi").status.state is TaskState.COMPLETED
        rest.list_tasks()
        assert [path for path, _ in seen] == ["/a2a/rest/acme/message:send", "/a2a/rest/acme/tasks"]
        seen.clear()
        rpc = A2AClient(base + "/a2a", token="alice-token")
        rpc.use(Interface(base + "/a2a", "JSONRPC", tenant="acme"))
        rpc.list_tasks()
        assert seen[0][1]["params"] == {"tenant": "acme"}
        seen.clear()  # the caller's own tenant= wins over the interface's
        mine = A2AClient(base + "/a2a", token="alice-token", tenant="mine")
        mine.use(Interface(base + "/a2a", "JSONRPC", tenant="acme"))
        mine.list_tasks()
        assert seen[0][1]["params"] == {"tenant": "mine"}
        app.extensions["a2a"].exchange.shutdown(5)


# ------------------------------------------------------------------ the CLI


def test_flask_a2a_call_speaks_the_rest_url_and_takes_binding(gevent_agent: str) -> None:
    runner = stack.cli_runner(Flask("cli"))
    at_rest = runner.invoke(a2a_cli, ["call", gevent_agent + "/a2a/rest", "echo", "--text", "hi",
                                      "--token", "alice-token"])  # fmt: skip
    assert at_rest.exit_code == 0, at_rest.output
    assert at_rest.output.splitlines()[1:] == ["  artifact echo:", "    hi"]
    for binding in ("rest", "JSONRPC"):
        told = runner.invoke(a2a_cli, ["call", gevent_agent, "echo", "--text", "x", "--stream",
                                       "--binding", binding, "--token", "alice-token"])  # fmt: skip
        assert told.exit_code == 0, told.output
        assert told.output.splitlines()[-1].split(None, 1)[1] == "COMPLETED"
    wrong = runner.invoke(a2a_cli, ["call", gevent_agent, "echo", "--binding", "soap"])
    assert wrong.exit_code == 1 and "unknown binding 'soap'" in wrong.output


# ------------------------------------------------------------------ push notifications


class Receiver:
    """A host that is a client too: its webhook route checks the token and keeps the events."""

    def __init__(self, token: str) -> None:
        self.events: list[t.Any] = []
        self.refused: list[int] = []
        self.final = threading.Event()
        self.app = Flask("receiver")

        @self.app.post("/hook")
        def hook() -> tuple[str, int]:
            try:
                event = parse_notification(request, token=token)
            except NotificationRejected as exc:
                self.refused.append(exc.status)
                return "", exc.status
            self.events.append(event)
            if isinstance(event, TaskStatusUpdateEvent) and event.status.state.terminal:
                self.final.set()
            return "", 204


def test_a_push_notification_is_parsed_and_its_token_checked() -> None:
    agent = create_app()
    good, wrong = Receiver("s3cret"), Receiver("other")
    with werkzeug_server(agent) as base, werkzeug_server(good.app) as good_url, \
            werkzeug_server(wrong.app) as wrong_url:  # fmt: skip
        client = A2AClient(base + "/a2a", token="alice-token")
        for url in (good_url, wrong_url):
            task = client.call("echo", "pushed", return_immediately=True,
                               push_config={"url": url + "/hook", "token": "s3cret"})  # fmt: skip
            assert task.id
        assert good.final.wait(10)
        assert wait_for(lambda: len(wrong.refused) >= 1)
        agent.extensions["a2a"].exchange.shutdown(5)
    assert all(event.task_id == good.events[-1].task_id for event in good.events[1:])
    assert good.events[-1].status.state is TaskState.COMPLETED
    assert set(wrong.refused) == {401} and not wrong.events


def test_parse_notification_refuses_what_is_not_a_notification() -> None:
    app = Flask("receiver")
    body = json.dumps(
        {
            "statusUpdate": {
                "taskId": "t",
                "contextId": "c",
                "status": {"state": "TASK_STATE_WORKING", "timestamp": "2026-12-03T10:00:00Z"},
            }
        }
    )
    headers = {"A2A-Notification-Token": "tok", "Content-Type": "application/json"}
    with app.test_request_context("/hook", method="POST", data=body, headers=headers):
        event = parse_notification(request, token="tok")
        assert isinstance(event, TaskStatusUpdateEvent) and event.status.state is TaskState.WORKING
    sdk_style = {"X-A2A-Notification-Token": "tok"}  # the header the official SDKs send
    with app.test_request_context("/hook", method="POST", data=body, headers=sdk_style):
        sdk_event = parse_notification(request, token="tok")
        assert isinstance(sdk_event, TaskStatusUpdateEvent) and sdk_event.task_id == "t"
    cases: list[tuple[dict[str, str], str, int, dict[str, t.Any]]] = [
        ({}, body, 401, {}),
        ({"A2A-Notification-Token": "nope"}, body, 401, {}),
        (headers, "{not json", 400, {}),
        (headers, json.dumps({"task": {}, "message": {}}), 400, {}),
        (headers, json.dumps({"kind": "status-update"}), 400, {}),
        (headers, body, 413, {"max_bytes": 10}),
        ({**headers, "Authorization": "Bearer x"}, body, 401, {"authorization": "Bearer y"}),
    ]
    for sent, data, status, options in cases:
        with app.test_request_context("/hook", method="POST", data=data, headers=sent):
            with pytest.raises(NotificationRejected) as caught:
                parse_notification(request, token="tok", **options)
            assert caught.value.status == status, (sent, data)


def test_requests_is_the_transport() -> None:
    # The transports go through the client's one requests.Session (its pool), with the
    # client's own headers and auth on each request, never on the session.
    session = requests.Session()
    client = A2AClient("http://127.0.0.1:9/a2a/rest", session=session, binding="rest")
    assert client.transport.session.session is session  # type: ignore[attr-defined]
