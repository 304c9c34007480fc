"""Over a real socket, gunicorn ``-k gevent``: a subscribe on a paused task follows it to the
end (issue 14 item 5), and a streaming method's refusal is one SSE error event (item 6)."""

from __future__ import annotations

import json
import time
import typing as t
from pathlib import Path

import pytest
import requests

from tests.live_server import LiveGunicorn

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
ALICE = {"Authorization": "Bearer alice-token", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def server() -> t.Iterator[LiveGunicorn]:
    gunicorn = LiveGunicorn(
        "tests.live_app:create_ask_app()",
        chdir=str(ROOT),
        env={"FLASK_A2A_KEEPALIVE_INTERVAL": "0.3"},
    )
    yield gunicorn
    gunicorn.stop()


def rpc(server: LiveGunicorn, method: str, params: t.Any, request_id: t.Any = 1) -> t.Any:
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return requests.post(server.url + "/a2a", json=body, headers=ALICE, timeout=30)


def message(text: str = "", task_id: str | None = None) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {
        "messageId": f"m-{time.monotonic_ns()}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        "metadata": {"skill": "ask"},
    }
    if task_id:
        out["taskId"] = task_id
    return out


def open_sse(server: LiveGunicorn, method: str, params: t.Any) -> requests.Response:
    """What an SSE-only reader does: POST, then read ``data:`` lines (no JSON fallback)."""
    body = {"jsonrpc": "2.0", "id": "live", "method": method, "params": params}
    response = requests.post(
        server.url + "/a2a",
        json=body,
        stream=True,
        timeout=30,
        headers={**ALICE, "Accept": "text/event-stream"},
    )
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    return response


def label(line: str) -> str:
    doc = json.loads(line[len("data: ") :])
    result = doc["result"]
    if "artifactUpdate" in result:
        return "artifact:" + result["artifactUpdate"]["artifact"]["parts"][0]["text"]
    status = (result.get("statusUpdate") or result["task"])["status"]
    return str(status["state"]).removeprefix("TASK_STATE_")


def paused(server: LiveGunicorn) -> str:
    task = rpc(server, "SendMessage", {"message": message()}).json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return str(task["id"])


def follow(server: LiveGunicorn, task_id: str, reply: str) -> list[str]:
    """Subscribe to the paused task, wait for a keep-alive, send ``reply``; the events to EOF."""
    with open_sse(server, "SubscribeToTask", {"id": task_id}) as response:
        lines = response.iter_lines(decode_unicode=True)
        first = next(line for line in lines if line)
        assert label(first) == "INPUT_REQUIRED"
        assert next(line for line in lines if line) == ": keep-alive"  # open while it waits
        answer = rpc(server, "SendMessage", {"message": message(reply, task_id)})
        assert answer.status_code == 200 and "result" in answer.json()
        return [label(line) for line in lines if line.startswith("data: ")]


def test_subscribe_on_a_paused_task_follows_the_resume_to_completion(
    server: LiveGunicorn,
) -> None:
    task_id = paused(server)
    assert follow(server, task_id, "Ada") == ["WORKING", "artifact:hi Ada", "COMPLETED"]


def test_a_second_pause_ends_the_stream_over_the_socket(server: LiveGunicorn) -> None:
    task_id = paused(server)
    assert follow(server, task_id, "again") == ["WORKING", "INPUT_REQUIRED"]
    assert follow(server, task_id, "Grace") == ["WORKING", "artifact:hi Grace", "COMPLETED"]


def test_streaming_refusals_are_one_sse_error_event(server: LiveGunicorn) -> None:
    for method, params in [
        ("SubscribeToTask", {"id": "no-such-task"}),
        ("SendStreamingMessage", {"message": message("x", task_id="no-such-task")}),
    ]:
        with open_sse(server, method, params) as response:
            lines = [line for line in response.iter_lines(decode_unicode=True) if line]
        assert len(lines) == 1 and lines[0].startswith("data: "), lines
        doc = json.loads(lines[0][len("data: ") :])
        assert doc["id"] == "live" and doc["error"]["code"] == -32001
        assert doc["error"]["message"] == "Task not found"
