"""Push delivery through the queue (``A2A_PUSH_QUEUE``): a real RQ worker process, real Redis.

The worker is ``flask a2a push-worker`` on tests/push_queue_app.py, started per test with that
test's settings (a unique queue name and key prefix on the shared Redis, whose keys are deleted
after). Receivers are tests/webhook.py on 127.0.0.1; backoffs are small through the config.
Skipped where no Redis answers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import typing as t
import uuid
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from flask import Flask

from flask_a2a import Part, Skill, TaskContext
from flask_a2a.card.signing import SigningKey, b64url_decode
from flask_a2a.config import ConfigError
from flask_a2a.ops.metrics import Recorder
from flask_a2a.push import NotificationVerifier, ReplayedNotification
from flask_a2a.push.queue import PushQueue, RetryPolicy
from flask_a2a.push.queue_lanes import lane_id
from flask_a2a.testing import A2ATestClient
from tests import stack
from tests.conftest import wait_for
from tests.live.test_rq_recipe import REDIS_URL, redis_answers
from tests.live_server import free_port
from tests.push.test_push_delivery import kind
from tests.push.test_ssrf import Rebinding
from tests.webhook import Hit, Webhook

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not redis_answers(), reason=f"no Redis at {REDIS_URL}")


def queue_settings(**overrides: t.Any) -> dict[str, t.Any]:
    """A queue of this test's own, and small backoffs."""
    tag = uuid.uuid4().hex[:12]
    settings: dict[str, t.Any] = {
        "A2A_PUSH_QUEUE": f"a2a-push-test-{tag}",
        "A2A_PUSH_QUEUE_URL": REDIS_URL,
        "A2A_REDIS_PREFIX": f"a2a-test-{tag}:",
        "A2A_PUSH_RETRY_ATTEMPTS": 5,
        "A2A_PUSH_RETRY_BACKOFF": 0.05,
        "A2A_PUSH_RETRY_MAX_DELAY": 0.2,
        "A2A_PUSH_PAUSE_AFTER": 1000,
        "A2A_ALLOW_PRIVATE_PUSH": True,
        "A2A_PUSH_TIMEOUT": 5.0,
    }
    settings.update(overrides)
    return settings


class Worker:
    """``flask a2a push-worker`` in a subprocess, with the test's settings; its output kept."""

    def __init__(self, settings: dict[str, t.Any], **env: str) -> None:
        self.output = tempfile.NamedTemporaryFile("w+", suffix=".log")  # noqa: SIM115
        environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
        environ["FLASK_APP"] = "tests.push_queue_app:create_app"  # --app is Flask 2.2+
        environ.update({key: json.dumps(value) for key, value in settings.items()})
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "flask",
                "a2a",
                "push-worker",
            ],
            cwd=ROOT,
            env=environ,
            stdout=self.output,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        self.output.seek(0)
        return self.output.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # RQ: a warm shutdown
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.output.close()


@pytest.fixture
def redis_keys() -> t.Iterator[list[str]]:
    """Prefixes and queue names a test used; their keys are deleted after it."""
    from redis import Redis

    used: list[str] = []
    yield used
    client = Redis.from_url(REDIS_URL)
    for pattern in used:
        keys = list(client.scan_iter(match=f"*{pattern}*", count=1000))
        if keys:
            client.delete(*keys)
    client.close()


@contextlib.contextmanager
def worker(settings: dict[str, t.Any], redis_keys: list[str], **env: str) -> t.Iterator[Worker]:
    redis_keys.extend([settings["A2A_REDIS_PREFIX"], settings["A2A_PUSH_QUEUE"]])
    running = Worker(settings, **env)
    try:
        yield running
    finally:
        running.stop()


def queue_of(app: Flask) -> PushQueue:
    queue = app.extensions["a2a"].exchange.push.queue
    assert queue is not None
    return t.cast(PushQueue, queue)


def chunks(task: TaskContext) -> None:
    task.working()
    artifact = task.artifact([Part(text="a")], name="out")
    task.artifact([Part(text="b")], artifact_id=artifact, append=True)
    task.complete("done")


CHUNKS = Skill(id="chunks", name="Chunks", description="Two chunks.", handler=chunks)


def timeline(hits: list[Hit]) -> list[tuple[float, int, str]]:
    start = hits[0].at
    return [(round(hit.at - start, 3), hit.status, kind(hit)) for hit in hits]


def signing_key() -> tuple[SigningKey, str]:
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return SigningKey("push-test", private), pem


def test_receiver_down_for_three_attempts_gets_every_notification_once_in_order(
    make_app: t.Callable[..., Flask],
    webhook: Webhook,
    redis_keys: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = queue_settings(A2A_PUBLIC_BASE_URL="https://agent.example")
    key, pem = signing_key()
    app = make_app(skills=[CHUNKS], config=settings, signing_keys=[key])
    client = A2ATestClient(app, token="alice")
    webhook.fail_first(3)
    with worker(settings, redis_keys, PUSH_TEST_SIGNING_PEM=pem) as running:
        started = time.monotonic()
        task = client.send(
            "go",
            skill="chunks",
            configuration={"taskPushNotificationConfig": {"url": webhook.url()}},
        )["task"]
        answered = time.monotonic() - started
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        hits = webhook.wait_for(3 + 5, timeout=30)  # 3 refused, then 5 notifications
        wait_for(lambda: "COMPLETED" in str(queue_of(app).status(task["id"])), 5)
        status = queue_of(app).status(task["id"])
        log = running.log()
    delivered = [hit for hit in hits if hit.status == 200]
    assert [hit.status for hit in hits[:3]] == [503, 503, 503]
    assert hits[3].body == hits[0].body  # the first notification, retried until it got through
    # Every notification once, in the order written, the terminal state last.
    assert [kind(hit) for hit in delivered] == [
        "task:TASK_STATE_SUBMITTED",
        "status:TASK_STATE_WORKING",
        "artifactUpdate",
        "artifactUpdate",
        "status:TASK_STATE_COMPLETED",
    ]
    assert len({hit.body for hit in delivered}) == len(delivered)
    assert len(webhook.hits) == len(hits)  # nothing more came
    (entry,) = status.values()
    assert (entry["sent"], entry["retried"], entry["given_up"]) == (len(delivered), 3, 0)
    gaps = [round(b.at - a.at, 3) for a, b in zip(hits[:4], hits[1:4])]
    with capsys.disabled():
        print(
            f"\nretry timeline (s, status, event): {timeline(hits)}; waits {gaps}; "
            f"send answered in {answered:.3f}s"
        )
    # Waits: attempt n waits within [0.5, 1) x min(0.2, 0.05 x 2^(n-1)), plus the attempt.
    assert 0.025 <= gaps[0] and 0.05 <= gaps[1] and 0.1 <= gaps[2]
    assert "push delivery got HTTP 503" in log
    # Signed in the worker with the app's key: every attempt at one notification carries the
    # same jti, so the receiver's verifier takes it once and sees a resend as a replay.
    verifier = NotificationVerifier([key], audience=webhook.url())
    tokens = [hit.headers["Authorization"].removeprefix("Bearer ") for hit in hits]
    assert len({claims(token)["jti"] for token in tokens[:4]}) == 1
    assert len({claims(token)["jti"] for token in tokens[3:]}) == 5
    assert len(hits) == len(tokens)
    for hit, token in zip(hits[3:], tokens[3:]):
        assert verifier.verify_parts(token, hit.body).task_id == task["id"]
    with pytest.raises(ReplayedNotification):
        verifier.verify_parts(tokens[3], hits[3].body)


def claims(token: str) -> dict[str, t.Any]:
    return t.cast(dict[str, t.Any], json.loads(b64url_decode(token.split(".")[1])))


def test_a_longer_wait_is_scheduled_and_keeps_the_order(
    make_app: t.Callable[..., Flask],
    webhook: Webhook,
    redis_keys: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Waits of 1 s and more go through RQ's scheduler (whole seconds) and free the worker.
    settings = queue_settings(A2A_PUSH_RETRY_BACKOFF=2.0, A2A_PUSH_RETRY_MAX_DELAY=2.0)
    app = make_app(skills=[CHUNKS], config=settings)
    webhook.fail_first(1)
    with worker(settings, redis_keys) as running:
        task = A2ATestClient(app, token="alice").send(
            "go",
            skill="chunks",
            configuration={"taskPushNotificationConfig": {"url": webhook.url()}},
        )["task"]
        hits = webhook.wait_for(1 + 5, timeout=30)
        log = running.log()
    assert [kind(hit) for hit in hits if hit.status == 200][-1] == "status:TASK_STATE_COMPLETED"
    assert [hit.body for hit in hits[:2]] == [hits[0].body] * 2
    assert len({hit.body for hit in hits[1:]}) == 5 and task["id"] in hits[-1].body.decode()
    wait = hits[1].at - hits[0].at
    with capsys.disabled():
        print(f"\nscheduled retry timeline (s, status, event): {timeline(hits)}")
    assert wait >= 1.0  # the jittered 1..2 s, never early (RQ's scheduler polls each second)
    # Two jobs started: the first, and the one the scheduler queued for later.
    assert log.count(": flask_a2a.push.queue.run_lane(") == 2


def test_push_status_shows_the_owner_what_happened(
    make_app: t.Callable[..., Flask], webhook: Webhook, redis_keys: list[str]
) -> None:
    settings = queue_settings(A2A_PUSH_RETRY_ATTEMPTS=2)
    app = make_app(config=settings)
    webhook.answer(500)
    with worker(settings, redis_keys):
        task = A2ATestClient(app, token="alice").send(
            "hi",
            configuration={"taskPushNotificationConfig": {"id": "hook-1", "url": webhook.url()}},
        )["task"]
        assert wait_for(
            lambda: queue_of(app).status(task["id"]).get("hook-1", {}).get("given_up") == 3, 20
        )
    from flask_a2a.cli import a2a_cli

    runner = stack.cli_runner(app)  # the app as Flask's CLI loads it (any Flask)
    shown = runner.invoke(a2a_cli, ["push-status", task["id"], "--owner", "alice"])
    other = runner.invoke(a2a_cli, ["push-status", task["id"], "--owner", "mallory"])
    assert shown.exit_code == 0, shown.output
    assert "owner alice" in shown.output and "COMPLETED" in shown.output
    row = next(line for line in shown.output.splitlines() if line.startswith("hook-1"))
    assert row.split()[2:6] == ["0", "3", "3", "0"]  # sent, retried, given up, dropped
    assert "HTTP 500" in row
    assert other.exit_code == 1 and f"no task {task['id']} for mallory" in other.output


def test_dead_receivers_never_delay_the_task_and_retries_stop_at_the_bound(
    make_app: t.Callable[..., Flask],
    webhook: Webhook,
    redis_keys: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = queue_settings(A2A_PUSH_RETRY_ATTEMPTS=3, A2A_MAX_PUSH_CONFIGS_PER_TASK=16)
    policy = RetryPolicy(attempts=3, backoff=0.05, max_delay=0.2)

    def half_second(task: TaskContext) -> None:
        if task.message.text == "start":
            task.require_input("go on?")
            return
        threading.Event().wait(0.5)  # the task's own work
        task.complete("done")

    skill = Skill(id="slow", name="Slow", description="Half a second.", handler=half_second)
    app = make_app(skills=[skill], config=settings)
    client = A2ATestClient(app, token="alice")
    webhook.answer(503)
    with worker(settings, redis_keys):
        task = client.send("start", skill="slow")["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        for n in range(16):
            created = client.rpc(
                "CreateTaskPushNotificationConfig",
                {"taskId": task["id"], "url": webhook.url(f"/dead/{n}")},
            )
            assert "error" not in created.json, created.text
        started = time.monotonic()
        done = client.send("go", skill="slow", task_id=task["id"])["task"]
        answered = time.monotonic() - started
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        # 16 configs x (snapshot, WORKING, COMPLETED), each notification tried 3 times.
        expected = 16 * 3 * 3
        webhook.wait_for(expected, timeout=60)
        assert wait_for(
            lambda: sum(e["given_up"] for e in queue_of(app).status(task["id"]).values()) == 16 * 3,
            20,
        )
    per_notification: dict[tuple[str, bytes], int] = {}
    for hit in webhook.hits:
        per_notification[(hit.path, hit.body)] = per_notification.get((hit.path, hit.body), 0) + 1
    assert len(per_notification) == 16 * 3
    assert set(per_notification.values()) == {3}  # the bound, and not one attempt more
    assert len(webhook.hits) == expected
    with capsys.disabled():
        print(
            f"\n0.5 s task with 16 dead receivers answered in {answered:.3f}s "
            f"(one notification's retry window: {policy.window():.2f}s; "
            f"all 48 notifications retried serially: {48 * policy.window():.1f}s)"
        )
    # The work's half second and the exchange's own cost (a loaded CI box included), far below
    # the 7.2 s the receivers' retries take: nothing of it is waited for by the task.
    assert answered < 0.5 + 1.5 < 48 * policy.window() / 3


def test_a_failing_receiver_pauses_its_config(
    make_app: t.Callable[..., Flask], webhook: Webhook, redis_keys: list[str]
) -> None:
    settings = queue_settings(A2A_PUSH_RETRY_ATTEMPTS=3, A2A_PUSH_PAUSE_AFTER=4)
    app = make_app(skills=[CHUNKS], config=settings)
    webhook.answer(503)
    with worker(settings, redis_keys) as running:
        task = A2ATestClient(app, token="alice").send(
            "go",
            skill="chunks",
            configuration={"taskPushNotificationConfig": {"id": "flaky", "url": webhook.url()}},
        )["task"]
        assert wait_for(
            lambda: queue_of(app).status(task["id"]).get("flaky", {}).get("given_up") == 5, 20
        )
        entry = queue_of(app).status(task["id"])["flaky"]
        assert entry["paused"] > 590
        log = running.log()
    # 3 attempts at the first notification (given up), 1 at the second: 4 in a row -> paused,
    # and everything that waited behind it is given up without a dial.
    assert len(webhook.hits) == 4
    assert entry["retried"] == 2 and entry["sent"] == 0
    assert entry["dropped"] == 0  # all five were waiting when it paused
    assert "paused for 600s: its receiver failed 4 times in a row" in log


def test_worker_guard_refuses_a_name_that_rebinds_to_loopback(
    make_app: t.Callable[..., Flask], webhook: Webhook, redis_keys: list[str]
) -> None:
    settings = queue_settings(A2A_ALLOW_PRIVATE_PUSH=False, A2A_PUSH_RETRY_ATTEMPTS=2)
    resolver = Rebinding()
    app = make_app(config=settings, push_resolver=resolver)
    with worker(settings, redis_keys, PUSH_TEST_RESOLVER="loopback") as running:
        task = A2ATestClient(app, token="alice").send(
            "hi",
            configuration={
                "taskPushNotificationConfig": {
                    "id": "rebound",
                    "url": f"http://rebind.test:{webhook.port}/hook",
                }
            },
        )["task"]
        assert wait_for(
            lambda: queue_of(app).status(task["id"]).get("rebound", {}).get("given_up") == 3, 20
        )
        log = running.log()
    assert resolver.calls == ["rebind.test"]  # registration only: nothing dials in this process
    assert webhook.hits == []
    assert "push address refused: rebind.test (127.0.0.1) is loopback" in log


def test_redis_outage_falls_back_to_in_process_with_one_log_line(
    make_app: t.Callable[..., Flask], webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="flask_a2a")
    dead = f"redis://127.0.0.1:{free_port()}/0"
    app = make_app(config=queue_settings(A2A_PUSH_QUEUE_URL=dead))
    client = A2ATestClient(app, token="alice")
    for n in range(2):
        started = time.monotonic()
        task = client.send(
            "hi", configuration={"taskPushNotificationConfig": {"url": webhook.url(f"/{n}")}}
        )["task"]
        assert time.monotonic() - started < 5
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    hits = webhook.wait_for(6)
    assert {hit.path for hit in hits} == {"/0", "/1"}  # delivered in process, best effort
    lines = [r.getMessage() for r in caplog.records if "does not answer" in r.getMessage()]
    assert len(lines) == 1 and "delivered in process" in lines[0]


def test_push_queue_needs_a_redis(make_app: t.Callable[..., Flask]) -> None:
    with pytest.raises(ConfigError, match="A2A_PUSH_QUEUE needs a Redis"):
        make_app(config={"A2A_PUSH_QUEUE": "a2a-push"})
    with pytest.raises(ConfigError, match="A2A_PUSH_RETRY_ATTEMPTS"):
        make_app(config={**queue_settings(), "A2A_PUSH_RETRY_ATTEMPTS": 0})


def test_backoff_is_doubling_with_equal_jitter_and_capped() -> None:
    policy = RetryPolicy(attempts=6, backoff=1.0, max_delay=5.0)
    assert [policy.delay(n, lambda: 0.0) for n in range(1, 6)] == [0.5, 1.0, 2.0, 2.5, 2.5]
    assert [policy.delay(n, lambda: 1.0) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert policy.window() == 1 + 2 + 4 + 5 + 5


class Counting(Recorder):
    """Records what the queue counts (the worker's metrics, observed in this process)."""

    def __init__(self) -> None:
        self.sent: list[bool] = []
        self.outcomes: list[str] = []

    def push_sent(self, ok: bool) -> None:
        self.sent.append(ok)

    def push_outcome(self, outcome: str) -> None:
        self.outcomes.append(outcome)


class Deferred:
    """The jobs seam: remembers the lane jobs instead of running them (the test drains)."""

    def __init__(self) -> None:
        self.submitted: list[tuple[str, float]] = []

    def submit(self, lane_job: str, delay: float = 0.0) -> None:
        self.submitted.append((lane_job, delay))


def test_outcomes_are_counted_as_metrics(
    make_app: t.Callable[..., Flask], webhook: Webhook, redis_keys: list[str]
) -> None:
    settings = queue_settings(A2A_PUSH_RETRY_ATTEMPTS=2)
    redis_keys.extend([settings["A2A_REDIS_PREFIX"], settings["A2A_PUSH_QUEUE"]])
    app = make_app(config=settings)
    push = app.extensions["a2a"].exchange.push
    queue, jobs, counting = queue_of(app), Deferred(), Counting()
    queue.jobs, queue.metrics, push.metrics = jobs, counting, counting
    webhook.fail_first(3)
    task = A2ATestClient(app, token="alice").send(
        "hi", configuration={"taskPushNotificationConfig": {"id": "c", "url": webhook.url()}}
    )["task"]
    lane = lane_id(task["id"], "c")
    assert wait_for(lambda: queue.redis.llen(queue.key("lane", lane)) == 3)
    (submitted,) = jobs.submitted  # one job for the lane, however many wait in it
    assert submitted[0].startswith(lane + ":") and submitted[1] == 0.0
    stale = f"{lane}:a-job-whose-lease-lapsed"
    queue.drain(stale, push)  # a newer job holds the lane: this one stops at once
    assert webhook.hits == []
    queue.drain(submitted[0], push)
    # 1st: failed twice, given up; 2nd: failed, then sent; 3rd: sent.
    assert counting.sent == [False, False, False, True, True]
    assert counting.outcomes == ["retried", "given_up", "retried"]
    assert [hit.status for hit in webhook.hits] == [503, 503, 503, 200, 200]
    assert queue.redis.exists(queue.key("busy", lane)) == 0  # the lane was released
