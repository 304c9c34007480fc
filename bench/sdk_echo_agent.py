"""The official A2A Python SDK's echo agent, served by uvicorn: the benchmark's comparison point.

Runs in its own virtualenv (``bench/.venv-sdk``, made by ``bench/run.py``):

    bench/.venv-sdk/bin/python bench/sdk_echo_agent.py PORT TOKEN

JSON-RPC at ``POST /`` (send ``A2A-Version: 1.0``), card at ``/.well-known/agent-card.json``.
The executor does what flask_a2a's bench echo does: a Task with one artifact ``echo`` holding
the input text, then COMPLETED, on the SDK's in-memory task store. POST requires
``Authorization: Bearer TOKEN``, checked by a pure ASGI middleware (cheaper than Starlette's
``BaseHTTPMiddleware``, so the SDK is not handicapped by our choice of auth).
"""

import sys

import uvicorn
from a2a.helpers import get_message_text, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from starlette.applications import Starlette


class EchoAgentExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        msg = context.message
        text = get_message_text(msg) if msg else ""
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(msg)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([new_text_part(text)], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        context_id = context.context_id or (task.context_id if task else "")
        await TaskUpdater(event_queue, context.task_id, context_id).cancel()


class BearerAuth:
    """401 for a POST without ``Authorization: Bearer TOKEN`` (pure ASGI)."""

    def __init__(self, app, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            auth = dict(scope["headers"]).get(b"authorization")
            if auth != self.expected:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": b'{"error":"unauthorized"}'})
                return
        await self.app(scope, receive, send)


def build_app(port: int, token: str):
    base_url = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name="SDK Echo Agent",
        description="Echoes the input text back as an artifact.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=base_url + "/", protocol_binding="JSONRPC", protocol_version="1.0"),
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Echo input", tags=["echo"])],
    )
    card.security_schemes["bearer"].CopyFrom(
        SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
    )
    card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList(list=[])}))
    handler = DefaultRequestHandler(
        agent_executor=EchoAgentExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/")
    return BearerAuth(Starlette(routes=routes), token)


if __name__ == "__main__":
    port = int(sys.argv[1])
    token = sys.argv[2] if len(sys.argv) > 2 else "bench-token"
    uvicorn.run(
        build_app(port, token), host="127.0.0.1", port=port, log_level="warning", access_log=False
    )
