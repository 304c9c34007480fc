"""A database that hangs or is down (issue 23 items 3 and 4): every wait is bounded on the
client side, the boot never blocks past the connect timeout, and a store whose database is down
at boot serves health 503 and store errors until it answers, then works without a restart.

The database is a :class:`tests.db_support.FaultyDatabase` on a free loopback port: it hangs
(accepts, never answers: a wedged server), drops (a server that is down), or forwards to the
shared PostgreSQL / MariaDB (the server coming back).
"""

from __future__ import annotations

import os
import threading
import time
import typing as t
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa
from flask import Flask

from flask_a2a.store.choice import UNAVAILABLE_RETRY
from flask_a2a.testing import A2ATestClient
from tests.conftest import mysql_url, pg_url, wait_for
from tests.db_support import DROP, FORWARD, HANG, FaultyDatabase
from tests.live_server import HOST, LiveGunicorn

ROOT = Path(__file__).resolve().parents[2]
AGENT = {"A2A_ROLE": "agent"}
#: The client-side bounds these tests set (seconds).
CONNECT = 2.0
READ = 2.0
#: What a loaded 2-core machine may add to a bound before the test calls it unbounded.
SLACK = 4.0

#: Why a read of psycopg2 (SQLAlchemy 1.4's PostgreSQL driver) is not bounded on the client.
NO_PSYCOPG2_READ_BOUND: t.Final = (
    "psycopg2 has no client-side read bound (only psycopg 3.3+ and the MySQL drivers have one: "
    "docs/storage-and-scaling.md); its statements are bounded by the server's statement_timeout"
)
KINDS = [
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
]


def real_url(kind: str) -> str:
    if kind == "postgres":
        driver = sa.engine.make_url(pg_url()).get_driver_name()
        pytest.importorskip(driver, reason=f"{driver} is not installed")
        return pg_url()
    pytest.importorskip("pymysql", reason="the mysql extra is not installed")
    return mysql_url()


@pytest.fixture
def hung() -> t.Iterator[FaultyDatabase]:
    database = FaultyDatabase(HANG)
    yield database
    database.close()


@pytest.fixture
def opened() -> t.Iterator[list[Flask]]:
    """Apps shut down after the test: once their runs have ended, the exchange closes its
    store's own engine itself (its pooled connections closed now, not whenever the collector
    finds them)."""
    apps: list[Flask] = []
    yield apps
    for app in apps:
        # Past the longest hung call (the read bound plus two connects): every run ends, so no
        # connection is still checked out when the engine is closed (one would be orphaned,
        # open, into the closed pool).
        assert app.extensions["a2a"].exchange.shutdown(timeout=15)


def timed(fn: t.Callable[[], t.Any]) -> tuple[t.Any, float]:
    started = time.monotonic()
    value = fn()
    return value, time.monotonic() - started


def health(app: Flask) -> tuple[int, t.Any]:
    answer = app.test_client().get("/healthz")
    return answer.status_code, answer.get_json()


def send(client: A2ATestClient) -> t.Any:
    """A blocking SendMessage to the echo skill (its answer, refused or not)."""
    message = {"messageId": os.urandom(6).hex(), "role": "ROLE_USER", "parts": [{"text": "hi"}],
               "metadata": {"skill": "echo"}}  # fmt: skip
    return client.rpc("SendMessage", {"message": message})


def unavailable(answer: t.Any) -> None:
    """The store's error: -32603, no driver text."""
    assert answer.code == -32603, answer.text
    assert answer.error["message"].startswith("Internal error"), answer.text
    assert "127.0.0.1" not in answer.text and "Operational" not in answer.text


@pytest.mark.parametrize("kind", KINDS)
def test_a_hung_database_bounds_the_boot_and_every_request(
    kind: str, hung: FaultyDatabase, make_app: t.Callable[..., Flask]
) -> None:
    config = {"A2A_DATABASE_URL": hung.url(real_url(kind)),
              "A2A_DATABASE_CONNECT_TIMEOUT": CONNECT, **AGENT}  # fmt: skip
    app, booted = timed(lambda: make_app(config=config, store=None))
    client = A2ATestClient(app, token="alice")

    at_once, fast = timed(lambda: send(client))
    unavailable(at_once)  # within the retry pause: no connect is tried
    threading.Event().wait(UNAVAILABLE_RETRY)  # the pause is over: the next call tries
    tried, slow = timed(lambda: send(client))
    unavailable(tried)
    status, body = health(app)
    assert (status, body) == (
        503,
        {"status": "unavailable", "checks": {"store": "unreachable: OperationalError"}},
    )
    print(f"\n{kind}, a listener that never answers: boot {booted:.2f} s, SendMessage "
          f"{fast * 1000:.0f} ms in the retry pause, {slow:.2f} s trying to connect "
          f"(connect timeout {CONNECT} s)")  # fmt: skip
    assert booted < CONNECT + SLACK
    assert slow < CONNECT + SLACK


#: The engine options docs/storage-and-scaling.md gives a host's engine (Flask-SQLAlchemy's
#: ``SQLALCHEMY_ENGINE_OPTIONS``), with this module's bounds.
HOST_OPTIONS: t.Final = {
    "postgres": {"connect_args": {"connect_timeout": int(CONNECT)}, "pool_timeout": 5},
    # whole seconds, as the docs give them (mysqlclient takes no float)
    "mysql": {"connect_args": {"connect_timeout": int(CONNECT), "read_timeout": int(READ),
                               "write_timeout": int(READ)}, "pool_timeout": 5},
}  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", ["engine options", "bound_waits"])
def test_a_host_engine_is_bounded_by_the_documented_options(
    kind: str, how: str, hung: FaultyDatabase
) -> None:
    from flask_a2a.store.sql import SQLStore
    from flask_a2a.store.sql_waits import bound_waits

    url = hung.url(real_url(kind))
    if how == "engine options":
        engine = sa.create_engine(url, **HOST_OPTIONS[kind])
    else:
        engine = sa.create_engine(url)
        bound_waits(engine, connect_timeout=CONNECT, read_timeout=READ)
    try:
        started = time.monotonic()
        with pytest.raises(sa.exc.OperationalError):
            SQLStore(engine)
        assert time.monotonic() - started < max(CONNECT, READ) + SLACK
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", KINDS)
def test_a_database_that_hangs_mid_service_fails_the_call_within_the_read_bound(
    kind: str,
    make_app: t.Callable[..., Flask],
    request: pytest.FixtureRequest,
    opened: list[Flask],
) -> None:
    """Connections made, then the server stops answering: a read waits ``READ`` at most, its
    connection is discarded, and new ones wait ``CONNECT`` at most."""
    fixture = "new_pg_database" if kind == "postgres" else "new_mysql_database"
    url = request.getfixturevalue(fixture)()
    real = sa.engine.make_url(url)
    if real.get_driver_name() == "psycopg2":
        pytest.skip(NO_PSYCOPG2_READ_BOUND)
    database = FaultyDatabase(FORWARD, target=(real.host or HOST, real.port or 0))
    try:
        config = {"A2A_DATABASE_URL": database.url(url), "A2A_STATEMENT_TIMEOUT": 1.0,
                  "A2A_DATABASE_CONNECT_TIMEOUT": CONNECT, "A2A_DATABASE_READ_TIMEOUT": READ,
                  "A2A_BLOCKING_WRITE_DELAY": 0, **AGENT}  # fmt: skip
        app = make_app(config=config, store=None)
        opened.append(app)
        client = A2ATestClient(app, token="alice")
        done = send(client).result["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"

        database.mode = HANG  # pooled connections now get no answer; new ones neither
        got, read = timed(lambda: client.rpc("GetTask", {"id": done["id"]}))
        assert got.code == -32603, got.text
        sent, blocking = timed(lambda: send(client))
        assert sent.code == -32603, sent.text
        print(
            f"\n{kind}, a server that stops answering: GetTask {read:.2f} s, blocking "
            f"SendMessage {blocking:.2f} s (read bound {READ} s, connect {CONNECT} s)"
        )
        assert read < READ + SLACK
        # The run's write waits the read bound, then its two retries a connect each.
        assert blocking < READ + 2 * CONNECT + SLACK

        database.mode = FORWARD  # back: the dead connections were discarded, new ones work
        assert wait_for(lambda: health(app)[0] == 200, timeout=15)
        again = send(client).result["task"]
        assert again["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        database.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_database_down_at_boot_serves_health_and_errors_then_heals_without_a_restart(
    kind: str,
    make_app: t.Callable[..., Flask],
    request: pytest.FixtureRequest,
    opened: list[Flask],
) -> None:
    fixture = "new_pg_database" if kind == "postgres" else "new_mysql_database"
    url = request.getfixturevalue(fixture)()
    real = sa.engine.make_url(url)
    if real.get_driver_name() == "psycopg2":
        pytest.skip(NO_PSYCOPG2_READ_BOUND)
    database = FaultyDatabase(DROP, target=(real.host or HOST, real.port or 0))
    try:
        config = {"A2A_DATABASE_URL": database.url(url),
                  "A2A_DATABASE_CONNECT_TIMEOUT": CONNECT, **AGENT}  # fmt: skip
        app = make_app(config=config, store=None)  # boots: the database is down
        opened.append(app)
        client = A2ATestClient(app, token="alice")
        status, body = health(app)
        assert status == 503 and body["checks"]["store"].startswith("unreachable: "), body
        unavailable(send(client))
        unavailable(client.rpc("GetTask", {"id": "some-task"}))
        unavailable(client.rpc("ListTasks", {}))

        database.mode = FORWARD  # the database is back
        healed, after = timed(lambda: wait_for(lambda: health(app)[0] == 200, timeout=15))
        assert healed
        done = send(client).result["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert client.rpc("GetTask", {"id": done["id"]}).result["id"] == done["id"]
        print(f"\n{kind} down at boot, then back: healthy {after:.2f} s after it answered")
        engine = sa.create_engine(url)
        try:  # A2A_CREATE_TABLES: made at the first connect that worked
            assert sa.inspect(engine).has_table("a2a_tasks")
        finally:
            engine.dispose()
    finally:
        database.close()


@pytest.mark.live
@pytest.mark.parametrize("kind", KINDS)
def test_a_gevent_worker_boots_and_answers_while_a_call_waits_on_a_hung_database(
    kind: str, hung: FaultyDatabase
) -> None:
    """Under gunicorn -k gevent the boot waits the connect timeout at most, and a wait for the
    hung database parks one greenlet, not the worker: the health route answers (503) while a
    SendMessage waits on its connect, before that SendMessage gets its -32603."""
    if sa.engine.make_url(real_url(kind)).get_driver_name() == "psycopg2":
        pytest.skip(
            "psycopg2 waits for its connect in C, stopping the gevent worker (the "
            "blocking-driver warning's case; psycopg 3 is what parks one greenlet)"
        )
    env = {"FLASK_A2A_DATABASE_URL": hung.url(real_url(kind)), "FLASK_A2A_ROLE": "agent",
           "FLASK_A2A_DATABASE_CONNECT_TIMEOUT": str(CONNECT)}  # fmt: skip
    started = time.monotonic()
    server = LiveGunicorn("examples.agent:create_app()", chdir=str(ROOT), env=env,
                          extra=["--timeout", "30"])  # fmt: skip
    up = time.monotonic() - started
    try:
        threading.Event().wait(UNAVAILABLE_RETRY)  # past the pause: the next call connects
        answers: list[tuple[t.Any, float, float]] = []

        def send() -> None:
            message = {"messageId": os.urandom(6).hex(), "role": "ROLE_USER",
                       "parts": [{"text": "hi"}], "metadata": {"skill": "echo"}}  # fmt: skip
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                    "params": {"message": message}}  # fmt: skip
            headers = {"Authorization": "Bearer alice-token"}
            answer, waited = timed(
                lambda: requests.post(
                    server.url + "/a2a", json=body, headers=headers, timeout=30
                ).json()
            )
            answers.append((answer, waited, time.monotonic()))

        before = hung.accepted
        sending = threading.Thread(target=send, daemon=True)
        sending.start()
        assert wait_for(lambda: hung.accepted > before)  # its connect waits on the listener
        probe, probed = timed(lambda: requests.get(server.url + "/healthz", timeout=30))
        probed_at = time.monotonic()
        sending.join(30)
        ((answer, waited, answered_at),) = answers
        print(f"\n{kind} under gunicorn -k gevent, a listener that never answers: up in "
              f"{up:.2f} s (gunicorn's own start included), SendMessage {waited:.2f} s, "
              f"/healthz {probed * 1000:.0f} ms meanwhile")  # fmt: skip
        assert answer["error"]["code"] == -32603, answer
        assert probe.status_code == 503, probe.text
        assert probed_at < answered_at  # the worker answered while the connect waited
        assert waited < CONNECT + SLACK
    finally:
        log = server.stop()
    assert "Worker failed to boot" not in log, log
    assert "the task store's database does not answer" in log, log
