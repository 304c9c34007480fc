"""The official a2a-sdk client against direct message replies and follow-ups to a running
task, served by ``tests/replies_app.py`` under gunicorn -k gevent, over a socket."""

from __future__ import annotations

import asyncio
import pathlib
import typing as t
import uuid

import pytest

pytest.importorskip("a2a.client", reason="the interop tests need a2a-sdk")

import httpx  # noqa: E402
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory  # noqa: E402
from a2a.helpers import get_artifact_text, new_data_part, new_text_part  # noqa: E402
from a2a.types import (  # noqa: E402
    ListTasksRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
)

from tests.live_server import gunicorn_server  # noqa: E402

pytestmark = pytest.mark.interop

ROOT = str(pathlib.Path(__file__).resolve().parents[2])


@pytest.fixture(scope="module")
def base() -> t.Iterator[str]:
    with gunicorn_server("tests.replies_app:create_app()", chdir=ROOT) as url:
        yield url


def run(coro: t.Coroutine[t.Any, t.Any, t.Any]) -> t.Any:
    return asyncio.run(asyncio.wait_for(coro, timeout=60))


async def connect(http: httpx.AsyncClient, base: str, *, streaming: bool) -> t.Any:
    card = await A2ACardResolver(http, base).get_agent_card()
    return ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)


def user(text: str, skill: str | None = None, **ids: str) -> Message:
    parts = [new_text_part(text)]
    if skill is not None:
        parts.append(new_data_part({"skill": skill}))
    return Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=parts, **ids)


def http_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(headers={"Authorization": "Bearer alice-token"}, timeout=30)


@pytest.mark.parametrize("streaming", [False, True], ids=["send", "stream"])
def test_a_reply_reaches_the_sdk_as_a_message(base: str, streaming: bool) -> None:
    async def scenario() -> None:
        async with http_client() as http:
            client = await connect(http, base, streaming=streaming)
            context_id = str(uuid.uuid4())
            request = SendMessageRequest(message=user("hi", "ping", context_id=context_id))
            events = [e async for e in client.send_message(request)]
            assert [e.WhichOneof("payload") for e in events] == ["message"]
            reply = events[0].message
            assert reply.role == Role.ROLE_AGENT and reply.parts[0].text == "pong: hi"
            assert reply.context_id == context_id and reply.task_id == ""
            listed = await client.list_tasks(ListTasksRequest(context_id=context_id))
            assert list(listed.tasks) == [] and listed.total_size == 0
            await client.close()

    run(scenario())


def test_a_follow_up_to_a_running_task_over_the_sdk(base: str) -> None:
    async def scenario() -> None:
        async with http_client() as http:
            client = await connect(http, base, streaming=False)
            immediately = SendMessageConfiguration(return_immediately=True)
            first = SendMessageRequest(message=user("hello", "chat"), configuration=immediately)
            (event,) = [e async for e in client.send_message(first)]
            task_id = event.task.id
            more = SendMessageRequest(message=user("more", task_id=task_id),
                                      configuration=immediately)  # fmt: skip
            (event,) = [e async for e in client.send_message(more)]
            assert event.task.status.state in (
                TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING,
            )  # fmt: skip
            assert event.task.history[-1].parts[0].text == "more"

            bye = SendMessageRequest(message=user("bye", task_id=task_id))  # blocking
            (event,) = [e async for e in client.send_message(bye)]
            done = event.task
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            assert get_artifact_text(done.artifacts[0]) == "more bye"
            texts = [m.parts[0].text for m in done.history]
            # "more" may land before or after the handler's own "listening" status message
            assert texts[-1] == "bye" and texts.index("more") < texts.index("bye")
            await client.close()

    run(scenario())
