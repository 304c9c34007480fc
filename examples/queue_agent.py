"""Handing long work to a job queue: RQ on Redis, with the SQL store shared with the worker.

A task is a conversation unit, not a job. A skill whose work is long marks the task WORKING,
hands it off and enqueues a job; the blocking SendMessage answers at once with the WORKING task.
The RQ worker (another process) reaches the same task through the extension and settles it;
streams and subscribers see it through the shared store.

    export A2A_DATABASE_URL=sqlite:////tmp/a2a-queue.db A2A_QUEUE_REDIS_URL=redis://127.0.0.1:6379/0
    flask --app examples/queue_agent.py run          # the agent
    rq worker --url "$A2A_QUEUE_REDIS_URL" a2a-jobs   # the worker, in another shell
"""

from __future__ import annotations

import os

from flask import Flask
from redis import Redis
from rq import Queue

from examples.agent import principal
from flask_a2a import A2A, Part, Skill, TaskContext


def queue() -> Queue:
    redis = Redis.from_url(os.environ.get("A2A_QUEUE_REDIS_URL", "redis://127.0.0.1:6379/0"))
    return Queue(os.environ.get("A2A_QUEUE_NAME", "a2a-jobs"), connection=redis)


def report(task: TaskContext) -> None:
    """The skill: hand the task off first, then enqueue (the job may start at once)."""
    task.hand_off("queued")
    queue().enqueue(build_report, task.id, task.message.text)


def build_report(task_id: str, text: str) -> None:
    """The job, in the RQ worker process: continue the task and settle it."""
    app = create_app()
    updater = a2a.task_updater(task_id, app=app)
    updater.artifact([Part(data={"words": len(text.split())})], name="report")
    updater.complete("report ready")


a2a = A2A(
    skills=[
        Skill(id="report", name="Report", description="Counts words, on a worker.", handler=report)
    ],
    principal=principal,
)


def create_app() -> Flask:
    app = Flask(__name__)
    app.config["A2A_DATABASE_URL"] = os.environ["A2A_DATABASE_URL"]
    app.config["A2A_REPLICA_POLL_INTERVAL"] = float(
        os.environ.get("A2A_REPLICA_POLL_INTERVAL", "1.0")
    )
    a2a.init_app(app)
    return app
