"""A database that hangs or is down (issue 23 items 3 and 4): every wait is bounded on the
client side, the boot never blocks past the connect timeout, and a store whose database is down
at boot serves health 503 and store errors until it answers, then works without a restart.
A database that hangs mid-run (issue 34 item 8): a blocking call answers the store-unavailable
error within one bound for all its tries, and a write tried again after its answer was lost
finds itself stored and goes on.

The database is a :class:`tests.db_support.FaultyDatabase` on a free loopback port: it hangs
(accepts, never answers: a wedged server), drops (a server that is down), stalls (holds what it
is sent, delivered once it forwards again), or forwards to the shared PostgreSQL / MariaDB (the
server coming back).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import typing as t
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa
from flask import Flask

from flask_a2a import Skill
from flask_a2a.store.choice import UNAVAILABLE_RETRY
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, echo, mysql_url, pg_url, wait_for
from tests.db_support import DROP, FORWARD, HANG, STALL, FaultyDatabase
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


def send(client: A2ATestClient, skill: str = "echo") -> t.Any:
    """A blocking SendMessage to ``skill`` (its answer, refused or not)."""
    message = {"messageId": os.urandom(6).hex(), "role": "ROLE_USER", "parts": [{"text": "hi"}],
               "metadata": {"skill": skill}}  # fmt: skip
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


# ------------------------------------------------------------------ issue 34 item 8: mid-run

#: The bounds of the mid-run tests: far enough apart that one bound for a call (the read, then
#: a connect) and a bound per try (before: the read, then a connect per try of the settle)
#: cannot be mistaken for each other on a loaded machine.
MIDRUN_READ = 4.0
MIDRUN_CONNECT = 2.0
#: What the old bound per try took at least: the read, then three connects.
PER_TRY = MIDRUN_READ + 3 * MIDRUN_CONNECT
#: The store-unavailable error's message (``flask_a2a.store.base.unavailable_error``).
UNAVAILABLE = "Internal error: the task store is unavailable; try again later"


class LogWatch(logging.Handler):
    """Sets :attr:`seen` once the library logs a line holding one of ``texts`` (an event to
    await)."""

    def __init__(self, *texts: str) -> None:
        super().__init__(logging.WARNING)
        self.texts = texts
        self.seen = threading.Event()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        self.lines.append(line)
        if any(text in line for text in self.texts):
            self.seen.set()


@pytest.fixture
def watch() -> t.Iterator[t.Callable[..., LogWatch]]:
    """``watch(*texts)``: a :class:`LogWatch` on the library's logger, removed after the test."""
    logger = logging.getLogger("flask_a2a")
    made: list[LogWatch] = []

    def make(*texts: str) -> LogWatch:
        made.append(LogWatch(*texts))
        logger.addHandler(made[-1])
        return made[-1]

    yield make
    for handler in made:
        logger.removeHandler(handler)


def proxied(kind: str, request: pytest.FixtureRequest) -> tuple[str, FaultyDatabase]:
    """A fresh database of ``kind`` and a :class:`FaultyDatabase` forwarding to it."""
    fixture = "new_pg_database" if kind == "postgres" else "new_mysql_database"
    url = request.getfixturevalue(fixture)()
    real = sa.engine.make_url(url)
    if real.get_driver_name() == "psycopg2":
        pytest.skip(NO_PSYCOPG2_READ_BOUND)
    return url, FaultyDatabase(FORWARD, target=(real.host or HOST, real.port or 0))


class Sending:
    """A blocking SendMessage on a thread of its own: its answer, and when it came."""

    def __init__(self, client: A2ATestClient, skill: str) -> None:
        self.sent_at = time.monotonic()
        self.answered_at = float("inf")
        self.answer: t.Any = None
        self._thread = threading.Thread(target=self._send, args=(client, skill), daemon=True)
        self._thread.start()

    def _send(self, client: A2ATestClient, skill: str) -> None:
        self.answer = send(client, skill)
        self.answered_at = time.monotonic()

    def wait(self) -> t.Any:
        self._thread.join(60)
        assert not self._thread.is_alive(), "no answer within 60 s"
        return self.answer


def tasks_of(client: A2ATestClient) -> list[dict[str, t.Any]]:
    return t.cast(list[dict[str, t.Any]], client.rpc("ListTasks", {}).result["tasks"])


def statuses(client: A2ATestClient) -> list[tuple[str, str | None]]:
    """Each task's state and status text."""
    found = []
    for task in tasks_of(client):
        parts = (task["status"].get("message") or {}).get("parts") or [{}]
        found.append((task["status"]["state"], parts[0].get("text")))
    return found


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("write_delay", [0.0, 1.0], ids=["stored-at-once", "held"])
def test_a_blocking_call_under_a_database_hung_mid_run_answers_within_one_bound(
    kind: str,
    write_delay: float,
    make_app: t.Callable[..., Flask],
    request: pytest.FixtureRequest,
    opened: list[Flask],
    gate: Gate,
) -> None:
    """The database stops answering while a blocking SendMessage runs, and another is sent
    meanwhile: each answers the store-unavailable error within the read bound plus the connect
    bound, however many tries its writes made (before: a read bound, then a connect per try of
    the settle, and a bare -32603). The in-flight task, stored WORKING, is settled FAILED once
    the database answers. ``write_delay``: the tasks are stored when sent, or held until their
    settle (``A2A_BLOCKING_WRITE_DELAY``)."""
    url, database = proxied(kind, request)
    try:
        skills = [Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler),
                  Skill(id="echo", name="Echo", description="Echo.", handler=echo)]  # fmt: skip
        config = {"A2A_DATABASE_URL": database.url(url), "A2A_BLOCKING_WRITE_DELAY": write_delay,
                  "A2A_DATABASE_READ_TIMEOUT": MIDRUN_READ,
                  "A2A_DATABASE_CONNECT_TIMEOUT": MIDRUN_CONNECT,
                  "A2A_REPLICA_POLL_INTERVAL": 0.2, **AGENT}  # fmt: skip
        app = make_app(skills=skills, config=config, store=None)
        opened.append(app)
        client = A2ATestClient(app, token="alice")
        assert send(client).result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

        in_flight = Sending(client, "gate")
        assert gate.entered.wait(10)
        # Its task is stored, WORKING (a held one once the write delay has passed).
        assert wait_for(lambda: len(tasks_of(client)) == 2)
        database.mode = HANG
        hung_at = time.monotonic()
        gate.release.set()  # its next write meets the hung database
        during = Sending(client, "echo")
        answers = {
            "in flight": (in_flight.wait(), in_flight.answered_at - hung_at),
            "sent during the hang": (during.wait(), during.answered_at - during.sent_at),
        }
        held = "held" if write_delay else "stored at once"
        for name, (answer, took) in answers.items():
            print(f"\n{kind}, tasks {held}, a database hung mid-run: the blocking SendMessage "
                  f"{name} answered in {took:.2f} s: {answer.code} {answer.error['message']!r} "
                  f"(read bound {MIDRUN_READ} s, connect {MIDRUN_CONNECT} s)")  # fmt: skip
            assert answer.code == -32603, answer.text
            assert answer.error["message"] == UNAVAILABLE, answer.text
            assert took < MIDRUN_READ + MIDRUN_CONNECT + 2.5 < PER_TRY, (name, took)

        database.mode = FORWARD
        assert wait_for(lambda: health(app)[0] == 200, timeout=15)
        # The in-flight task is not left WORKING: settled FAILED once the database answers (its
        # owed settle, "internal error", or the sweep of its run's lapsed lease, whichever
        # comes first).
        assert wait_for(lambda: "TASK_STATE_FAILED" in dict(statuses(client)), timeout=15)
        assert "TASK_STATE_WORKING" not in dict(statuses(client)), statuses(client)
    finally:
        database.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_write_tried_again_after_its_answer_was_lost_finds_itself_and_goes_on(
    kind: str,
    make_app: t.Callable[..., Flask],
    request: pytest.FixtureRequest,
    opened: list[Flask],
    watch: t.Callable[..., LogWatch],
) -> None:
    """A blocking SendMessage's one INSERT (its task held until its settle) reaches a database
    that stalls: the client gives up at the read bound, the database comes back and stores the
    INSERT it held, and the write tried again on a fresh connection meets that row. It is the
    same write: the call answers its task, COMPLETED (before: ``ValueError("task '…' exists")``
    in the log and a bare -32603 for a task that was stored)."""
    url, database = proxied(kind, request)
    try:
        # A connect bound of 3 s: what is left of the call's bound after the read (2 s) still
        # holds libpq's whole 2 s for the fresh connection.
        config = {"A2A_DATABASE_URL": database.url(url), "A2A_DATABASE_READ_TIMEOUT": 2.0,
                  "A2A_DATABASE_CONNECT_TIMEOUT": 3.0, **AGENT}  # fmt: skip
        app = make_app(config=config, store=None)
        opened.append(app)
        client = A2ATestClient(app, token="alice")
        assert send(client).result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

        # Its first try gave up: "tried again" now, the settle's own failure before.
        failed = watch("the store failed a task's write", "writing a task failed")
        database.mode = STALL  # the INSERT on a pooled connection is held, unanswered
        sending = Sending(client, "echo")
        assert failed.seen.wait(30)
        database.mode = FORWARD  # the held INSERT is stored; the next try meets its row
        answer = sending.wait()
        print(
            f"\n{kind}, an INSERT stored after its client gave up: the call answered in "
            f"{sending.answered_at - sending.sent_at:.2f} s: {answer.text[:90]}; log: "
            f"{failed.lines}"
        )
        assert "error" not in answer.json, (answer.text, failed.lines)
        task = answer.result["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"] == [{"text": "hi"}]
        stored = client.rpc("GetTask", {"id": task["id"]}).result
        assert stored["status"] == task["status"] and stored["artifacts"] == task["artifacts"]
        assert not [line for line in failed.lines if "exists" in line]
    finally:
        database.close()
