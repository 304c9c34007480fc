"""Push delivery against a real webhook receiver on 127.0.0.1 (private push allowed here).

Receivers that hang hold requests until the test releases them, so bounds are observed
without sleeps.
"""

from __future__ import annotations

import collections
import json
import logging
import re
import socket
import threading
import time
import typing as t

import pytest
import requests
from flask import Flask, request
from requests.adapters import BaseAdapter

from flask_a2a import Part, Principal, Skill, TaskContext
from flask_a2a.exchange.bus import BusEvent
from flask_a2a.push.webhooks import PushSender
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, echo, wait_for
from tests.webhook import Hit, Webhook, wait_until

pytestmark = pytest.mark.usefixtures("binding")

PUSH_CONFIG = {"A2A_ALLOW_PRIVATE_PUSH": True, "A2A_PUSH_TIMEOUT": 10.0}


def no_dns(host: str) -> list[str]:
    raise socket.gaierror(socket.EAI_NONAME, "no DNS in tests")


def paced_chunks(hook: Webhook) -> Skill:
    """Three appended chunks, each written once the receiver has the event before it.

    Pacing keeps the burst under the 4 events one owner may have waiting (past that, events
    are dropped by design: see test_terminal_state_is_last_under_a_slow_receiver).
    """

    def handler(task: TaskContext) -> None:
        hook.wait_for(1)
        task.working()
        hook.wait_for(2)
        artifact_id = task.artifact([Part(text="a")], name="chunks")
        hook.wait_for(3)
        task.artifact([Part(text="b")], artifact_id=artifact_id, append=True)
        hook.wait_for(4)
        task.artifact([Part(text="c")], artifact_id=artifact_id, append=True, last_chunk=True)
        hook.wait_for(5)
        task.complete("done")

    return Skill(id="chunks", name="Chunks", description="Three chunks.", handler=handler)


def many(task: TaskContext) -> None:
    for n in range(8):
        task.artifact([Part(text=str(n))], name=f"a{n}")


ECHO = Skill(id="echo", name="Echo", description="Echo.", handler=echo)
MANY = Skill(id="many", name="Many", description="Eight artifacts.", handler=many)


def gate_skill(gate: Gate) -> Skill:
    return Skill(id="gate", name="Gate", description="Waits.", handler=gate.handler)


def running(client: A2ATestClient, token: str = "alice") -> str:
    """A task held WORKING by the gate."""
    config = {"returnImmediately": True}
    task = client.send("hold", skill="gate", token=token, configuration=config)["task"]
    task_id = str(task["id"])

    def working() -> bool:
        task = client.rpc("GetTask", {"id": task_id}, token=token).result
        return bool(task["status"]["state"] == "TASK_STATE_WORKING")

    wait_until(working)
    return task_id


@pytest.fixture
def app(make_app: t.Callable[..., Flask], webhook: Webhook, gate: Gate) -> Flask:
    skills = [ECHO, paced_chunks(webhook), MANY, gate_skill(gate)]
    return make_app(skills=skills, config=PUSH_CONFIG, push_resolver=no_dns)


@pytest.fixture
def client(app: Flask) -> A2ATestClient:
    return A2ATestClient(app, token="alice")


@pytest.fixture(autouse=True)
def _logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="flask_a2a")


def push_of(app: Flask) -> PushSender:
    return t.cast(PushSender, app.extensions["a2a"].exchange.push)


def idle(app: Flask) -> None:
    """Wait until no delivery is in flight or waiting."""
    dispatcher = push_of(app).dispatcher
    wait_until(lambda: dispatcher.in_flight == 0 and dispatcher.waiting == 0)


def kind(hit: Hit) -> str:
    body = hit.json
    (key,) = body.keys()
    if key == "statusUpdate":
        return "status:" + body[key]["status"]["state"]
    if key == "task":
        return "task:" + body[key]["status"]["state"]
    return key


def inline(url: str, **extra: t.Any) -> dict[str, t.Any]:
    return {"taskPushNotificationConfig": {"url": url, **extra}}


def create(client: A2ATestClient, task_id: str, url: str, token: str = "alice") -> t.Any:
    params = {"taskId": task_id, "url": url}
    return client.rpc("CreateTaskPushNotificationConfig", params, token=token).result


def messages(caplog: pytest.LogCaptureFixture, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if needle in r.getMessage()]


def test_headers_and_body(client: A2ATestClient, webhook: Webhook, app: Flask) -> None:
    config = inline(
        webhook.url("/with-auth"),
        token="tok-1",
        authentication={"scheme": "Bearer", "credentials": "cred-1"},
    )
    task = client.send("hi", skill="chunks", configuration=config)["task"]
    hits = webhook.wait_for(6)
    idle(app)
    assert len(webhook.hits) == 6
    for hit in hits:
        assert hit.method == "POST"
        assert hit.path == "/with-auth"
        assert hit.headers["Content-Type"] == "application/json"
        assert hit.headers["A2A-Notification-Token"] == "tok-1"
        assert hit.headers["X-A2A-Notification-Token"] == "tok-1"
        assert hit.headers["Authorization"] == "Bearer cred-1"
        body = hit.json
        assert len(body) == 1 and set(body) <= {"task", "statusUpdate", "artifactUpdate"}
        assert "jsonrpc" not in body and "result" not in body
    assert hits[0].json["task"]["id"] == task["id"]
    assert hits[1].json["statusUpdate"]["taskId"] == task["id"]


def test_no_token_no_auth_sends_neither(
    client: A2ATestClient, webhook: Webhook, app: Flask
) -> None:
    client.send("hi", skill="echo", configuration=inline(webhook.url()))
    webhook.wait_for(3)
    idle(app)
    for hit in webhook.hits:
        assert "A2A-Notification-Token" not in hit.headers
        assert "X-A2A-Notification-Token" not in hit.headers
        assert "Authorization" not in hit.headers


def test_every_event_in_stream_order(client: A2ATestClient, webhook: Webhook, app: Flask) -> None:
    """The receiver gets exactly what a stream of the same task gets, in the same order."""
    params = {
        "message": client.message("hi", skill="chunks"),
        "configuration": inline(webhook.url()),
    }
    _, events = client.stream("SendStreamingMessage", params)
    results = [event["result"] for event in events]
    hits = webhook.wait_for(len(results))
    idle(app)
    assert [hit.json for hit in webhook.hits] == results
    assert [kind(h) for h in hits] == [
        "task:TASK_STATE_SUBMITTED",
        "status:TASK_STATE_WORKING",
        "artifactUpdate",
        "artifactUpdate",
        "artifactUpdate",
        "status:TASK_STATE_COMPLETED",
    ]
    chunks = [h.json["artifactUpdate"]["artifact"]["parts"][0]["text"] for h in hits[2:5]]
    assert chunks == ["a", "b", "c"]


def test_terminal_state_is_last_under_a_slow_receiver(
    client: A2ATestClient, webhook: Webhook, app: Flask, caplog: pytest.LogCaptureFixture
) -> None:
    webhook.hang()
    task = client.send("go", skill="many", configuration=inline(webhook.url()))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    webhook.wait_for(1)  # the snapshot is in flight and held; 9 events queue behind it
    webhook.release()
    idle(app)
    kinds = [kind(hit) for hit in webhook.hits]
    assert kinds[0] == "task:TASK_STATE_SUBMITTED"
    assert kinds[-1] == "status:TASK_STATE_COMPLETED"
    assert kinds.count("status:TASK_STATE_COMPLETED") == 1
    # 4 wait per owner: the rest were dropped with a warning, and the terminal state kept.
    assert len(kinds) == 1 + 4
    names = [hit.json["artifactUpdate"]["artifact"]["name"] for hit in webhook.hits[1:-1]]
    assert names == sorted(names)
    assert messages(caplog, "push notification dropped")


def test_stale_event_is_dropped(client: A2ATestClient, webhook: Webhook, app: Flask) -> None:
    task_id = running(client)
    exchange = app.extensions["a2a"].exchange
    webhook.hang()
    create(client, task_id, webhook.url())
    webhook.wait_for(1)  # the snapshot, held
    record = exchange.store.get_task(task_id)
    push = push_of(app)

    def event(version: int, name: str) -> BusEvent:
        body = json.dumps({"statusUpdate": {"taskId": task_id, "name": name}})
        return BusEvent(task_id, version, None, body, final=False)

    push.deliver(record, event(record.version + 5, "newer"))
    push.deliver(record, event(record.version + 3, "late"))  # reached the queue after v+5
    push.deliver(record, event(record.version + 5, "again"))  # not newer: dropped too
    push.deliver(record, event(record.version + 6, "newest"))
    webhook.release()
    webhook.wait_for(3)
    idle(app)
    names = [h.json["statusUpdate"].get("name") for h in webhook.hits[1:]]
    assert names == ["newer", "newest"]


def test_gone_event_is_not_pushed(client: A2ATestClient, webhook: Webhook, app: Flask) -> None:
    task_id = running(client)
    create(client, task_id, webhook.url())
    webhook.wait_for(1)
    record = app.extensions["a2a"].exchange.store.get_task(task_id)
    push_of(app).deliver(record, BusEvent(task_id, 2**62, None, "", final=True, gone=True))
    idle(app)
    assert len(webhook.hits) == 1


def test_per_owner_bound(
    client: A2ATestClient, webhook: Webhook, app: Flask, caplog: pytest.LogCaptureFixture
) -> None:
    webhook.hang()
    first = running(client)
    second = running(client)
    for n in range(5):
        create(client, first, webhook.url(f"/alice/{n}"))
    for n in range(5, 9):
        create(client, second, webhook.url(f"/alice/{n}"))
    webhook.wait_for(4)
    dispatcher = push_of(app).dispatcher
    assert dispatcher.in_flight == 4 and dispatcher.waiting == 4
    assert len(messages(caplog, "push notification dropped")) == 1
    # Another owner is not crowded out by alice's hung receiver.
    bob_task = running(client, token="bob")
    create(client, bob_task, webhook.url("/bob/0"), token="bob")
    hits = webhook.wait_for(5)
    assert "/bob/0" in [h.path for h in hits]
    webhook.release()
    webhook.wait_for(9)
    idle(app)
    paths = sorted(webhook.paths())
    assert paths == sorted([f"/alice/{n}" for n in range(8)] + ["/bob/0"])


def owner_principal() -> Principal | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return Principal(token) if scheme == "Bearer" and token.startswith("u") else None


def test_process_bounds_are_shared_across_owners(
    make_app: t.Callable[..., Flask],
    webhook: Webhook,
    gate: Gate,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """16 in flight and 16 waiting in all, 4 of each per owner, and only the first 8 of each
    are shared that way: past them a slot (a place) goes only to an owner with none. So while
    the first owners' receivers hang, each of nine owners has a delivery going."""
    app = make_app(
        skills=[gate_skill(gate)],
        config=PUSH_CONFIG,
        push_resolver=no_dns,
        principal=owner_principal,
    )
    client = A2ATestClient(app)
    dispatcher = push_of(app).dispatcher
    webhook.hang()
    for owner in range(1, 10):
        token = f"u{owner}"
        task_id = running(client, token=token)
        for n in range(4):
            create(client, task_id, webhook.url(f"/{token}/{n}"), token=token)
        if owner == 2:
            webhook.wait_for(8)
            assert dispatcher.in_flight == 8 and dispatcher.waiting == 0
    hits = webhook.wait_for(15)
    # In flight: u1 and u2 four each, then one for each other owner.
    owners = collections.Counter(hit.path.split("/")[1] for hit in hits)
    assert owners == {"u1": 4, "u2": 4, **{f"u{n}": 1 for n in range(3, 10)}}
    # Waiting: u3 and u4 three each, u5 two (8 places), then one for each of u6-u9.
    assert dispatcher.in_flight == 15 and dispatcher.waiting == 12
    assert len(messages(caplog, "push notification dropped")) == 1 + 4 * 2  # u5's, u6-u9's
    webhook.release()
    webhook.wait_for(27)
    idle(app)
    assert len(webhook.paths()) == 27


def test_hung_receiver_does_not_delay_the_task(
    make_app: t.Callable[..., Flask], webhook: Webhook
) -> None:
    app = make_app(config=PUSH_CONFIG, push_resolver=no_dns)
    client = A2ATestClient(app, token="alice")
    client.send("warm up")
    start = time.perf_counter()
    client.send("plain")
    baseline = time.perf_counter() - start
    webhook.hang()
    start = time.perf_counter()
    task = client.send("pushed", configuration=inline(webhook.url()))["task"]
    latency = time.perf_counter() - start
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert webhook.wait_for(1)  # the receiver holds the first delivery
    print(
        f"\nSendMessage latency: {latency * 1000:.1f} ms with a hung receiver, "
        f"{baseline * 1000:.1f} ms without push"
    )
    assert latency < 1.0  # the push timeout is 10 s: nothing waited for the receiver
    # The next task of the same owner is not held up either.
    start = time.perf_counter()
    client.send("again", configuration=inline(webhook.url("/2")))
    assert time.perf_counter() - start < 1.0


def test_redirect_is_not_followed(
    client: A2ATestClient, webhook: Webhook, app: Flask, caplog: pytest.LogCaptureFixture
) -> None:
    webhook.answer(302)
    client.send("hi", skill="echo", configuration=inline(webhook.url()))
    webhook.wait_for(3)
    idle(app)
    assert set(webhook.paths()) == {"/hook"}
    assert len(messages(caplog, "HTTP 302")) == len(webhook.hits)


def test_error_status_logged_once_per_delivery(
    client: A2ATestClient, webhook: Webhook, app: Flask, caplog: pytest.LogCaptureFixture
) -> None:
    webhook.answer(500)
    task = client.send("hi", skill="echo", configuration=inline(webhook.url()))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    webhook.wait_for(3)
    idle(app)
    assert len(messages(caplog, "HTTP 500")) == len(webhook.hits) == 3  # no retry


def test_transport_error_is_logged_and_the_task_completes(
    client: A2ATestClient, app: Flask, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    task = client.send("hi", skill="echo", configuration=inline(f"http://127.0.0.1:{port}/closed"))[
        "task"
    ]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    idle(app)
    assert len(messages(caplog, "push delivery failed")) == 3


class Exploding(BaseAdapter):
    def send(self, *args: t.Any, **kwargs: t.Any) -> requests.Response:
        raise RuntimeError("boom\x1b[2J")

    def close(self) -> None:
        pass


def test_a_panicking_custom_client_fails_one_delivery(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    session = requests.Session()
    session.mount("http://", Exploding())
    app = make_app(config=PUSH_CONFIG, push_resolver=no_dns, push_client=session)
    client = A2ATestClient(app, token="alice")
    task = client.send("hi", configuration=inline("http://127.0.0.1:9/hook"))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    idle(app)
    lines = messages(caplog, "a2a: push delivery panicked")
    assert len(lines) == 3
    assert all("\x1b" not in line and "\\x1b" in line for line in lines)


def test_config_made_on_a_settled_task_gets_nothing(
    client: A2ATestClient, webhook: Webhook, app: Flask
) -> None:
    """A settled task will not change: registering on it sends nothing (not even a snapshot)."""
    task_id = client.send("hi", skill="echo")["task"]["id"]
    create(client, task_id, webhook.url())
    idle(app)
    assert webhook.hits == []


def gated_app(make_app: t.Callable[..., Flask], gate: Gate) -> Flask:
    """Push on, and one skill that holds its task WORKING until the gate opens."""
    skill = Skill(id="gate", name="Gate", description="Waits.", handler=gate.handler)
    return make_app(skills=[skill], config=PUSH_CONFIG, push_resolver=no_dns)


def test_config_made_on_a_running_task_gets_a_snapshot_then_events(
    make_app: t.Callable[..., Flask], webhook: Webhook, gate: Gate
) -> None:
    app = gated_app(make_app, gate)
    client = A2ATestClient(app, token="alice")
    task_id = client.send("hi", configuration={"returnImmediately": True})["task"]["id"]
    assert gate.entered.wait(5)
    create(client, task_id, webhook.url())
    webhook.wait_for(1)
    gate.release.set()
    webhook.wait_for(3)
    idle(app)
    assert [kind(h) for h in webhook.hits] == [
        "task:TASK_STATE_WORKING",
        "artifactUpdate",
        "status:TASK_STATE_COMPLETED",
    ]


def test_deleted_config_gets_nothing_more(
    make_app: t.Callable[..., Flask], webhook: Webhook, gate: Gate
) -> None:
    app = gated_app(make_app, gate)
    client = A2ATestClient(app, token="alice")
    other = Webhook()
    try:
        task_id = client.send("hi", configuration={"returnImmediately": True})["task"]["id"]
        assert gate.entered.wait(5)
        dropped = create(client, task_id, webhook.url())
        create(client, task_id, other.url())
        webhook.wait_for(1)
        other.wait_for(1)
        ref = {"taskId": task_id, "id": dropped["id"]}
        assert client.rpc("DeleteTaskPushNotificationConfig", ref).json["result"] is None
        gate.release.set()
        other.wait_for(3)  # the kept config proves the later events were sent
        idle(app)
        assert len(webhook.hits) == 1
    finally:
        other.close()


def test_a_receiver_that_never_answers_times_out_and_the_config_moves_on(
    make_app: t.Callable[..., Flask], webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    config = {**PUSH_CONFIG, "A2A_PUSH_TIMEOUT": 0.2}
    app = make_app(config=config, push_resolver=no_dns)
    client = A2ATestClient(app, token="alice")
    webhook.hang()
    client.send("hi", configuration=inline(webhook.url()))
    webhook.wait_for(2)  # the first delivery gave up, so the next one was sent
    webhook.release()
    webhook.wait_for(3)
    idle(app)
    timeouts = messages(caplog, "timed out")
    assert 1 <= len(timeouts) <= 2  # the first for sure; the second only if release was late
    assert all("push delivery failed" in line for line in timeouts)


class Clock:
    """A monotonic clock the test moves by hand (the drop warnings' rate limit reads it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Bursts:
    """A handler writing a burst of artifacts per phase the test opens, then completing."""

    def __init__(self, sizes: t.Sequence[int]) -> None:
        self.sizes = sizes
        self.go = [threading.Event() for _ in sizes]
        self.done = [threading.Event() for _ in sizes]
        self.entered = threading.Event()

    def handler(self, task: TaskContext) -> None:
        task.working()
        self.entered.set()
        for phase, size in enumerate(self.sizes):
            assert self.go[phase].wait(10)
            for n in range(size):
                task.artifact([Part(text=str(n))], name=f"p{phase}-{n}")
            self.done[phase].set()


DROPPED = re.compile(r"config (\S+) owner alice \((\d+) dropped since the last warning")


def drop_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, int]]:
    """(config id, count) of every dropped-event warning so far."""
    found = [DROPPED.search(m) for m in messages(caplog, "push notification dropped")]
    assert all(found)
    return [(m.group(1), int(m.group(2))) for m in found if m]


def test_drop_warnings_are_one_per_config_per_interval_with_a_count(
    make_app: t.Callable[..., Flask], webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    bursts = Bursts([30, 1])
    skill = Skill(id="bursts", name="Bursts", description="Bursts.", handler=bursts.handler)
    app = make_app(skills=[skill], config=PUSH_CONFIG, push_resolver=no_dns)
    client = A2ATestClient(app, token="alice")
    clock = Clock()
    drops = push_of(app).dispatcher.drops
    drops.clock = clock
    webhook.hang()
    task = client.send("go", skill="bursts", configuration={"returnImmediately": True})["task"]
    assert bursts.entered.wait(10)
    first = create(client, task["id"], webhook.url("/a"))["id"]
    second = create(client, task["id"], webhook.url("/b"))["id"]
    webhook.wait_for(2)  # both snapshots in flight and held: alice's 4 waiting seats are free
    # 30 artifacts x 2 configs: 4 wait (2 per config), 56 are dropped in one burst.
    bursts.go[0].set()
    assert bursts.done[0].wait(10)
    assert sorted(drop_lines(caplog)) == sorted([(first, 1), (second, 1)])
    # Within the interval nothing more is logged; past it, the next drop reports the rest.
    clock.now += drops.interval - 0.001
    assert len(drop_lines(caplog)) == 2
    clock.now += 0.001
    bursts.go[1].set()
    assert bursts.done[1].wait(10)
    assert sorted(drop_lines(caplog)[2:]) == sorted([(first, 28), (second, 28)])
    # The terminal state replaces a waiting event (a drop within the interval: counted); the
    # settled task's lanes retire once delivered, and their last line carries that count.
    webhook.release()
    webhook.wait_for(6)
    idle(app)
    kinds = [kind(hit) for hit in webhook.hits]
    assert kinds.count("status:TASK_STATE_COMPLETED") == 2
    assert wait_for(lambda: len(drop_lines(caplog)) >= 6)  # each lane's last line, as it retires
    assert sorted(drop_lines(caplog)[4:]) == sorted([(first, 1), (second, 1)])
    per_config = {first: 0, second: 0}
    for config_id, count in drop_lines(caplog):
        per_config[config_id] += count
    # Each config was offered 33 events (snapshot, 31 artifacts, COMPLETED) and got 3.
    assert per_config == {first: 30, second: 30}
    assert len(webhook.hits) == 6
