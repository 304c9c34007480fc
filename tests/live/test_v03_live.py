"""A2A v0.3 over a real socket, gunicorn ``-k gevent``: a v0.3 stream, the same task over v1.0,
and the official a2a-sdk 0.3 client (issue 24 part 1).

The SDK 0.3 cannot share the main env with the SDK 1.x, so it is installed once into its own
venv, cached under ``~/.cache/flask_a2a-tests`` (``$XDG_CACHE_HOME`` when set) keyed by the
requirement and the Python version; ``tests/sdk03_client.py`` runs there as a subprocess.
Without a package index the SDK test is skipped, saying so.
"""

from __future__ import annotations

import json
import subprocess
import sys
import typing as t
from pathlib import Path

import pytest
import requests

from tests.live_server import LiveGunicorn
from tests.tck_support import cached_venv

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
ALICE = {"Authorization": "Bearer alice-token", "Content-Type": "application/json"}
SDK_REQUIREMENT = "a2a-sdk[http-server]>=0.3,<0.4"


@pytest.fixture(scope="module")
def server() -> t.Iterator[LiveGunicorn]:
    gunicorn = LiveGunicorn(
        "tests.live_app:create_app()",
        chdir=str(ROOT),
        env={
            "FLASK_A2A_PROTOCOL_VERSIONS": '["1.0", "0.3"]',
            "FLASK_A2A_ALLOW_PRIVATE_PUSH": "true",
            "FLASK_A2A_KEEPALIVE_INTERVAL": "0.3",
            "PYTHONPATH": str(ROOT),
        },
    )
    yield gunicorn
    gunicorn.stop()


def message(text: str, skill: str = "echo") -> dict[str, t.Any]:
    return {
        "kind": "message",
        "role": "user",
        "messageId": f"m-{text}",
        "parts": [{"kind": "text", "text": text}],
        "metadata": {"skill": skill},
    }


def rpc(server: LiveGunicorn, method: str, params: t.Any, **kw: t.Any) -> requests.Response:
    body = {"jsonrpc": "2.0", "id": "live", "method": method, "params": params}
    return requests.post(server.url + "/a2a", json=body, headers=ALICE, timeout=30, **kw)


def test_v03_stream_over_gevent(server: LiveGunicorn) -> None:
    with rpc(server, "message/stream", {"message": message("live")}, stream=True) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        events = [
            json.loads(line[6:])
            for line in response.iter_lines(decode_unicode=True)
            if line.startswith("data: ")
        ]
    results = [e["result"] for e in events]
    assert [r["kind"] for r in results] == ["task", "artifact-update", "status-update"]
    assert results[1]["artifact"]["parts"] == [{"kind": "text", "text": "live"}]
    assert results[-1]["final"] is True and results[-1]["status"]["state"] == "completed"
    # The same task over v1.0.
    task_id = results[0]["id"]
    v1 = rpc(server, "GetTask", {"id": task_id}).json()["result"]
    assert v1["status"]["state"] == "TASK_STATE_COMPLETED"
    assert v1["artifacts"][0]["parts"] == [{"text": "live"}]


def test_v03_resubscribe_over_gevent_ends_at_the_cancel(server: LiveGunicorn) -> None:
    held = rpc(
        server,
        "message/send",
        {"message": message("held", "gate"), "configuration": {"blocking": False}},
    ).json()["result"]
    with rpc(server, "tasks/resubscribe", {"id": held["id"]}, stream=True) as response:
        lines = response.iter_lines(decode_unicode=True)
        first = next(json.loads(line[6:]) for line in lines if line.startswith("data: "))
        assert first["result"]["kind"] == "task"
        # Cancelled over v1.0: the v0.3 stream sees it and ends.
        canceled = rpc(server, "CancelTask", {"id": held["id"]}).json()["result"]
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        rest = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert rest[-1]["result"]["kind"] == "status-update"
    assert rest[-1]["result"]["status"]["state"] == "canceled"
    assert rest[-1]["result"]["final"] is True


def _sdk03_python() -> Path:
    """The venv's python, built once per requirement and Python version."""
    key_material = f"{SDK_REQUIREMENT} {sys.version}".encode()
    return cached_venv("a2a-sdk-0.3", key_material, [SDK_REQUIREMENT], "a2a-sdk 0.3")


@pytest.fixture(scope="session")
def sdk03_python() -> Path:
    try:
        return _sdk03_python()
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"no venv for a2a-sdk 0.3: {exc}")


@pytest.mark.parametrize(
    "transport,refused",
    [
        ("JSONRPC", {"cancel_completed": -32002, "unknown": -32001, "foreign": -32001}),
        ("HTTP+JSON", {"cancel_completed": 400, "unknown": 404, "foreign": 404}),
    ],
)
def test_a2a_sdk_03_client(
    server: LiveGunicorn, sdk03_python: Path, transport: str, refused: dict[str, int]
) -> None:
    done = subprocess.run(
        [str(sdk03_python), str(ROOT / "tests" / "sdk03_client.py"), server.url, transport],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["card"] == {
        "url": server.url + "/a2a",
        "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
    }
    assert seen["send"] == {"state": "completed", "kinds": ["task"], "artifact": "hello"}
    assert seen["stream"] == {
        "state": "completed",
        "kinds": ["task", "artifact-update", "status-update"],
    }
    assert seen["get"] == {"id": True, "state": "completed", "history": 1}
    assert seen["push"] == {"set": "sdk", "get": "http://127.0.0.1:9/hook", "only": "sdk"}
    # Bob's SDK client does not see Alice's task (as an unknown one).
    assert {k: seen[k] for k in refused} == refused
    assert seen["held_state"] in ("submitted", "working")
    assert seen["canceled"] == "canceled"


@pytest.fixture(scope="module")
def signed_agent(tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[t.Any]:
    """examples/agent.py with a signed card and 0.3 on, as test_interop.py runs it."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from tests.live.test_interop import EXAMPLES, Agent
    from tests.live_server import free_port, gunicorn_server

    pem = tmp_path_factory.mktemp("keys") / "card-key.pem"
    pem.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    port = free_port()
    env = {
        "A2A_EXAMPLE_SIGNING_KEY": str(pem),
        "FLASK_A2A_PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
        "FLASK_A2A_PROTOCOL_VERSIONS": '["1.0", "0.3"]',
    }
    with gunicorn_server("agent:app", chdir=EXAMPLES, port=port, env=env) as url:
        yield Agent(url, url + "/.well-known/jwks.json")


@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
def test_the_v1_sdk_verifies_a_signed_card_with_03_on_and_speaks_10(
    signed_agent: t.Any, transport: str
) -> None:
    """The v0.3 fields are outside the signed payload (the SDK's proto parse drops them), and
    a v1.0 client still picks a 1.0 interface."""
    from a2a.types import SendMessageRequest

    from tests.live.test_interop import connect, http_client, message, run

    async def scenario() -> tuple[list[tuple[str, str]], str, str]:
        async with http_client() as http:
            card, client = await connect(http, signed_agent, transport, streaming=False)
            request = SendMessageRequest(message=message("echo", "hello"))
            state = 0
            async for event in client.send_message(request):
                state = event.task.status.state if event.HasField("task") else state
            interfaces = [
                (i.protocol_binding, i.protocol_version) for i in card.supported_interfaces
            ]
            return interfaces, type(client._transport).__name__, str(state)

    interfaces, used, state = run(scenario())
    assert interfaces == [
        ("JSONRPC", "1.0"),
        ("HTTP+JSON", "1.0"),
        ("JSONRPC", "0.3"),
        ("HTTP+JSON", "0.3"),
    ]
    assert used == {"JSONRPC": "JsonRpcTransport", "HTTP+JSON": "RestTransport"}[transport]
    assert state == "3"  # TASK_STATE_COMPLETED
