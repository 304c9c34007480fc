"""One replica for tests/test_replicas.py: run under ``gunicorn -k gevent``, several at once.

Every replica opens the same PostgreSQL tables: ``A2A_DATABASE_URL`` and the table prefix in
``A2A_TEST_TABLE_PREFIX``. Other ``A2A_*`` variables are settings (JSON values).
``GET /test/cut/<task_id>`` tells when (``time.monotonic()``, one clock for every process on
the machine) and how a ``sleepy`` handler ended on this replica.
"""

from __future__ import annotations

import os
import time
import typing as t

from flask import Flask, abort

from examples.agent import principal
from flask_a2a import A2A, Part, Skill, TaskContext
from flask_a2a.store.sql import SQLStore, engine_from_url

#: task id -> (monotonic time the handler ended, the exception that ended it).
CUT: dict[str, tuple[float, str]] = {}


def sleepy(task: TaskContext) -> None:
    """Works without writing, so only the replica poll can notice a foreign cancel."""
    task.working()
    try:
        for _ in range(600):  # at most a minute
            time.sleep(0.1)
    except BaseException as exc:
        CUT[task.id] = (time.monotonic(), type(exc).__name__)
        raise
    CUT[task.id] = (time.monotonic(), "finished")


def steps(task: TaskContext) -> None:
    """Visible progress: one artifact chunk every 0.3 s, then done."""
    task.working()
    artifact_id = task.artifact([Part(text="step 0")], name="progress")
    for i in range(1, 6):
        time.sleep(0.3)
        task.artifact([Part(text=f"step {i}")], artifact_id=artifact_id, append=True)


def create_app() -> Flask:
    app = Flask(__name__)
    app.config.from_prefixed_env()  # FLASK_A2A_* -> A2A_*
    store = SQLStore(
        engine_from_url(os.environ["FLASK_A2A_DATABASE_URL"]),
        os.environ["A2A_TEST_TABLE_PREFIX"],
    )
    A2A(
        app,
        skills=[
            Skill(id="sleepy", name="Sleepy", description="Sleeps a minute.", handler=sleepy),
            Skill(id="steps", name="Steps", description="Six steps.", handler=steps),
        ],
        principal=principal,
        store=store,
    )

    @app.get("/test/cut/<task_id>")
    def cut(task_id: str) -> dict[str, t.Any]:
        if task_id not in CUT:
            abort(404)
        at, how = CUT[task_id]
        return {"at": at, "how": how, "pid": os.getpid()}

    return app
