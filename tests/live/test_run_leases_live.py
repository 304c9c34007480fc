"""Run leases with real processes and real faults: ``kill -9`` of a replica mid-run on
PostgreSQL and on MariaDB (the survivor settles its task FAILED, ends its streams, fires the
webhook registered on the dead replica; a paused task stays paused), and a single process on a
SQLite file killed and started again (it settles what it left).

Each prints the measured time from ``kill -9`` to the FAILED event (docs/operations.md quotes
them).
"""

from __future__ import annotations

import time
import typing as t
import uuid
from pathlib import Path

import pytest

from flask_a2a.exchange.run_leases import LEASE_PERIODS
from flask_a2a.store.leases import WORKER_STOPPED
from tests.conftest import mysql_url, pg_url, wait_for
from tests.fleet.test_replicas import Replica
from tests.redis_support import SSEReader

pytestmark = [pytest.mark.live]

#: The replicas' poll interval: a 2 s lease, renewed (and swept) every 0.67 s.
POLL = 0.2
TTL = LEASE_PERIODS * POLL
PERIOD = TTL / 3
#: What a loaded machine may add to lease + one sweep (process start-up is not in it).
SLACK = 3.0


def state(replica: Replica, task_id: str) -> str:
    return str(replica.rpc("GetTask", {"id": task_id})["result"]["status"]["state"])


def subscribe(replica: Replica, task_id: str) -> SSEReader:
    stream = SSEReader(
        replica.url + "/a2a", "SubscribeToTask", {"id": task_id}, token="alice-token"
    )
    assert "task" in stream.next()["result"]
    return stream


def status_of(event: dict[str, t.Any]) -> dict[str, t.Any]:
    """The status an event carries: a status update from the bus, or the task a poll of the
    store snapshots (whichever reaches the stream first)."""
    result = event["result"]
    return t.cast(dict[str, t.Any], (result.get("statusUpdate") or result["task"])["status"])


def env_for(url: str, prefix: str) -> dict[str, str]:
    return {
        "FLASK_A2A_DATABASE_URL": url,
        "A2A_TEST_TABLE_PREFIX": prefix,
        "FLASK_A2A_REPLICA_POLL_INTERVAL": str(POLL),
        "FLASK_A2A_KEEPALIVE_INTERVAL": "5",
        "FLASK_A2A_ALLOW_PRIVATE_PUSH": "true",
    }


@pytest.fixture(params=[
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
])  # fmt: skip
def shared_db(request: pytest.FixtureRequest) -> t.Iterator[dict[str, str]]:
    """The environment of replicas on one PostgreSQL or MariaDB; their tables dropped after."""
    from flask_a2a.store.sql import SQLStore

    kind = request.param
    engine = request.getfixturevalue("pg_engine" if kind == "postgres" else "mysql_engine")
    prefix = f"a2a_{uuid.uuid4().hex[:10]}_"
    yield {**env_for(pg_url() if kind == "postgres" else mysql_url(), prefix), "kind": kind}
    SQLStore(engine, prefix).drop()


def test_a_replica_killed_mid_run_leaves_its_task_failed_by_the_survivor(
    shared_db: dict[str, str], webhook: t.Any
) -> None:
    env = {k: v for k, v in shared_db.items() if k != "kind"}
    a, b = Replica(env), Replica(env)
    try:
        task_id = a.start("sleepy")
        assert wait_for(lambda: state(a, task_id) == "TASK_STATE_WORKING")
        paused = a.start("asks")
        assert wait_for(lambda: state(a, paused) == "TASK_STATE_INPUT_REQUIRED")
        hook = a.rpc("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": webhook.url()})
        assert "result" in hook, hook
        on_b = subscribe(b, task_id)

        a.kill9()
        killed_at = time.monotonic()
        last = on_b.next(timeout=TTL + PERIOD + SLACK + 10)
        healed = time.monotonic() - killed_at
        print(f"\n{shared_db['kind']}: kill -9 -> FAILED on the survivor in {healed:.2f} s "
              f"(lease {TTL:.2f} s, renewed and swept every {PERIOD:.2f} s)")  # fmt: skip

        status = status_of(last)
        assert status["state"] == "TASK_STATE_FAILED"
        assert status["message"]["parts"][0]["text"] == WORKER_STOPPED
        assert on_b.next() is None  # the stream ended there
        assert TTL - PERIOD - 0.2 <= healed <= TTL + PERIOD + SLACK, healed
        # Registered on the dead replica (which sent its snapshot), delivered by B.
        hits = webhook.wait_for(2)
        assert [next(iter(hit.json)) for hit in hits] == ["task", "statusUpdate"]
        assert hits[1].json["statusUpdate"]["status"]["state"] == "TASK_STATE_FAILED"
        got = b.rpc("GetTask", {"id": task_id})["result"]
        assert got["status"]["state"] == "TASK_STATE_FAILED"
        assert state(b, paused) == "TASK_STATE_INPUT_REQUIRED"  # paused: not a run, untouched
        # ... and it still resumes, on the survivor.
        answer = b.rpc("SendMessage", {"message": {
            "messageId": uuid.uuid4().hex, "role": "ROLE_USER", "taskId": paused,
            "parts": [{"text": "this one"}],
        }})  # fmt: skip
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    finally:
        a.stop()
        b.stop()


def test_a_single_process_restarted_on_its_sqlite_file_settles_what_it_left(
    tmp_path: Path,
) -> None:
    env = env_for(f"sqlite:///{tmp_path / 'a2a.db'}", "a2a_")
    first = Replica(env)
    try:
        task_id = first.start("sleepy")
        assert wait_for(lambda: state(first, task_id) == "TASK_STATE_WORKING")
        paused = first.start("asks")
        assert wait_for(lambda: state(first, paused) == "TASK_STATE_INPUT_REQUIRED")
        first.kill9()
        killed_at = time.monotonic()
    finally:
        first.stop()
    again = Replica(env)
    try:
        started = time.monotonic() - killed_at
        if started < TTL:  # its lease still runs: the task reads WORKING meanwhile
            on_it = subscribe(again, task_id)
            last = on_it.next(timeout=TTL + PERIOD + SLACK + 10)
            assert status_of(last)["state"] == "TASK_STATE_FAILED"
        assert wait_for(lambda: state(again, task_id) == "TASK_STATE_FAILED", timeout=SLACK)
        healed = time.monotonic() - killed_at
        print(f"\nsqlite: kill -9, restart ({started:.2f} s) -> FAILED in {healed:.2f} s")
        assert healed <= max(started, TTL) + PERIOD + SLACK, healed
        assert state(again, paused) == "TASK_STATE_INPUT_REQUIRED"
    finally:
        again.stop()
