"""The official a2a-sdk client against examples/agent.py under gunicorn -k gevent, over a socket.

Whatever the SDK cannot read is our bug. The SDK is async; each test drives it with
``asyncio.run``. The card is signed (ES256) and verified with the SDK's own verifier, keys taken
from the JWKS at the signature's ``jku``.
"""

from __future__ import annotations

import asyncio
import pathlib
import typing as t
import uuid

import pytest

a2a_client = pytest.importorskip("a2a.client", reason="the interop tests need a2a-sdk")

import httpx  # noqa: E402
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory  # noqa: E402
from a2a.helpers import get_artifact_text, new_data_part, new_text_part  # noqa: E402
from a2a.types import (  # noqa: E402
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (  # noqa: E402
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from jwt import PyJWK  # noqa: E402

from tests.live_server import free_port, gunicorn_server  # noqa: E402

pytestmark = pytest.mark.interop

EXAMPLES = str(pathlib.Path(__file__).resolve().parents[2] / "examples")
TOKEN = "alice-token"


class Agent(t.NamedTuple):
    base: str
    jwks_url: str
    #: The card's GRPC interface (``host:port``), when the agent serves one
    #: (tests/live/test_interop_grpc.py runs these scenarios over it).
    grpc: str = ""


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[Agent]:
    """examples/agent.py under gunicorn -k gevent, with a signed card."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = tmp_path_factory.mktemp("keys") / "card-key.pem"
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"A2A_EXAMPLE_SIGNING_KEY": str(pem), "FLASK_A2A_PUBLIC_BASE_URL": base}
    with gunicorn_server("agent:app", chdir=EXAMPLES, port=port, env=env) as url:
        yield Agent(url, url + "/.well-known/jwks.json")


def run(coro: t.Coroutine[t.Any, t.Any, t.Any]) -> t.Any:
    return asyncio.run(asyncio.wait_for(coro, timeout=60))


def http_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)


async def verifier(http: httpx.AsyncClient, agent: Agent) -> t.Callable[[AgentCard], None]:
    """The SDK verifier, its keys from our JWKS; it refuses a jku that is not ours."""
    jwks = (await http.get(agent.jwks_url)).json()
    keys = {k["kid"]: PyJWK(k) for k in jwks["keys"]}

    def key_provider(kid: str | None, jku: str | None) -> PyJWK:
        assert jku == agent.jwks_url
        return keys[str(kid)]

    return create_signature_verifier(key_provider, ["ES256", "RS256"])


@pytest.fixture(params=["JSONRPC", "HTTP+JSON"])
def transport(request: pytest.FixtureRequest) -> str:
    """Each case once per binding: the SDK's ClientFactory restricted to that transport."""
    return t.cast(str, request.param)


async def connect(
    http: httpx.AsyncClient, agent: Agent, transport: str, *, streaming: bool
) -> tuple[AgentCard, t.Any]:
    verify = await verifier(http, agent)
    card = await A2ACardResolver(http, agent.base).get_agent_card(signature_verifier=verify)
    config = ClientConfig(
        httpx_client=http,
        streaming=streaming,
        supported_protocol_bindings=[transport],
        grpc_channel_factory=grpc_channel if transport == "GRPC" else None,
    )
    client = ClientFactory(config).create(card)
    expected = {
        "JSONRPC": "JsonRpcTransport",
        "HTTP+JSON": "RestTransport",
        "GRPC": "GrpcTransport",
    }[transport]
    assert type(client._transport).__name__ == expected  # type: ignore[attr-defined]  # the factory took our binding
    return card, client


def grpc_channel(url: str) -> t.Any:
    """The SDK's gRPC transport takes its channel from here (grpcio's asyncio channel),
    carrying the caller's token as the SDK's HTTP client does on the other bindings."""
    import grpc

    token = grpc.metadata_call_credentials(
        lambda _, callback: callback((("authorization", f"Bearer {TOKEN}"),), None)
    )
    return grpc.aio.secure_channel(
        url,
        grpc.composite_channel_credentials(grpc.local_channel_credentials(), token),
    )


def message(skill: str, text: str = "", **data: t.Any) -> Message:
    parts = [new_data_part({"skill": skill, **data})]
    if text:
        parts.insert(0, new_text_part(text))
    return Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=parts)


def state_of(event: StreamResponse) -> str:
    kind = event.WhichOneof("payload")
    if kind == "task":
        return "task:" + TaskState.Name(event.task.status.state)
    if kind == "status_update":
        return "status:" + TaskState.Name(event.status_update.status.state)
    return str(kind)


def test_card_resolves_and_the_sdk_verifies_its_signature(agent: Agent, transport: str) -> None:
    async def scenario() -> None:
        async with http_client() as http:
            card, client = await connect(http, agent, transport, streaming=False)
            assert card.name == "flask_a2a example agent"
            assert [(i.url, i.protocol_binding, i.protocol_version)
                    for i in card.supported_interfaces] == [
                (agent.base + "/a2a", "JSONRPC", "1.0"),
                (agent.base + "/a2a/rest", "HTTP+JSON", "1.0"),
                *([(agent.grpc, "GRPC", "1.0")] if agent.grpc else []),
            ]  # fmt: skip
            assert card.capabilities.streaming and card.capabilities.extended_agent_card
            assert {s.id for s in card.skills} == {"echo", "countdown", "greet"}
            assert len(card.signatures) == 1
            card.description = "tampered"
            with pytest.raises(InvalidSignaturesError):
                (await verifier(http, agent))(card)
            await client.close()

    run(scenario())


def test_send_get_list_over_the_sdk(agent: Agent, transport: str) -> None:
    async def scenario() -> None:
        async with http_client() as http:
            _, client = await connect(http, agent, transport, streaming=False)
            request = SendMessageRequest(message=message("echo", "hello", k=1))
            events = [e async for e in client.send_message(request)]
            assert [e.WhichOneof("payload") for e in events] == ["task"]
            task = events[0].task
            assert TaskState.Name(task.status.state) == "TASK_STATE_COMPLETED"
            assert get_artifact_text(task.artifacts[0]) == "hello"

            got = await client.get_task(GetTaskRequest(id=task.id))
            assert (got.id, got.context_id) == (task.id, task.context_id)
            assert got.status.state == TaskState.TASK_STATE_COMPLETED
            assert got.history[0].parts[0].text == "hello"

            listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
            assert [t.id for t in listed.tasks] == [task.id]
            assert listed.total_size == 1 and listed.next_page_token == ""

            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=str(uuid.uuid4())))
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=task.id))
            await client.close()

    run(scenario())


def test_streaming_send_over_the_sdk(agent: Agent, transport: str) -> None:
    async def scenario() -> None:
        async with http_client() as http:
            _, client = await connect(http, agent, transport, streaming=True)
            request = SendMessageRequest(message=message("countdown", steps=3, delay=0.01))
            events = [e async for e in client.send_message(request)]
            states = [state_of(e) for e in events]
            assert states[0].startswith("task:")
            assert states[-1] == "status:TASK_STATE_COMPLETED"
            chunks = [
                e.artifact_update.artifact.parts[0].text
                for e in events
                if e.WhichOneof("payload") == "artifact_update"
            ]
            assert chunks == ["3...", "2...", "1..."]
            await client.close()

    run(scenario())


def test_subscribe_then_cancel_over_the_sdk(agent: Agent, transport: str) -> None:
    async def scenario() -> None:
        async with http_client() as http:
            _, blocking = await connect(http, agent, transport, streaming=False)
            _, streaming = await connect(http, agent, transport, streaming=True)
            request = SendMessageRequest(
                message=message("countdown", steps=20, delay=0.5),
                configuration=SendMessageConfiguration(return_immediately=True),
            )
            (first,) = [e async for e in blocking.send_message(request)]
            task_id = first.task.id
            subscribed = asyncio.Event()
            seen: list[str] = []

            async def subscriber() -> None:
                async for event in streaming.subscribe(SubscribeToTaskRequest(id=task_id)):
                    seen.append(state_of(event))
                    subscribed.set()

            reader = asyncio.create_task(subscriber())
            await asyncio.wait_for(subscribed.wait(), 10)
            canceled = await blocking.cancel_task(CancelTaskRequest(id=task_id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            await asyncio.wait_for(reader, 10)
            assert seen[0].startswith("task:")
            assert seen[-1] == "status:TASK_STATE_CANCELED"
            await blocking.close()
            await streaming.close()

    run(scenario())


def test_subscribe_to_a_terminal_task_over_the_sdk(agent: Agent, transport: str) -> None:
    """A terminal task: the SDK's UnsupportedOperationError (a plain error before any stream,
    issue 24); an unknown task: its TaskNotFoundError (the one SSE error event on JSON-RPC)."""

    async def scenario() -> None:
        async with http_client() as http:
            _, blocking = await connect(http, agent, transport, streaming=False)
            _, streaming = await connect(http, agent, transport, streaming=True)
            request = SendMessageRequest(message=message("echo", "done"))
            (first,) = [e async for e in blocking.send_message(request)]
            assert first.task.status.state == TaskState.TASK_STATE_COMPLETED
            with pytest.raises(UnsupportedOperationError):
                async for _ in streaming.subscribe(SubscribeToTaskRequest(id=first.task.id)):
                    pass
            with pytest.raises(TaskNotFoundError):
                async for _ in streaming.subscribe(SubscribeToTaskRequest(id="no-such-task")):
                    pass
            await blocking.close()
            await streaming.close()

    run(scenario())


def test_extended_card_over_the_sdk(agent: Agent, transport: str) -> None:
    async def scenario() -> None:
        async with http_client() as http:
            _, client = await connect(http, agent, transport, streaming=False)
            verify = await verifier(http, agent)
            extended = await client.get_extended_agent_card(
                GetExtendedAgentCardRequest(), signature_verifier=verify
            )
            assert extended.name == "flask_a2a example agent (extended)"
            assert "alice" in extended.description
            assert extended.supported_interfaces[0].url == agent.base + "/a2a"
            await client.close()

    run(scenario())


def test_push_config_methods_over_the_sdk(agent: Agent, transport: str) -> None:
    async def scenario() -> None:
        async with http_client() as http:
            card, client = await connect(http, agent, transport, streaming=False)
            if not card.capabilities.push_notifications:
                await client.close()
                pytest.skip("the example agent's card says pushNotifications: false")
            request = SendMessageRequest(message=message("echo", "for push"))
            (event,) = [e async for e in client.send_message(request)]
            task_id = event.task.id
            created = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(
                    task_id=task_id, id="cfg-1", url="https://example.com/hook", token="tok"
                )
            )
            assert (created.task_id, created.id) == (task_id, "cfg-1")
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id="cfg-1")
            )
            assert got.url == "https://example.com/hook"
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
            assert [c.id for c in listed.configs] == ["cfg-1"]
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="cfg-1")
            )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
            assert list(listed.configs) == []
            await client.close()

    run(scenario())


def test_subscribe_to_a_paused_task_sees_the_completion_over_the_sdk(
    agent: Agent, transport: str
) -> None:
    """SubscribeToTask on an INPUT_REQUIRED task stays open through the resume (#14 item 5)."""

    async def scenario() -> None:
        async with http_client() as http:
            _, blocking = await connect(http, agent, transport, streaming=False)
            _, streaming = await connect(http, agent, transport, streaming=True)
            (first,) = [
                e async for e in blocking.send_message(SendMessageRequest(message=message("greet")))
            ]
            task = first.task
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            subscribed = asyncio.Event()
            seen: list[str] = []

            async def subscriber() -> None:
                async for event in streaming.subscribe(SubscribeToTaskRequest(id=task.id)):
                    seen.append(state_of(event))
                    subscribed.set()

            reader = asyncio.create_task(subscriber())
            await asyncio.wait_for(subscribed.wait(), 10)
            reply = Message(
                role=Role.ROLE_USER,
                message_id=str(uuid.uuid4()),
                task_id=task.id,
                parts=[new_text_part("Ada")],
            )
            (done,) = [e async for e in blocking.send_message(SendMessageRequest(message=reply))]
            assert done.task.status.state == TaskState.TASK_STATE_COMPLETED
            await asyncio.wait_for(reader, 10)
            assert seen[0] == "task:TASK_STATE_INPUT_REQUIRED"
            assert seen[1:] == [
                "status:TASK_STATE_WORKING",
                "artifact_update",
                "status:TASK_STATE_COMPLETED",
            ]
            await blocking.close()
            await streaming.close()

    run(scenario())


def test_streaming_refusals_are_a2a_errors_over_the_sdk(agent: Agent, transport: str) -> None:
    """A streamed error event is the SDK's own error class, not a transport error (#14 item 6)."""

    async def scenario() -> None:
        async with http_client() as http:
            _, streaming = await connect(http, agent, transport, streaming=True)
            with pytest.raises(TaskNotFoundError):
                async for _ in streaming.subscribe(SubscribeToTaskRequest(id="no-such-task")):
                    pass
            follow_up = message("echo", "x")
            follow_up.task_id = "no-such-task"
            with pytest.raises(TaskNotFoundError):
                async for _ in streaming.send_message(SendMessageRequest(message=follow_up)):
                    pass
            await streaming.close()

    run(scenario())
