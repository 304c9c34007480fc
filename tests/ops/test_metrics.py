"""Prometheus metrics over real requests: scraped through ``A2A_METRICS_PATH`` (and a host's
own guarded route) with the test client, compared before and after (the metrics are the
process's, shared by every app of the test run)."""

from __future__ import annotations

import json
import typing as t

import pytest
from flask import Blueprint, Flask, abort, request
from prometheus_client.parser import text_string_to_metric_families

from flask_a2a import Skill
from flask_a2a.ops.metrics import metrics_view
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, echo, wait_for
from tests.webhook import Webhook

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def no_dns(host: str) -> list[str]:
    return ["127.0.0.1"]


def scrape(app: Flask, path: str = "/metrics") -> Samples:
    response = app.test_client().get(path)
    assert response.status_code == 200, response.data
    assert response.headers["Content-Type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


#: The series an agent labels (``agent``: the A2A instance's name, ``default`` here).
AGENT_SERIES = ("a2a_runs", "a2a_run_", "a2a_stream_seat", "a2a_push")


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    if name.startswith(AGENT_SERIES):
        labels.setdefault("agent", "default")
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


@pytest.fixture
def metered(make_app: t.Callable[..., Flask], gate: Gate) -> Flask:
    skills = [
        Skill(id="echo", name="Echo", description="Echo.", handler=echo),
        Skill(id="gate", name="Gate", description="Waits.", handler=gate.handler),
    ]
    config = {
        "A2A_METRICS_PATH": "/metrics",
        "A2A_MAX_CONCURRENT_RUNS_PER_OWNER": 1,
        "A2A_MAX_STREAM_SEATS_PER_OWNER": 1,
        "A2A_TERMINAL_TASK_RETENTION": 2,
        "A2A_ALLOW_PRIVATE_PUSH": True,
    }
    return make_app(skills=skills, config=config, push_resolver=no_dns)


def test_runs_started_settled_and_timed_by_skill_and_state(metered: Flask) -> None:
    client = A2ATestClient(metered, token="alice")
    before = scrape(metered)
    for _ in range(3):
        assert client.send("hi", skill="echo")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    client.send("hi", skill="nope")  # REJECTED: no skill, no run, no label from the caller
    after = scrape(metered)
    assert delta(before, after, "a2a_runs_started_total", skill="echo") == 3
    assert delta(before, after, "a2a_runs_settled_total", skill="echo", state="completed") == 3
    assert delta(before, after, "a2a_run_duration_seconds_count", skill="echo") == 3
    assert delta(before, after, "a2a_runs_live", skill="echo") == 0
    # Retention kept 2 settled tasks per tier: the 4 made here trimmed at least 2.
    assert delta(before, after, "a2a_retention_trimmed_tasks_total", kind="deleted") >= 2
    labels = {value for (_, pairs) in after for (_, value) in pairs}
    assert "alice" not in labels and "nope" not in labels  # never an owner, never a guess
    assert not any(len(value) == 36 and value.count("-") == 4 for value in labels)  # no ids


@pytest.mark.parametrize("store_kind", ["sqlite", "memory"])
def test_store_calls_are_timed_for_a_database_never_for_the_memory_store(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any], store_kind: str
) -> None:
    """A database's calls have a latency worth watching; the memory store's are dictionary
    reads in this process, and timing them would only cost each request."""
    store = new_store() if store_kind == "sqlite" else None
    options = {"store": store} if store is not None else {}
    app = make_app(config={"A2A_METRICS_PATH": "/metrics"}, **options)
    client = A2ATestClient(app, token="alice")
    before = scrape(app)
    for _ in range(3):
        assert client.send("hi", skill="echo")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    after = scrape(app)
    created = delta(before, after, "a2a_store_call_seconds_count", operation="create_task")
    if store_kind == "sqlite":
        assert created >= 3
    else:
        assert created == 0


def test_live_runs_and_run_cap_refusals(metered: Flask, gate: Gate) -> None:
    client = A2ATestClient(metered, token="alice")
    before = scrape(metered)
    client.send("x", skill="gate", configuration={"returnImmediately": True})
    assert gate.entered.wait(10)
    refused = client.rpc("SendMessage", {"message": client.message("y", skill="echo")})
    assert refused.code == -32004
    during = scrape(metered)
    assert delta(before, during, "a2a_runs_live", skill="gate") == 1
    assert delta(before, during, "a2a_run_refusals_total", limit="owner") == 1
    gate.release.set()
    assert wait_for(
        lambda: (
            delta(
                before, scrape(metered), "a2a_runs_settled_total", skill="gate", state="completed"
            )
            == 1
        )
    )
    assert delta(before, scrape(metered), "a2a_runs_live", skill="gate") == 0


def test_stream_seats_in_use_and_refused(metered: Flask, gate: Gate) -> None:
    client = A2ATestClient(metered, token="alice")
    before = scrape(metered)
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {"message": client.message(skill="gate")},
        }
    )
    first = client.client.post(client.path, data=body, headers=client.headers(None), buffered=False)
    frames = iter(first.response)
    next(frames)  # the task: the stream holds alice's one seat
    refused = client.rpc("SendStreamingMessage", {"message": client.message(skill="gate")})
    assert refused.status == 429
    during = scrape(metered)
    assert delta(before, during, "a2a_stream_seats_in_use") == 1
    assert delta(before, during, "a2a_stream_seat_refusals_total") == 1
    gate.release.set()
    list(frames)
    first.close()
    assert delta(before, scrape(metered), "a2a_stream_seats_in_use") == 0


def test_push_deliveries_sent_and_failed(metered: Flask, webhook: Webhook) -> None:
    client = A2ATestClient(metered, token="alice")
    before = scrape(metered)
    config = {"taskPushNotificationConfig": {"url": webhook.url()}}
    client.send("x", skill="echo", configuration=config)
    webhook.wait_for(2)
    assert wait_for(
        lambda: delta(before, scrape(metered), "a2a_push_deliveries_total", outcome="sent") >= 2
    )
    webhook.answer(500)
    client.send("x", skill="echo", configuration=config)
    assert wait_for(
        lambda: delta(before, scrape(metered), "a2a_push_deliveries_total", outcome="failed") >= 2
    )


def test_a_host_puts_the_view_behind_its_own_auth(make_app: t.Callable[..., Flask]) -> None:
    app = make_app()
    ops = Blueprint("ops", __name__)

    @ops.before_request
    def only_the_scraper() -> None:
        if request.headers.get("Authorization") != "Bearer scrape-token":
            abort(401)

    ops.add_url_rule("/ops/metrics", "metrics", metrics_view)
    app.register_blueprint(ops)
    http = app.test_client()
    assert http.get("/ops/metrics").status_code == 401  # the wrong caller is refused
    answer = http.get("/ops/metrics", headers={"Authorization": "Bearer scrape-token"})
    assert answer.status_code == 200 and b"a2a_runs_started_total" in answer.data
    assert http.get("/metrics").status_code == 404  # A2A_METRICS_PATH is off by default


def test_metrics_off_records_nothing(make_app: t.Callable[..., Flask]) -> None:
    metered = make_app(config={"A2A_METRICS_PATH": "/metrics"})
    quiet = make_app(config={"A2A_METRICS": False})
    before = scrape(metered)
    A2ATestClient(quiet, token="alice").send("hi")
    assert delta(before, scrape(metered), "a2a_runs_started_total", skill="echo") == 0
    A2ATestClient(metered, token="alice").send("hi")
    assert delta(before, scrape(metered), "a2a_runs_started_total", skill="echo") == 1
