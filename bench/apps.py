"""The apps the benchmark serves under ``gunicorn -k gevent`` (run from the repository root).

- ``bench.apps:create_app()``: flask_a2a with an ``echo`` skill (the text back as an artifact)
  and a ``gate`` skill that holds its task open until ``POST /bench/release``; bearer tokens
  name the owner. ``BENCH_STORE=sql`` puts tasks in PostgreSQL (``A2A_DATABASE_URL``, table
  prefix ``BENCH_TABLE_PREFIX``); the memory store otherwise. Other settings come from
  ``A2A_*`` environment variables (JSON values).
  A ``ticks`` skill (the fleet section) writes ``N`` artifact chunks ``MS`` ms apart (message
  text ``"N MS"``), each holding the ``time.monotonic()`` it was written at, once
  ``POST /bench/go/<task_id>`` says its subscriber is listening.
  ``BENCH_TRACING=1`` sets up an OpenTelemetry SDK tracer provider (the ``--telemetry`` rows).
- ``bench.apps:create_bare_app()``: a bare Flask JSON endpoint, the ceiling for any Flask code.
"""

from __future__ import annotations

import json
import os
import threading
import time
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
#: task id -> set once the fleet section's subscriber listens.
GO: dict[str, threading.Event] = {}


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


def ticks(task: TaskContext) -> None:
    count, ms = (int(v) for v in task.message.text.split())
    if not GO.setdefault(task.id, threading.Event()).wait(30):
        raise RuntimeError("nobody listened within 30 s")
    artifact_id = None
    for _ in range(count):
        artifact_id = task.artifact(
            [Part(text=repr(time.monotonic()))],
            name="ticks",
            artifact_id=artifact_id,
            append=artifact_id is not None,
        )
        time.sleep(ms / 1000)
    GO.pop(task.id, None)


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


def trace_everything() -> None:
    """``BENCH_TRACING=1``: an SDK tracer provider recording every span, exported in batches to
    an exporter that drops them (our side of the cost, not a collector's)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Dropped(SpanExporter):
        def export(self, spans: t.Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    trace.set_tracer_provider(provider)


def create_app() -> Flask:
    app = Flask(__name__)
    app.config.update(env_config())
    if os.environ.get("BENCH_TRACING"):
        trace_everything()
    A2A(
        app,
        skills=[
            Skill(id="echo", name="Echo", description="Echo the text.", handler=echo),
            Skill(id="gate", name="Gate", description="Wait for the bench.", handler=gate),
            Skill(id="ticks", name="Ticks", description="Timed chunks.", handler=ticks),
        ],
        principal=principal,
        store=_store(),
    )

    @app.post("/bench/release")
    def release() -> dict[str, bool]:
        GATE.set()
        return {"released": True}

    @app.post("/bench/go/<task_id>")
    def go(task_id: str) -> dict[str, bool]:
        GO.setdefault(task_id, threading.Event()).set()
        return {"go": True}

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
