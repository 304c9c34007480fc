"""Which store serves: Flask-SQLAlchemy in either registration order, logged once; the memory
store refuses to serve several processes (a fork after init_app, gunicorn workers)."""

from __future__ import annotations

import json
import logging
import os
import typing as t
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa
from flask import Flask
from flask_sqlalchemy import SQLAlchemy

from flask_a2a import A2A, Skill, TaskContext
from flask_a2a.cli import a2a_cli
from flask_a2a.exchange.runner import gevent_patched
from flask_a2a.store import MemoryStore
from flask_a2a.store.sql import SQLStore
from flask_a2a.testing import A2ATestClient
from tests import stack
from tests.conftest import echo, token_principal
from tests.live_server import LiveGunicorn

ROOT = Path(__file__).resolve().parents[2]


def later(task: TaskContext) -> None:
    task.hand_off("queued")


SKILLS = [
    Skill(id="echo", name="Echo", description="Echo.", handler=echo),
    Skill(id="later", name="Later", description="Handed off.", handler=later),
]


def build(order: str, url: str, config: dict[str, t.Any] | None = None) -> tuple[Flask, A2A, t.Any]:
    app = Flask(f"host_{order}")
    app.config["SQLALCHEMY_DATABASE_URI"] = url
    app.config.update(config or {})
    db = SQLAlchemy()
    if order == "a2a-first":
        a2a = A2A(app, skills=SKILLS, principal=token_principal)
        db.init_app(app)
    else:
        db.init_app(app)
        a2a = A2A(app, skills=SKILLS, principal=token_principal)
    return app, a2a, db


@pytest.mark.parametrize("order", ["a2a-first", "sqlalchemy-first"])
def test_the_apps_database_holds_the_tasks_whatever_the_order(
    order: str, app_database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    dialect = sa.engine.make_url(app_database_url).get_backend_name()
    with caplog.at_level(logging.INFO, "flask_a2a"):
        app, a2a, db = build(order, app_database_url)
        # The first use is a CLI command: it chooses the store the requests then use.
        cli = stack.cli_runner(app)
        assert cli.invoke(a2a_cli, ["tasks", "alice"]).exit_code == 0
        client = A2ATestClient(app, "alice")
        done = client.send("hi", skill="echo")["task"]
        held = client.send("wait", skill="later")["task"]
        a2a.task_updater(held["id"], app).complete("done")
    try:
        line = f"flask_a2a: task store: SQLStore({dialect}, prefix a2a_)"
        assert caplog.messages.count(line) == 1, caplog.messages
        with app.app_context():  # in the app's own database, through its own session
            rows = db.session.execute(sa.text("SELECT id, owner, state FROM a2a_tasks")).all()
        assert sorted(rows) == sorted([
            (done["id"], "alice", "TASK_STATE_COMPLETED"),
            (held["id"], "alice", "TASK_STATE_COMPLETED"),
        ])  # fmt: skip
        listed = cli.invoke(a2a_cli, ["tasks", "alice"]).output
        assert done["id"] in listed and held["id"] in listed
        assert len(a2a.export_user_data("alice", app)["tasks"]) == 2
        assert client.rpc("GetTask", {"id": held["id"]}).result["status"]["state"] == (
            "TASK_STATE_COMPLETED"
        )
        assert isinstance(a2a.store(app), SQLStore)
    finally:
        a2a.shutdown(2, app)
        with app.app_context():
            db.engine.dispose()


def test_without_any_database_the_memory_store_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    app = Flask("plain")
    with caplog.at_level(logging.INFO, "flask_a2a"):
        a2a = A2A(app, skills=SKILLS, principal=token_principal)
        A2ATestClient(app, "alice").send("hi", skill="echo")
        A2ATestClient(app, "bob").send("hi", skill="echo")
    assert caplog.messages.count("flask_a2a: task store: MemoryStore") == 1
    assert isinstance(a2a.store(app), MemoryStore)
    a2a.shutdown(2, app)


# ------------------------------------------------------------------ a fork after init_app

plain_fork = pytest.mark.skipif(gevent_patched(), reason="os.fork in a plain process only")


def answer_in_a_forked_child(app: Flask) -> dict[str, t.Any]:
    """SendMessage from a child forked after init_app; the child reports the answer and log."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            records: list[str] = []
            handler = logging.Handler()
            handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
            logging.getLogger("flask_a2a").addHandler(handler)
            answer = A2ATestClient(app, "alice").rpc(
                "SendMessage", {"message": A2ATestClient(app).message("hi", skill="echo")}
            )
            os.write(write, json.dumps({"answer": answer.json, "log": records}).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        report = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return t.cast(dict[str, t.Any], json.loads(report))


@plain_fork
def test_the_memory_store_refuses_a_process_forked_after_init_app() -> None:
    app = Flask("forked")
    A2A(app, skills=SKILLS, principal=token_principal)
    report = answer_in_a_forked_child(app)
    error = report["answer"]["error"]
    assert error["code"] == -32603, report
    assert any("A2A_DATABASE_URL" in line and "forked" in line for line in report["log"])
    # The parent, the one process that holds the tasks, still serves.
    assert A2ATestClient(app, "alice").send("hi", skill="echo")["task"]["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )


@plain_fork
def test_a_memory_store_the_host_passed_is_named_in_the_refusal() -> None:
    """The host passed ``store=MemoryStore()``: the refusal says so, and does not tell it to
    set up Flask-SQLAlchemy (which an app like that often has already)."""
    app = Flask("forked_given")
    A2A(app, skills=SKILLS, principal=token_principal, store=MemoryStore())
    report = answer_in_a_forked_child(app)
    assert report["answer"]["error"]["code"] == -32603, report
    refusal = next(line for line in report["log"] if "keeps tasks in one process" in line)
    assert "You passed store=MemoryStore() to A2A: leave store= out" in refusal
    assert "register Flask-SQLAlchemy" not in refusal


@plain_fork
@pytest.mark.parametrize("how", ["opt-in", "sql"])
def test_a_forked_process_serves_with_the_opt_in_or_a_shared_store(
    how: str, tmp_path: Path
) -> None:
    config = (
        {"A2A_ALLOW_MEMORY_STORE_IN_WORKERS": True}
        if how == "opt-in"
        else {"A2A_DATABASE_URL": f"sqlite:///{tmp_path / 'tasks.db'}"}
    )
    app = Flask("forked_ok")
    app.config.update(config)
    A2A(app, skills=SKILLS, principal=token_principal)
    report = answer_in_a_forked_child(app)
    assert report["answer"]["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


# ------------------------------------------------------------------ live: gunicorn workers


ALICE = {"Authorization": "Bearer alice-token", "Content-Type": "application/json"}


def rpc(url: str, method: str, params: t.Any) -> t.Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return requests.post(url + "/a2a", json=body, headers=ALICE, timeout=30).json()


def send(url: str) -> t.Any:
    message = {"messageId": os.urandom(6).hex(), "role": "ROLE_USER", "parts": [{"text": "hi"}],
               "metadata": {"skill": "echo"}}  # fmt: skip
    return rpc(url, "SendMessage", {"message": message})["result"]["task"]


@pytest.mark.live
@pytest.mark.parametrize("extra", [[], ["--preload"]], ids=["per-worker", "preload"])
def test_gunicorn_with_two_workers_refuses_the_memory_store(extra: list[str]) -> None:
    try:
        served = LiveGunicorn("examples.agent:create_app()", chdir=str(ROOT), workers=2,
                              extra=extra)  # fmt: skip
    except RuntimeError as refused:
        log = str(refused)
    else:
        pytest.fail(f"gunicorn served the memory store in two workers:\n{served.stop()}")
    assert "did not come up" in log
    assert "the memory store keeps tasks in one process" in log
    assert "2 gunicorn workers" in log and "A2A_DATABASE_URL" in log
    assert "A2A_ALLOW_MEMORY_STORE_IN_WORKERS" in log


@pytest.mark.live
@pytest.mark.parametrize(
    "workers,env",
    [(1, {}), (2, {"FLASK_A2A_ALLOW_MEMORY_STORE_IN_WORKERS": "true"})],
    ids=["one-worker", "opt-in"],
)
def test_gunicorn_serves_the_memory_store_with_one_worker_or_the_opt_in(
    workers: int, env: dict[str, str]
) -> None:
    server = LiveGunicorn("examples.agent:create_app()", chdir=str(ROOT), workers=workers, env=env)
    try:
        assert send(server.url)["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        server.stop()


@pytest.mark.live
def test_the_readmes_two_worker_command_shares_its_tasks(tmp_path: Path) -> None:
    env = {"FLASK_A2A_DATABASE_URL": f"sqlite:///{tmp_path / 'a2a.db'}"}
    server = LiveGunicorn("examples.agent:create_app()", chdir=str(ROOT), workers=2, env=env)
    try:
        tasks = [send(server.url)["id"] for _ in range(4)]
        for task_id in tasks * 3:  # whichever worker answers knows every task
            assert rpc(server.url, "GetTask", {"id": task_id})["result"]["id"] == task_id
    finally:
        server.stop()


@pytest.mark.live
def test_gunicorn_workers_choose_flask_sqlalchemy_registered_after_a2a(
    app_database_url: str,
) -> None:
    env = {"LATE_DATABASE_URL": app_database_url}
    server = LiveGunicorn("tests.late_sqlalchemy_app:create_app()", chdir=str(ROOT), workers=2,
                          env=env)  # fmt: skip
    try:
        tasks = [send(server.url)["id"] for _ in range(4)]
        for task_id in tasks * 3:  # whichever worker answers knows every task
            assert rpc(server.url, "GetTask", {"id": task_id})["result"]["id"] == task_id
    finally:
        server.stop()
    engine = sa.create_engine(app_database_url)
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT id FROM a2a_tasks")).scalars().all()
    engine.dispose()
    assert sorted(stored) == sorted(tasks)


# ------------------------------------------------------------------ releasing the store's engine


def _database_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'tasks.db'}"
    request.getfixturevalue("pg_engine")  # skips, saying why, without a PostgreSQL
    from tests.conftest import pg_url

    return pg_url()


def _opened_connections(engine: sa.Engine) -> list[t.Any]:
    """Every DBAPI connection ``engine`` hands out from now on (opened now or pooled before)."""
    opened: list[t.Any] = []

    def checkout(dbapi: t.Any, record: t.Any, proxy: t.Any) -> None:
        if all(dbapi is not seen for seen in opened):
            opened.append(dbapi)

    sa.event.listen(engine, "checkout", checkout)
    return opened


def _is_closed(dbapi: t.Any) -> bool:
    closed = getattr(dbapi, "closed", None)  # psycopg
    if closed is not None:
        return bool(closed)
    try:  # sqlite3 has no flag: a closed connection refuses any use
        dbapi.execute("SELECT 1")
    except Exception:  # noqa: BLE001 - sqlite3.ProgrammingError: closed
        return True
    return False


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_shutdown_closes_the_connections_of_the_engine_built_from_the_url(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The engine built from A2A_DATABASE_URL is the library's own: its pooled connections are
    closed at shutdown, not left to a later garbage collection (which warns, mid-test, that
    each was deleted while still open)."""
    app = Flask("owned_engine")
    app.config["A2A_DATABASE_URL"] = _database_url(kind, tmp_path, request)
    a2a = A2A(app, skills=SKILLS, principal=token_principal)
    store = a2a.store(app)
    assert isinstance(store, SQLStore)
    opened = _opened_connections(store.engine)
    sent = A2ATestClient(app, "alice").send("hi", skill="echo")
    assert sent["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert opened and not any(_is_closed(c) for c in opened)
    assert a2a.shutdown(timeout=5, app=app)
    assert all(_is_closed(c) for c in opened)


def test_agents_sharing_the_store_release_it_with_the_last(tmp_path: Path) -> None:
    app = Flask("owned_engine_shared")
    app.config["A2A_DATABASE_URL"] = f"sqlite:///{tmp_path / 'tasks.db'}"
    first = A2A(app, skills=SKILLS, principal=token_principal)
    second = A2A(app, skills=SKILLS, principal=token_principal, name="billing",
                 url_prefix="/billing")  # fmt: skip
    store = first.store(app)
    assert isinstance(store, SQLStore) and second.store(app) is store
    opened = _opened_connections(store.engine)
    A2ATestClient(app, "alice").send("hi", skill="echo")
    assert opened
    assert first.shutdown(timeout=5, app=app)
    assert not any(_is_closed(c) for c in opened)  # the billing agent still serves from it
    assert second.shutdown(timeout=5, app=app)
    assert all(_is_closed(c) for c in opened)


def test_shutdown_leaves_the_hosts_own_engine_open(tmp_path: Path) -> None:
    """A store the host passed in (its engine, its pool) is the host's to close."""
    # A pool, as SQLAlchemy 2 gives a SQLite file by default (1.4 closes each connection)
    engine = sa.create_engine(
        f"sqlite:///{tmp_path / 'host.db'}", poolclass=sa.pool.QueuePool,
        connect_args={"check_same_thread": False},
    )  # fmt: skip
    opened = _opened_connections(engine)
    app = Flask("host_engine")
    a2a = A2A(app, skills=SKILLS, principal=token_principal, store=SQLStore(engine))
    A2ATestClient(app, "alice").send("hi", skill="echo")
    assert opened
    try:
        assert a2a.shutdown(timeout=5, app=app)
        assert not any(_is_closed(c) for c in opened)
    finally:
        engine.dispose()
