"""Run by tests/live/test_v03_live.py inside a venv holding a2a-sdk 0.3 (never imported by pytest).

``python sdk03_client.py BASE_URL TRANSPORT`` (``JSONRPC`` or ``HTTP+JSON``) drives the
official v0.3 client against a live flask_a2a server with A2A v0.3 enabled and prints one JSON
object of what it saw; the test asserts on it. Imports nothing of flask_a2a (the SDK 0.3 and
the main env's SDK 1.x cannot share a venv).
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.types import GetTaskPushNotificationConfigParams as GetPushParams
from a2a.types import (
    Message,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TextPart,
)


def message(text: str, skill: str = "echo") -> Message:
    return Message(
        role=Role.user,
        message_id=str(uuid.uuid4()),
        parts=[Part(root=TextPart(text=text))],
        metadata={"skill": skill},
    )


async def final_task(client: Any, msg: Message) -> tuple[Task | Message, list[str]]:
    """Send ``msg``; the last Task (or the Message) and every event's kind, in order."""
    kinds: list[str] = []
    last: Task | Message | None = None
    async for event in client.send_message(msg):
        if isinstance(event, Message):
            kinds.append("message")
            last = event
            continue
        task, update = event
        kinds.append(update.kind if update is not None else "task")
        last = task
    assert last is not None
    return last, kinds


async def refusal(call: Any) -> int | None:
    """The JSON-RPC error code (over JSON-RPC) or the HTTP status (over HTTP+JSON) a call
    fails with; None when it succeeds."""
    try:
        await call
    except A2AClientJSONRPCError as exc:
        return int(exc.error.code)
    except A2AClientHTTPError as exc:
        return int(exc.status_code)
    return None


async def main(base: str, transport: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    headers = {"Authorization": "Bearer alice-token"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        out["card"] = {
            "url": card.url,
            "protocolVersion": card.protocol_version,
            "preferredTransport": card.preferred_transport,
        }

        def client(http: httpx.AsyncClient, **options: Any) -> Any:
            config = ClientConfig(httpx_client=http, supported_transports=[transport], **options)
            return ClientFactory(config).create(card)

        blocking = client(http, streaming=False)
        task, kinds = await final_task(blocking, message("hello"))
        assert isinstance(task, Task)
        out["send"] = {
            "state": task.status.state.value,
            "kinds": kinds,
            "artifact": task.artifacts[0].parts[0].root.text,
        }  # type: ignore[index,union-attr]

        streaming = client(http, streaming=True)
        streamed, kinds = await final_task(streaming, message("streamed"))
        assert isinstance(streamed, Task)
        out["stream"] = {"state": streamed.status.state.value, "kinds": kinds}

        got = await blocking.get_task(TaskQueryParams(id=task.id))
        out["get"] = {
            "id": got.id == task.id,
            "state": got.status.state.value,
            "history": len(got.history or []),
        }

        config = TaskPushNotificationConfig(
            task_id=task.id,
            push_notification_config=PushNotificationConfig(
                id="sdk",
                url="http://127.0.0.1:9/hook",
                token="tok",
            ),
        )
        made = await blocking.set_task_callback(config)
        fetched = await blocking.get_task_callback(
            GetPushParams(id=task.id, push_notification_config_id="sdk")
        )
        # Without a config id: "the" config of the task (over HTTP+JSON the SDK's path then
        # ends in ``None``), its only one.
        only = await blocking.get_task_callback(GetPushParams(id=task.id))
        out["push"] = {
            "set": made.push_notification_config.id,
            "get": fetched.push_notification_config.url,
            "only": only.push_notification_config.id,
        }

        out["cancel_completed"] = await refusal(blocking.cancel_task(TaskIdParams(id=task.id)))
        out["unknown"] = await refusal(blocking.get_task(TaskQueryParams(id="no-such-task")))

        # Bob's client does not see Alice's task.
        async with httpx.AsyncClient(
            headers={"Authorization": "Bearer bob-token"}, timeout=30
        ) as bob_http:
            bob = client(bob_http, streaming=False)
            out["foreign"] = await refusal(bob.get_task(TaskQueryParams(id=task.id)))

        # A held task, sent without blocking (``polling``): the cancel ends it.
        polling = client(http, streaming=False, polling=True)
        held_task, _ = await final_task(polling, message("held", "gate"))
        assert isinstance(held_task, Task)
        out["held_state"] = held_task.status.state.value
        canceled = await blocking.cancel_task(TaskIdParams(id=held_task.id))
        out["canceled"] = canceled.status.state.value
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
