"""``A2AClient(binding="grpc")`` and ``flask a2a call --binding grpc``: every method over the
gRPC transport, the server's errors as their classes, and gRPC chosen from a card."""

from __future__ import annotations

import typing as t

import pytest
import requests
from flask import Flask, jsonify

from flask_a2a import Skill
from flask_a2a.cli import a2a_cli
from flask_a2a.client.a2a_client import A2AClient, A2AClientError
from flask_a2a.protocol.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnauthenticatedError,
    UnsupportedOperationError,
)
from flask_a2a.protocol.model import Task, TaskState, TaskStatusUpdateEvent
from tests import stack
from tests.conftest import Gate, echo, wait_for
from tests.grpc.conftest import grpc_server
from tests.live_server import free_port, werkzeug_server


@pytest.fixture
def agent(make_app: t.Callable[..., Flask], gate: Gate) -> t.Iterator[tuple[Flask, str]]:
    app = make_app(
        skills=[
            Skill(id="echo", name="Echo", description="Echo.", handler=echo),
            Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler),
        ],
        extended_card=lambda principal: {"name": f"for {principal.owner}"},
    )
    with grpc_server(app) as server:
        yield app, server.address


def test_every_method_over_grpc(agent: tuple[Flask, str], gate: Gate) -> None:
    app, address = agent
    with A2AClient(address, binding="grpc", token="alice") as client:
        assert client.binding == "GRPC" and client.endpoint == address
        task = client.call("echo", "hello")
        assert task.status.state == TaskState.COMPLETED
        assert task.artifacts[0].parts[0].text == "hello"
        assert client.get_task(task.id, history_length=0).history == ()
        page = client.list_tasks(page_size=10)
        assert [t.id for t in page.tasks] == [task.id] and page.total_size == 1
        with pytest.raises(TaskNotCancelableError):
            client.cancel_task(task.id)
        with pytest.raises(TaskNotFoundError) as unknown:
            client.get_task("no-such-task")
        assert unknown.value.metadata == {"taskId": "no-such-task"}
        with pytest.raises(InvalidParamsError) as bad:
            client.list_tasks(page_token="not-ours")
        assert bad.value.field_violations == [("pageToken", "not a token this server issued")]

        config = client.create_task_push_notification_config(
            task.id, "https://example.com/hook", token="t0k", config_id="c1"
        )
        assert (config.id, config.url, config.token) == ("c1", "https://example.com/hook", "t0k")
        assert client.get_task_push_notification_config(task.id, "c1") == config
        assert client.list_task_push_notification_configs(task.id).configs == (config,)
        client.delete_task_push_notification_config(task.id, "c1")
        assert client.list_task_push_notification_configs(task.id).configs == ()
        assert client.get_extended_agent_card() == {"name": "for alice"}

        with client.stream_call("echo", "streamed") as events:
            kinds = [type(e).__name__ for e in events]
        assert kinds == ["Task", "TaskArtifactUpdateEvent", "TaskStatusUpdateEvent"]
        assert events.state == TaskState.COMPLETED

        held = client.call("gate", "hold", return_immediately=True)
        assert gate.entered.wait(5)
        with client.subscribe_to_task(held.id) as events:
            first = next(events)
            assert isinstance(first, Task) and first.status.state == TaskState.WORKING
            canceled = client.cancel_task(held.id)
            assert canceled.status.state == TaskState.CANCELED
            rest = list(events)
        assert isinstance(rest[-1], TaskStatusUpdateEvent)
        assert rest[-1].status.state == TaskState.CANCELED
        with pytest.raises(UnsupportedOperationError):
            client.subscribe_to_task(held.id)  # terminal: refused before any stream


def test_closing_a_stream_frees_the_seat(agent: tuple[Flask, str], gate: Gate) -> None:
    app, address = agent
    exchange = app.extensions["a2a"].exchange
    with A2AClient(address, binding="grpc", token="alice") as client:
        held = client.call("gate", "hold", return_immediately=True)
        assert gate.entered.wait(5)
        events = client.subscribe_to_task(held.id)
        first = next(events)
        assert isinstance(first, Task) and first.id == held.id
        assert exchange.seats.count("alice") == 1
        events.close()
        assert wait_for(lambda: exchange.seats.count("alice") == 0, timeout=3.0)
        gate.release.set()


def test_callers_and_transport_failures(agent: tuple[Flask, str]) -> None:
    _, address = agent
    with A2AClient(address, binding="grpc") as anonymous:
        with pytest.raises(UnauthenticatedError):
            anonymous.list_tasks()
    with A2AClient(address, binding="grpc", headers={"Authorization": "Bearer bob"}) as bob:
        assert bob.list_tasks().total_size == 0
    with A2AClient(address, binding="grpc", auth=requests.auth.HTTPDigestAuth("a", "b")) as odd:
        with pytest.raises(A2AClientError, match="sends headers only"):
            odd.list_tasks()
    nobody = f"127.0.0.1:{free_port()}"
    with A2AClient(nobody, binding="grpc", token="alice", timeout=2.0) as client:
        with pytest.raises(requests.ConnectionError):
            client.list_tasks()


def test_the_tenant_goes_in_every_request(make_app: t.Callable[..., Flask]) -> None:
    app = make_app()
    with grpc_server(app) as server:
        with A2AClient(server.address, binding="grpc", token="alice", tenant="acme") as client:
            transport = t.cast(t.Any, client.transport)
            assert transport._request("GetTask", {"id": "x"}).tenant == "acme"
            task = client.call("echo", "labelled")
            # A routing label, not the caller's tier: the task is the caller's all the same.
            assert client.get_task(task.id).id == task.id


def card_app(interfaces: list[dict[str, str]]) -> Flask:
    app = Flask("card_only")

    @app.get("/.well-known/agent-card.json")
    def card() -> t.Any:
        return jsonify({"name": "x", "supportedInterfaces": interfaces})

    return app


def test_a_card_listing_only_grpc_is_spoken_over_grpc(agent: tuple[Flask, str]) -> None:
    _, address = agent
    only = [{"url": address, "protocolBinding": "GRPC", "protocolVersion": "1.0"}]
    with werkzeug_server(card_app(only)) as base:
        with A2AClient.from_card_url(base, token="alice") as client:
            assert (client.binding, client.endpoint) == ("GRPC", address)
            assert client.call("echo", "from the card").status.state == TaskState.COMPLETED
        runner = stack.cli_runner(Flask("cli"))
        done = runner.invoke(
            a2a_cli, ["call", base, "echo", "--text", "via the cli", "--token", "alice"]
        )
        assert done.exit_code == 0, done.output
        assert done.output.splitlines()[1:] == ["  artifact echo:", "    via the cli"]


def test_binding_grpc_picks_the_cards_grpc_interface(
    make_app: t.Callable[..., Flask],
) -> None:
    with grpc_server(make_app()) as server:
        jsonrpc = "http://127.0.0.1:9/a2a"  # listed first, never spoken to
        listed = [
            {"url": jsonrpc, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": server.address, "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        ]
        with werkzeug_server(card_app(listed)) as base:
            with A2AClient.from_card_url(base, token="alice", binding="grpc") as client:
                assert client.binding == "GRPC"
                assert client.call("echo", "x").status.state == TaskState.COMPLETED


def test_flask_a2a_call_binding_grpc(agent: tuple[Flask, str]) -> None:
    _, address = agent
    runner = stack.cli_runner(Flask("cli"))
    told = runner.invoke(
        a2a_cli,
        ["call", address, "echo", "--text", "hi", "--binding", "grpc", "--token", "alice"],
    )
    assert told.exit_code == 0, told.output
    assert told.output.splitlines() == [
        told.output.splitlines()[0],
        "  artifact echo:",
        "    hi",
    ]
    assert told.output.splitlines()[0].endswith(": COMPLETED")
    streamed = runner.invoke(
        a2a_cli,
        ["call", address, "echo", "--text", "hi", "--stream", "--binding", "GRPC",
         "--token", "alice"],
    )  # fmt: skip
    assert streamed.exit_code == 0, streamed.output
    assert streamed.output.splitlines()[-1].split(None, 1)[1] == "COMPLETED"
    refused = runner.invoke(a2a_cli, ["call", address, "echo", "--text", "hi", "--binding", "grpc"])
    assert refused.exit_code == 1
    assert "UnauthenticatedError (-31401)" in refused.output
