"""Traces and metrics under ``gunicorn -k gevent -w 2`` (the production setup): each worker's
spans nest in its FlaskInstrumentor span, and one scrape sums both workers' samples
(prometheus_client's multiprocess mode, with the documented ``child_exit`` hook)."""

from __future__ import annotations

import json
import typing as t
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.live_server import LiveGunicorn

ROOT = Path(__file__).resolve().parents[2]
SENDS = 8

CONF = """
from flask_a2a.gunicorn import child_exit, worker_exit  # noqa: F401
"""


def send(url: str, n: int) -> dict[str, t.Any]:
    body = {"jsonrpc": "2.0", "id": n, "method": "SendMessage", "params": {"message": {
        "messageId": f"m-{n}", "role": "ROLE_USER", "parts": [{"text": f"hi {n}"}],
        "metadata": {"skill": "echo"}}}}  # fmt: skip
    # A fresh connection each time, so both workers serve some.
    answer = requests.post(
        url + "/a2a",
        json=body,
        timeout=30,
        headers={"Authorization": "Bearer alice-token", "Connection": "close"},
    )
    task: dict[str, t.Any] = answer.json()["result"]["task"]
    return task


def scraped(url: str, name: str, **labels: str) -> float:
    text = requests.get(url + "/metrics", timeout=10).text
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def spans_of(directory: Path) -> list[dict[str, t.Any]]:
    return [
        json.loads(line)
        for path in sorted(directory.glob("spans-*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


@pytest.mark.live
def test_spans_and_metrics_under_gunicorn_gevent_two_workers(tmp_path: Path) -> None:
    spans_dir, prom_dir = tmp_path / "spans", tmp_path / "prom"
    spans_dir.mkdir()
    prom_dir.mkdir()
    conf = tmp_path / "gunicorn.conf.py"
    conf.write_text(CONF)
    env = {
        "FLASK_A2A_DATABASE_URL": f"sqlite:///{tmp_path / 'tasks.db'}",
        "PROMETHEUS_MULTIPROC_DIR": str(prom_dir),
        "OPS_SPANS_DIR": str(spans_dir),
    }
    server = LiveGunicorn("tests.ops_app:create_app()", chdir=str(ROOT), env=env, workers=2,
                          extra=["-c", str(conf)])  # fmt: skip
    try:
        tasks = [send(server.url, n) for n in range(SENDS)]
        assert all(task["status"]["state"] == "TASK_STATE_COMPLETED" for task in tasks)
        # One scrape, whichever worker answers it, counts every worker's runs.
        assert scraped(server.url, "a2a_runs_started_total", agent="default", skill="echo") == SENDS
        assert (
            scraped(
                server.url,
                "a2a_runs_settled_total",
                agent="default",
                skill="echo",
                state="completed",
            )
            == SENDS
        )
        assert (
            scraped(server.url, "a2a_run_duration_seconds_count", agent="default", skill="echo")
            == SENDS
        )
        assert scraped(server.url, "a2a_runs_live", agent="default", skill="echo") == 0
    finally:
        log = server.stop()
    assert "Traceback" not in log, log[-3000:]
    spans = spans_of(spans_dir)
    by_id = {span["context"]["span_id"]: span for span in spans}
    methods = [span for span in spans if span["name"] == "a2a.SendMessage"]
    assert sorted(span["attributes"]["a2a.task_id"] for span in methods) == sorted(
        task["id"] for task in tasks
    )
    for method in methods:
        server_span = by_id[method["parent_id"]]
        assert server_span["kind"] == "SpanKind.SERVER"  # the host's Flask span holds ours
        assert server_span["context"]["trace_id"] == method["context"]["trace_id"]
    runs = [span for span in spans if span["name"] == "a2a.run"]
    assert len(runs) == SENDS
    assert {by_id[run["parent_id"]]["name"] for run in runs} == {"a2a.SendMessage"}
