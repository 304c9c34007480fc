"""The Redis bus against a real Redis, in one process: two apps (replicas A and B), each with
its own engine on the same SQLite tables and its own :class:`RedisBus`, under one key prefix.

Store polling is made too slow to matter (30 s), so what crosses replicas here crossed Redis.
The gunicorn replicas on PostgreSQL are in tests/live/test_fleet.py.
"""

from __future__ import annotations

import logging
import socket
import threading
import typing as t
import uuid

import pytest
import sqlalchemy as sa
from flask import Flask

from flask_a2a import ConfigError, Part, Skill, TaskContext
from flask_a2a.store.sql import SQLStore
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, wait_for
from tests.live_server import HOST, werkzeug_server
from tests.redis_support import REDIS_URL, SSEReader, keys_of, redis_prefix  # noqa: F401

SLOW = 30.0  # the store poll and keep-alive: nothing here waits for them


class Pair(t.NamedTuple):
    a: A2ATestClient
    b: A2ATestClient
    app_a: Flask
    app_b: Flask


def exchange(app: Flask) -> t.Any:
    return app.extensions["a2a"].exchange


@pytest.fixture
def make_pair(
    make_app: t.Callable[..., Flask],
    tmp_path: t.Any,
    redis_prefix: str,  # noqa: F811
) -> t.Iterator[t.Callable[..., Pair]]:
    stores: list[SQLStore] = []
    table_prefix = f"a2a_{uuid.uuid4().hex[:10]}_"

    def build(skills: list[Skill], **config: t.Any) -> Pair:
        settings = {
            "A2A_REDIS_URL": REDIS_URL,
            "A2A_REDIS_PREFIX": redis_prefix,
            "A2A_REPLICA_POLL_INTERVAL": SLOW,
            "A2A_KEEPALIVE_INTERVAL": SLOW,
            **config,
        }
        apps = []
        for _ in range(2):
            store = SQLStore(sa.create_engine(f"sqlite:///{tmp_path / 'a2a.db'}"), table_prefix)
            stores.append(store)
            apps.append(make_app(skills=skills, config=settings, store=store))
        return Pair(A2ATestClient(apps[0], "alice"), A2ATestClient(apps[1], "alice"), *apps)

    yield build
    for store in stores[:1]:
        store.drop()


class Stepper:
    """Writes one artifact chunk each time the test calls :meth:`step`."""

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks
        self.started = threading.Event()
        self._step = threading.Semaphore(0)

    def handler(self, task: TaskContext) -> None:
        task.working()
        self.started.set()
        artifact_id = None
        for i in range(self.chunks):
            assert self._step.acquire(timeout=10)
            artifact_id = task.artifact(
                [Part(text=str(i))], name="chunks", artifact_id=artifact_id,
                append=artifact_id is not None,
            )  # fmt: skip

    def skill(self) -> Skill:
        return Skill(id="chunks", name="Chunks", description="Chunks.", handler=self.handler)

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            self._step.release()


def test_the_bus_is_chosen_by_a2a_redis_url(make_pair: t.Callable[..., Pair]) -> None:
    from flask_a2a.fleet.redis_bus import RedisBus

    pair = make_pair([Skill(id="echo", name="Echo", description="Echo.", handler=print)])
    assert isinstance(exchange(pair.app_a).bus, RedisBus)
    assert exchange(pair.app_a).bus.replica_id != exchange(pair.app_b).bus.replica_id


def test_a_subscriber_on_b_gets_every_chunk_of_a_run_on_a_in_order(
    make_pair: t.Callable[..., Pair],
) -> None:
    stepper = Stepper(10)
    pair = make_pair([stepper.skill()])
    task_id = pair.a.send("go", configuration={"returnImmediately": True})["task"]["id"]
    assert stepper.started.wait(10)
    with werkzeug_server(pair.app_b) as url:
        stream = SSEReader(url + "/a2a", "SubscribeToTask", {"id": task_id})
        events = [stream.next()]  # the snapshot: B watches the task from here on
        stepper.step(10)
        events += stream.rest()

    assert "task" in events[0]["result"]  # the snapshot first
    chunks = [e["result"]["artifactUpdate"] for e in events[1:] if "artifactUpdate" in e["result"]]
    assert [c["artifact"]["parts"][0]["text"] for c in chunks] == [str(i) for i in range(10)]
    assert [c.get("append", False) for c in chunks] == [False] + [True] * 9
    last = events[-1]["result"]["statusUpdate"]["status"]
    assert last["state"] == "TASK_STATE_COMPLETED"
    assert len(events) == 12  # snapshot, ten chunks, COMPLETED: none twice, none coalesced


def test_a_cancel_served_by_b_cuts_the_run_on_a_through_the_bus(
    make_pair: t.Callable[..., Pair], gate: Gate
) -> None:
    pair = make_pair([Skill(id="gate", name="Gate", description="Waits.", handler=gate.handler)])
    task_id = pair.a.send("go", configuration={"returnImmediately": True})["task"]["id"]
    assert gate.entered.wait(10)
    with werkzeug_server(pair.app_a) as url:
        stream = SSEReader(url + "/a2a", "SubscribeToTask", {"id": task_id})
        assert stream.next()["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
        assert pair.b.rpc("CancelTask", {"id": task_id}).result["status"]["state"] == (
            "TASK_STATE_CANCELED"
        )
        # The store poll is 30 s away: only the bus can have told A this soon.
        assert wait_for(lambda: not exchange(pair.app_a).live_runs(), timeout=5)
        events = stream.rest(timeout=5)
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert "artifacts" not in pair.a.rpc("GetTask", {"id": task_id}).result  # cut, not finished


def test_a_handed_off_task_settled_by_an_updater_on_b_reaches_a_stream_on_a(
    make_pair: t.Callable[..., Pair],
) -> None:
    def handoff(task: TaskContext) -> None:
        task.hand_off("queued")

    pair = make_pair([Skill(id="job", name="Job", description="Queued.", handler=handoff)])
    task = pair.a.send("go")["task"]
    with werkzeug_server(pair.app_a) as url:
        stream = SSEReader(url + "/a2a", "SubscribeToTask", {"id": task["id"]})
        events = [stream.next()]
        updater = exchange(pair.app_b).task_updater(task["id"])
        updater.artifact([Part(text="result")], name="out")
        updater.complete("done on B")
        events += stream.rest(timeout=5)
    kinds = [next(iter(e["result"])) for e in events]
    assert kinds == ["task", "artifactUpdate", "statusUpdate"]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_runs_nobody_watches_write_nothing_to_redis(
    make_pair: t.Callable[..., Pair],
    redis_prefix: str,  # noqa: F811
) -> None:
    stepper = Stepper(3)
    pair = make_pair([stepper.skill()])
    stepper.step(3)
    assert pair.a.send("blocking")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    stepper.step(3)
    task_id = pair.a.send("go", configuration={"returnImmediately": True})["task"]["id"]
    assert wait_for(
        lambda: (
            pair.b.rpc("GetTask", {"id": task_id}).result["status"]["state"]
            == "TASK_STATE_COMPLETED"
        )
    )
    assert keys_of(redis_prefix) == []


def test_a_stream_ended_leaves_only_expiring_keys(
    make_pair: t.Callable[..., Pair],
    redis_prefix: str,  # noqa: F811
) -> None:
    import redis

    stepper = Stepper(2)
    pair = make_pair([stepper.skill()])
    task_id = pair.a.send("go", configuration={"returnImmediately": True})["task"]["id"]
    assert stepper.started.wait(10)
    with werkzeug_server(pair.app_b) as url:
        stream = SSEReader(url + "/a2a", "SubscribeToTask", {"id": task_id})
        events = [stream.next()]
        stepper.step(2)
        events += stream.rest()
    assert "statusUpdate" in events[-1]["result"], events
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    found = keys_of(redis_prefix)
    assert found and not any(":w:" in key for key in found)  # the watch went with the stream
    assert all(0 < client.pttl(key) for key in found)  # the inbox (and ctl) expire
    client.close()


class Mute:
    """A TCP listener that never answers: a Redis that hangs."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind((HOST, 0))
        self.sock.listen(64)
        self.accepted: list[socket.socket] = []
        self.url = f"redis://{HOST}:{self.sock.getsockname()[1]}/0"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.accepted.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_a_redis_that_hangs_costs_a_run_one_timeout_and_one_log_line(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    stepper = Stepper(20)
    mute = Mute()
    try:
        app = make_app(
            skills=[stepper.skill()],
            config={"A2A_REDIS_URL": mute.url, "A2A_REDIS_TIMEOUT": 0.2},
        )
        client = A2ATestClient(app, "alice")
        with caplog.at_level(logging.WARNING, logger="flask_a2a"):
            stepper.step(20)
            task = client.send("go", configuration={"returnImmediately": True})["task"]
            assert wait_for(lambda: not exchange(app).live_runs())
        stored = client.rpc("GetTask", {"id": task["id"]}).result
        assert stored["status"]["state"] == "TASK_STATE_COMPLETED"
        assert len(stored["artifacts"][0]["parts"]) == 20
        outage = [r for r in caplog.records if "Redis does not answer" in r.getMessage()]
        assert len(outage) == 1
        # 21 events, and Redis was tried again only after the retry pause, not per event.
        assert len(mute.accepted) <= 3
    finally:
        mute.close()


def test_fleet_limits_count_an_owners_runs_and_streams_across_replicas(
    make_pair: t.Callable[..., Pair], gate: Gate
) -> None:
    pair = make_pair(
        [Skill(id="gate", name="Gate", description="Waits.", handler=gate.handler)],
        A2A_FLEET_LIMITS=True, A2A_MAX_CONCURRENT_RUNS_PER_OWNER=1,
        A2A_MAX_STREAM_SEATS_PER_OWNER=1,
    )  # fmt: skip
    task_id = pair.a.send("go", configuration={"returnImmediately": True})["task"]["id"]
    assert gate.entered.wait(10)
    refused = pair.b.rpc("SendMessage", {"message": pair.b.message("again")})
    assert refused.code == -32004
    other = pair.b.send("bob", configuration={"returnImmediately": True}, token="bob")
    assert other["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"  # another owner's cap

    with werkzeug_server(pair.app_a) as url_a, werkzeug_server(pair.app_b) as url_b:
        on_a = SSEReader(url_a + "/a2a", "SubscribeToTask", {"id": task_id})
        assert "task" in on_a.next()["result"]
        on_b = SSEReader(url_b + "/a2a", "SubscribeToTask", {"id": task_id})
        assert on_b.response.status_code == 429  # A's stream holds alice's one seat
        gate.release.set()
        assert on_a.rest()[-1]["result"]["statusUpdate"]["status"]["state"] == (
            "TASK_STATE_COMPLETED"
        )
    # Both leases went back with the run and the stream.
    assert pair.b.send("again")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_fleet_limits_need_the_redis_bus(make_app: t.Callable[..., Flask]) -> None:
    with pytest.raises(ConfigError, match="A2A_FLEET_LIMITS needs the Redis bus"):
        make_app(config={"A2A_FLEET_LIMITS": True})


def test_a_blocking_send_costs_the_redis_bus_nothing(
    make_app: t.Callable[..., Flask],
) -> None:
    """Issue 19: with the Redis bus, blocking sends with no subscriber make no Redis call,
    including the settles whose retention trim removes an older settled task of the tier."""
    from tests.redis_support import RedisServer

    server = RedisServer()  # its own server: every command it counts is this app's
    try:
        import redis

        app = make_app(
            config={
                "A2A_REDIS_URL": server.url,
                "A2A_TERMINAL_TASK_RETENTION": 2,
                "A2A_REPLICA_POLL_INTERVAL": SLOW,
            }
        )
        client = A2ATestClient(app, "alice")
        client.send("warm", skill="echo")  # the bus's own set-up (its script, its reader)
        admin = redis.Redis.from_url(server.url)
        admin.config_resetstat()
        for i in range(8):
            task = client.send(f"hi {i}", skill="echo")["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        listed = client.rpc("ListTasks", {}).result
        assert listed["totalSize"] == 2  # retention trimmed six settled tasks meanwhile
        stats = admin.info("commandstats")
        admin.close()
        assert set(stats) == {"cmdstat_config|resetstat"}, stats
    finally:
        server.stop()


def test_a_retry_pause_that_is_not_positive_is_refused_before_connecting() -> None:
    from flask_a2a.fleet.redis_bus import RedisBus

    with pytest.raises(ConfigError, match="A2A_REDIS_RETRY must be positive"):
        RedisBus("redis://127.0.0.1:1/0", retry=0)
