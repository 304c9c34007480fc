"""The apps the benchmark serves under ``gunicorn -k gevent`` (run from the repository root).

- ``bench.apps:create_app()``: flask_a2a with an ``echo`` skill (the text back as an artifact)
  and a ``gate`` skill that holds its task open until ``POST /bench/release``; bearer tokens
  name the owner. ``BENCH_STORE=sql`` puts tasks in PostgreSQL (``A2A_DATABASE_URL``, table
  prefix ``BENCH_TABLE_PREFIX``); the memory store otherwise. Other settings come from
  ``A2A_*`` environment variables (JSON values).
- ``bench.apps:create_bare_app()``: a bare Flask JSON endpoint, the ceiling for any Flask code.
"""

from __future__ import annotations

import json
import os
import threading
import typing as t

from flask import Flask, request

from flask_a2a import A2A, Part, Principal, Skill, TaskContext

#: Bearer token -> owner. ``bench`` sends messages; the list owners hold seeded tasks.
TOKENS: t.Final = {
    "bench-token": "bench",
    "list-small": "list-small",
    "list-large": "list-large",
}

GATE = threading.Event()


def principal() -> Principal | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    owner = TOKENS.get(token) if scheme == "Bearer" else None
    return Principal(owner) if owner else None


def echo(task: TaskContext) -> None:
    task.artifact([Part(text=task.message.text)], name="echo")


def gate(task: TaskContext) -> None:
    task.working()
    while not GATE.wait(0.5):
        task.check()
    task.artifact([Part(text="released")], name="gate")


def env_config() -> dict[str, object]:
    """Every ``A2A_*`` variable but the database URL (the store is built here, with a prefix)."""
    config: dict[str, object] = {}
    for key, raw in os.environ.items():
        if key.startswith("A2A_") and key != "A2A_DATABASE_URL":
            try:
                config[key] = json.loads(raw)
            except ValueError:
                config[key] = raw
    return config


def _store() -> t.Any:
    if os.environ.get("BENCH_STORE", "memory") != "sql":
        return None
    from flask_a2a.store.sql import SQLStore, engine_from_url

    engine = engine_from_url(os.environ["A2A_DATABASE_URL"], statement_timeout=5.0)
    return SQLStore(engine, table_prefix=os.environ["BENCH_TABLE_PREFIX"])


def create_app() -> Flask:
    app = Flask(__name__)
    app.config.update(env_config())
    A2A(
        app,
        skills=[
            Skill(id="echo", name="Echo", description="Echo the text.", handler=echo),
            Skill(id="gate", name="Gate", description="Wait for the bench.", handler=gate),
        ],
        principal=principal,
        store=_store(),
    )

    @app.post("/bench/release")
    def release() -> dict[str, bool]:
        GATE.set()
        return {"released": True}

    @app.get("/bench/ping")
    def ping() -> dict[str, int]:
        return {"pid": os.getpid()}

    return app


def create_bare_app() -> Flask:
    app = Flask(__name__)

    @app.post("/echo")
    def bare_echo() -> dict[str, t.Any]:
        body = request.get_json()
        return {"ok": True, "id": body.get("id")}

    @app.get("/bench/ping")
    def ping() -> dict[str, int]:
        return {"pid": os.getpid()}

    return app
