"""The app the operations live test runs under ``gunicorn -k gevent``: the host's OpenTelemetry
SDK (each worker writes its finished spans, one JSON object a line, to ``OPS_SPANS_DIR``), its
FlaskInstrumentor, and the metrics at ``/metrics`` (``A2A_METRICS_PATH``)."""

from __future__ import annotations

import json
import os
import typing as t

from flask import Flask

from examples.agent import principal
from flask_a2a import A2A, Part, Skill, TaskContext, from_prefixed_env


def echo(task: TaskContext) -> None:
    task.artifact([Part(text=task.message.text)], name="echo")


def _trace_to_file(directory: str) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    out = open(os.path.join(directory, f"spans-{os.getpid()}.jsonl"), "a", buffering=1)  # noqa: SIM115

    def line(span: ReadableSpan) -> str:
        return json.dumps(json.loads(span.to_json()), separators=(",", ":")) + "\n"

    provider = TracerProvider(resource=Resource.create({"service.name": "ops-test-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=line)))
    trace.set_tracer_provider(provider)


def create_app() -> Flask:
    app = Flask(__name__)
    from_prefixed_env(app.config)  # FLASK_A2A_DATABASE_URL -> A2A_DATABASE_URL
    app.config["A2A_METRICS_PATH"] = "/metrics"
    spans: t.Any = os.environ.get("OPS_SPANS_DIR")
    if spans:
        from opentelemetry.instrumentation.flask import FlaskInstrumentor

        _trace_to_file(spans)
        FlaskInstrumentor().instrument_app(app)
    A2A(
        app,
        skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
        principal=principal,
    )
    return app
