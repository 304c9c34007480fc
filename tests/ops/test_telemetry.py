"""OpenTelemetry spans over real requests: the SDK's in-memory exporter, the Flask test client,
and the host's FlaskInstrumentor span containing ours."""

from __future__ import annotations

import json
import subprocess
import sys
import typing as t
from pathlib import Path

import pytest
from flask import Flask
from opentelemetry.instrumentation.flask import FlaskInstrumentor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from flask_a2a import Skill, TaskContext
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, echo, wait_for
from tests.otel_support import exporter, named, one, parent_id, span_id, trace_id
from tests.webhook import Webhook

ROOT = Path(__file__).resolve().parents[2]
SECRET_TEXT = "the-message-body-no-span-may-hold"


def boom(task: TaskContext) -> None:
    raise RuntimeError("handler broke")


def no_dns(host: str) -> list[str]:
    return ["127.0.0.1"]


@pytest.fixture
def spans() -> InMemorySpanExporter:
    found = exporter()
    found.clear()
    return found


@pytest.fixture
def traced_app(make_app: t.Callable[..., Flask], gate: Gate) -> Flask:
    skills = [
        Skill(id="echo", name="Echo", description="Echo.", handler=echo),
        Skill(id="boom", name="Boom", description="Raises.", handler=boom),
        Skill(id="gate", name="Gate", description="Waits.", handler=gate.handler),
    ]
    app = make_app(skills=skills, config={"A2A_ALLOW_PRIVATE_PUSH": True}, push_resolver=no_dns)
    FlaskInstrumentor().instrument_app(app)
    return app


def attributes_text(spans: InMemorySpanExporter) -> str:
    return json.dumps([dict(span.attributes or {}) for span in spans.get_finished_spans()])


def test_send_message_spans_nest_in_the_flask_server_span(
    traced_app: Flask, spans: InMemorySpanExporter
) -> None:
    client = A2ATestClient(traced_app, token="alice")
    task = client.send(SECRET_TEXT, skill="echo")["task"]
    finished = spans.get_finished_spans()
    server = one([s for s in finished if s.kind is SpanKind.SERVER], "POST /a2a")
    method = one(finished, "a2a.SendMessage")
    run = one(finished, "a2a.run")
    assert parent_id(method) == span_id(server)  # ours inside the host's
    assert parent_id(run) == span_id(method)  # the request waited for its run: a child
    assert trace_id(run) == trace_id(server)
    assert dict(method.attributes or {}) == {
        "a2a.method": "SendMessage",
        "a2a.binding": "jsonrpc",
        "a2a.task_id": task["id"],
        "a2a.skill_id": "echo",
        "a2a.state": "TASK_STATE_COMPLETED",
    }
    assert dict(run.attributes or {}) == {
        "a2a.skill_id": "echo",
        "a2a.task_id": task["id"],
        "a2a.state": "TASK_STATE_COMPLETED",
    }
    text = attributes_text(spans)
    assert SECRET_TEXT not in text and "alice" not in text  # no body, no credential


@pytest.mark.parametrize("store_kind", ["sqlite", "memory"])
def test_store_calls_have_spans_for_a_database_never_for_the_memory_store(
    make_app: t.Callable[..., Flask],
    spans: InMemorySpanExporter,
    new_store: t.Callable[..., t.Any],
    store_kind: str,
) -> None:
    store = new_store() if store_kind == "sqlite" else None
    app = make_app(**({"store": store} if store is not None else {}))
    FlaskInstrumentor().instrument_app(app)
    A2ATestClient(app, token="alice").send(SECRET_TEXT, skill="echo")
    finished = spans.get_finished_spans()
    method = one(finished, "a2a.SendMessage")
    run = one(finished, "a2a.run")
    stores = [s for s in finished if s.name.startswith("a2a.store ")]
    if store is None:
        assert stores == [], [s.name for s in stores]  # dictionary reads: nothing to trace
        return
    assert stores, [s.name for s in finished]
    assert {parent_id(s) for s in stores} <= {span_id(method), span_id(run)}
    assert all(s.attributes and s.attributes["a2a.store.operation"] for s in stores)
    assert SECRET_TEXT not in attributes_text(spans)


def test_an_error_code_and_a_failed_run_are_on_their_spans(
    traced_app: Flask, spans: InMemorySpanExporter
) -> None:
    client = A2ATestClient(traced_app, token="alice")
    assert client.rpc("GetTask", {"id": "nope"}).error["code"] == -32001
    get = one(spans.get_finished_spans(), "a2a.GetTask")
    assert get.attributes and get.attributes["a2a.error_code"] == -32001
    assert get.status.status_code is StatusCode.UNSET  # a refusal is no server fault
    spans.clear()
    task = client.send("x", skill="boom")["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    run = one(spans.get_finished_spans(), "a2a.run")
    assert run.attributes and run.attributes["a2a.state"] == "TASK_STATE_FAILED"
    assert run.status.status_code is StatusCode.ERROR
    assert "handler broke" not in attributes_text(spans) + str(run.status.description)


def test_a_run_that_outlives_its_request_links_back_to_it(
    traced_app: Flask, spans: InMemorySpanExporter, gate: Gate
) -> None:
    client = A2ATestClient(traced_app, token="alice")
    task = client.send("x", skill="gate", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(10)
    method = one(spans.get_finished_spans(), "a2a.SendMessage")
    assert not named(spans.get_finished_spans(), "a2a.run")  # still running
    gate.release.set()
    assert wait_for(lambda: bool(named(spans.get_finished_spans(), "a2a.run")))
    run = one(spans.get_finished_spans(), "a2a.run")
    assert run.parent is None  # a trace of its own ...
    assert [link.context.span_id for link in run.links] == [span_id(method)]  # ... linked
    assert trace_id(run) != trace_id(method)
    assert run.attributes and run.attributes["a2a.task_id"] == task["id"]


def test_a_rest_call_has_the_same_span_naming_its_binding(
    traced_app: Flask, spans: InMemorySpanExporter
) -> None:
    client = A2ATestClient(traced_app, token="alice", binding="rest")
    task = client.send("x", skill="echo")["task"]
    method = one(spans.get_finished_spans(), "a2a.SendMessage")
    assert method.attributes and method.attributes["a2a.binding"] == "http+json"
    assert method.attributes["a2a.task_id"] == task["id"]
    assert client.rpc("GetTask", {"id": "nope"}).code == -32001
    get = one(spans.get_finished_spans(), "a2a.GetTask")
    assert get.attributes and get.attributes["a2a.error_code"] == -32001


def test_a_stream_names_its_task(traced_app: Flask, spans: InMemorySpanExporter) -> None:
    client = A2ATestClient(traced_app, token="alice")
    params = {"message": client.message("hi", skill="echo")}
    _, events = client.stream("SendStreamingMessage", params)
    task_id = events[-1]["result"]["statusUpdate"]["taskId"]
    method = one(spans.get_finished_spans(), "a2a.SendStreamingMessage")
    assert method.attributes and method.attributes["a2a.task_id"] == task_id
    assert method.attributes["a2a.skill_id"] == "echo"


def test_a_push_delivery_span_names_the_host_only(
    traced_app: Flask, spans: InMemorySpanExporter, webhook: Webhook
) -> None:
    client = A2ATestClient(traced_app, token="alice")
    url = webhook.url("/hook/path") + "?sig=query-secret"
    config = {"taskPushNotificationConfig": {"url": url, "token": "push-token-secret"}}
    task_id = client.send("x", skill="echo", configuration=config)["task"]["id"]
    webhook.wait_for(1)

    def pushes() -> list[t.Any]:  # this task's: a late delivery of an earlier test may end here
        found = named(spans.get_finished_spans(), "a2a.push")
        return [span for span in found if (span.attributes or {}).get("a2a.task_id") == task_id]

    assert wait_for(lambda: bool(pushes()))
    push = pushes()[0]
    assert push.kind is SpanKind.CLIENT
    attributes = dict(push.attributes or {})
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["http.response.status_code"] == 200
    queued_by = {span_id(s) for s in spans.get_finished_spans() if s.name.startswith("a2a.")}
    assert parent_id(push) in queued_by  # a child of the span that queued it
    text = attributes_text(spans)
    for secret in ("query-secret", "push-token-secret", "/hook/path"):
        assert secret not in text


def test_without_the_libraries_nothing_is_wrapped() -> None:
    """No opentelemetry, no prometheus_client: the hooks are no-ops and a store call is the
    store's own method (the chosen store calls it, no MeteredStore in between)."""
    script = """
import sys
sys.modules['opentelemetry'] = None
sys.modules['prometheus_client'] = None
from flask import Flask
from flask_a2a import A2A, Principal, Skill
from flask_a2a.ops import telemetry, metrics
from flask_a2a.testing import A2ATestClient
app = Flask('x')
a2a = A2A(app, skills=[Skill(id='echo', name='E', description='E',
          handler=lambda task: 'ok')], principal=lambda: Principal('alice'))
task = A2ATestClient(app).send('hi')['task']
store = a2a.exchange(app).store
inner = store.chosen()
assert task['status']['state'] == 'TASK_STATE_COMPLETED', task
assert not telemetry.AVAILABLE and telemetry.exchange_span('x', 'y') is telemetry.NO_SPAN
assert a2a.exchange(app).metrics is metrics.NOOP
assert store.target is inner, store.target  # no MeteredStore when nothing could record
print('ok')
"""
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "ok", out.stderr
