"""One replica for tests/fleet/test_replicas.py: run under ``gunicorn -k gevent``, several at once.

Every replica opens the same PostgreSQL tables: ``A2A_DATABASE_URL`` and the table prefix in
``A2A_TEST_TABLE_PREFIX``. Other ``A2A_*`` variables are settings (JSON values).
``GET /test/cut/<task_id>`` tells when (``time.monotonic()``, one clock for every process on
the machine) and how a ``sleepy`` handler ended on this replica. ``POST /test/step/<task_id>``
lets a ``paced`` run write its next chunk(s); ``GET /test/bus`` tells whether the Redis bus
delivers other replicas' events one by one right now (tests/live/test_fleet.py).
"""

from __future__ import annotations

import os
import threading
import time
import typing as t

from flask import Flask, abort, current_app, request

from examples.agent import principal
from flask_a2a import A2A, Part, Skill, TaskContext, from_prefixed_env
from flask_a2a.store.sql import SQLStore, engine_from_url

#: task id -> (monotonic time the handler ended, the exception that ended it).
CUT: dict[str, tuple[float, str]] = {}
#: task id -> the steps a ``paced`` run may take.
STEPS: dict[str, threading.Semaphore] = {}
PACED_CHUNKS = 10


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


def paced(task: TaskContext) -> None:
    """Ten artifact chunks, each written when the test posts a step."""
    task.working()
    step = STEPS.setdefault(task.id, threading.Semaphore(0))
    artifact_id = None
    for i in range(PACED_CHUNKS):
        if not step.acquire(timeout=30):
            raise RuntimeError("no step within 30 s")
        artifact_id = task.artifact(
            [Part(text=f"chunk {i}")], name="chunks", artifact_id=artifact_id,
            append=artifact_id is not None,
        )  # fmt: skip


def asks(task: TaskContext) -> None:
    """Pauses for input at once: a paused task holds no run lease."""
    task.require_input("which one?")


def create_app() -> Flask:
    app = Flask(__name__)
    from_prefixed_env(app.config)  # FLASK_A2A_* -> A2A_*
    store = SQLStore(
        engine_from_url(os.environ["FLASK_A2A_DATABASE_URL"]),
        os.environ["A2A_TEST_TABLE_PREFIX"],
    )
    A2A(
        app,
        skills=[
            Skill(id="sleepy", name="Sleepy", description="Sleeps a minute.", handler=sleepy),
            Skill(id="steps", name="Steps", description="Six steps.", handler=steps),
            Skill(id="paced", name="Paced", description="Ten chunks.", handler=paced),
            Skill(id="asks", name="Asks", description="Asks for input.", handler=asks),
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

    @app.post("/test/step/<task_id>")
    def step(task_id: str) -> dict[str, t.Any]:
        semaphore = STEPS.setdefault(task_id, threading.Semaphore(0))
        for _ in range(int(request.args.get("n", "1"))):
            semaphore.release()
        return {"ok": True}

    @app.get("/test/bus")
    def bus() -> dict[str, t.Any]:
        return {"live": current_app.extensions["a2a"].exchange.bus.live(), "pid": os.getpid()}

    return app
