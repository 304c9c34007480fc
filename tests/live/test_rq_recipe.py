"""The hand-off recipe of docs/handing-off.md, for real: RQ on Redis, a worker process, SQLite.

Needs Redis (CI starts it); skipped with a reason where none answers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from flask_a2a.testing import A2ATestClient
from tests.exchange.test_streaming import events_of, frames, next_event, open_stream

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("A2A_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def redis_answers() -> bool:
    try:
        from redis import Redis

        return bool(Redis.from_url(REDIS_URL, socket_timeout=1).ping())
    except Exception:
        return False


pytestmark = pytest.mark.skipif(not redis_answers(), reason=f"no Redis at {REDIS_URL}")


def test_worker_process_settles_a_handed_off_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        "A2A_DATABASE_URL": f"sqlite:///{tmp_path / 'tasks.db'}",
        "A2A_QUEUE_REDIS_URL": REDIS_URL,
        "A2A_QUEUE_NAME": f"a2a-test-{uuid.uuid4().hex}",
        "A2A_REPLICA_POLL_INTERVAL": "0.1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    from examples.queue_agent import create_app

    app = create_app()
    client = A2ATestClient(app, token="alice-token")
    task = client.send("three small words", skill="report")["task"]
    assert task["status"]["state"] == "TASK_STATE_WORKING"  # answered before the job ran

    stream = frames(open_stream(client, "SubscribeToTask", {"id": task["id"]}, token="alice-token"))
    assert next_event(stream)["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"

    worker = subprocess.run(
        [
            sys.executable,
            "-m",
            "rq.cli",
            "worker",
            "--burst",
            "--url",
            REDIS_URL,
            env["A2A_QUEUE_NAME"],
        ],
        cwd=ROOT,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worker.returncode == 0, worker.stderr[-2000:]

    # The stream in this process sees the worker's write through the shared store.
    rest = [events_of(f)["result"] for f in stream if not f.startswith(":")]
    assert rest[-1]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    final = client.rpc("GetTask", {"id": task["id"]}, token="alice-token").result
    assert final["status"]["state"] == "TASK_STATE_COMPLETED"
    assert final["artifacts"][0]["parts"] == [{"data": {"words": 3}}]
    app.extensions["a2a"].exchange.shutdown(timeout=2)
