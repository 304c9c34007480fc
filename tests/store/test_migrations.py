"""Flask-Migrate (Alembic) in a host app that adds the exchange: the documented recipe.

The host app is a file with a Flask-SQLAlchemy model; every ``flask db`` command runs as the
user runs it, through Flask-Migrate's own click group, in this process: each command loads the
host app afresh (its environment picks the models and the recipe) in the host's folder, and the
logging that Alembic's env.py reconfigures is put back after it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import os
import re
import typing as t
import uuid
import warnings
from pathlib import Path
from unittest import mock

import pytest
import sqlalchemy as sa

from flask_a2a.store import migrations
from flask_a2a.store.sql import SQLStore
from flask_a2a.testing import A2ATestClient

ROOT = Path(__file__).resolve().parents[2]

HOST_APP = """
import os

from flask import Flask
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy

from flask_a2a import A2A, Part, Principal, Skill
from flask_a2a.store import migrations as a2a_migrations

db = SQLAlchemy()


class Invoice(db.Model):
    id = db.Column(db.Integer, primary_key=True)
    owner = db.Column(db.String(64), nullable=False, index=True)
    if os.environ.get("HOST_TOTAL"):
        total = db.Column(db.Integer, nullable=True)


def echo(task):
    task.artifact([Part(text=task.message.text)], name="echo")


def create_app():
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = os.environ["HOST_DATABASE_URL"]
    app.config["A2A_CREATE_TABLES"] = os.environ.get("HOST_A2A_TABLES") != "migrations"
    if os.environ.get("HOST_A2A"):  # A2A before Flask-SQLAlchemy, as a real app may
        A2A(app, skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
            principal=lambda: Principal(owner="alice"))
    db.init_app(app)
    if os.environ.get("HOST_RECIPE"):  # docs/storage-and-scaling.md, Migrations
        Migrate(app, db, include_name=a2a_migrations.include_name())
    else:
        Migrate(app, db)
    return app
"""

#: What the documented revision holds (docs/storage-and-scaling.md).
A2A_REVISION = """
def upgrade():
    a2a_migrations.create_tables(op.get_bind())


def downgrade():
    a2a_migrations.drop_tables(op.get_bind())
"""


class Ran(t.NamedTuple):
    """What a ``flask db`` command wrote: the script (offline) and Alembic's log and warnings."""

    stdout: str
    stderr: str


@contextlib.contextmanager
def kept_logging() -> t.Iterator[None]:
    """Alembic's env.py runs ``logging.config.fileConfig``: it replaces the root handlers and
    disables every logger it does not name (ours, pytest's capture). Put all of it back."""
    root = logging.getLogger()
    loggers = [root, *(lg for lg in logging.Logger.manager.loggerDict.values()
                       if isinstance(lg, logging.Logger))]  # fmt: skip
    saved = [(lg, lg.level, lg.disabled, lg.propagate, list(lg.handlers)) for lg in loggers]
    try:
        yield
    finally:
        for lg, level, disabled, propagate, handlers in saved:
            lg.setLevel(level)
            lg.disabled, lg.propagate, lg.handlers[:] = disabled, propagate, handlers
        for made in list(logging.Logger.manager.loggerDict.values()):
            if isinstance(made, logging.Logger) and all(made is not kept for kept, *_ in saved):
                made.handlers.clear()  # a logger env.py made: its handler wrote to our buffer


@contextlib.contextmanager
def inside(folder: Path) -> t.Iterator[None]:
    """In ``folder`` (Flask-Migrate's ``migrations`` directory is relative to it)."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


class Host:
    """The host app's folder: ``flask db ...`` on it, and the app itself, in this process."""

    def __init__(self, folder: Path, url: str) -> None:
        self.folder = folder
        self.url = url
        folder.mkdir(exist_ok=True)
        folder.joinpath("hostapp.py").write_text(HOST_APP)
        self.env = {"HOST_DATABASE_URL": url}

    def flask(self, *args: str, **env: str) -> str:
        done = self.run(*args, **env)
        return done.stdout + done.stderr

    def run(self, *args: str, **env: str) -> Ran:
        """``flask db <args>`` with the host's environment and ``env``."""
        from flask.cli import ScriptInfo
        from flask_migrate.cli import db as db_commands

        stdout, stderr = io.StringIO(), io.StringIO()
        with mock.patch.dict(os.environ, {**self.env, **env}), inside(self.folder), \
                kept_logging(), warnings.catch_warnings(record=True) as caught:  # fmt: skip
            warnings.simplefilter("always")  # reflection warnings are part of the output
            app, module = self.load()
            try:
                with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                    db_commands.main(
                        args=list(args), prog_name="flask db", standalone_mode=False,
                        obj=ScriptInfo(create_app=lambda *_: app),
                    )  # fmt: skip
            finally:
                with app.app_context():
                    module.db.engine.dispose()
        said = "".join(f"{w.category.__name__}: {w.message}\n" for w in caught)
        return Ran(stdout.getvalue(), stderr.getvalue() + said)

    def revisions(self) -> set[Path]:
        return set(self.folder.joinpath("migrations", "versions").glob("*.py"))

    def load(self) -> tuple[t.Any, t.Any]:
        """A fresh host app (and its module: its models read the environment)."""
        spec = importlib.util.spec_from_file_location(
            f"hostapp_{uuid.uuid4().hex[:8]}", self.folder / "hostapp.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.create_app(), module

    def app(self, monkeypatch: pytest.MonkeyPatch, **env: str) -> t.Any:
        for key, value in {**self.env, **env}.items():
            monkeypatch.setenv(key, value)
        return self.load()[0]


def upgrade_body(revision: Path) -> str:
    text = revision.read_text()
    return text[text.index("def upgrade():") : text.index("def downgrade():")]


def send(app: t.Any) -> dict[str, t.Any]:
    try:
        return t.cast(dict[str, t.Any], A2ATestClient(app, "alice").send("hi", skill="echo"))
    finally:
        app.extensions["a2a"].exchange.shutdown(2)


def dispose(app: t.Any) -> None:
    with app.app_context():
        app.extensions["migrate"].db.engine.dispose()


def test_autogenerate_after_adding_a2a_yields_no_operation_on_its_tables(
    new_database: t.Callable[[], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = Host(tmp_path, new_database())
    host.flask("init")
    host.flask("migrate", "-m", "invoices")
    host.flask("upgrade")
    # The host adds the exchange; the store makes its tables itself (A2A_CREATE_TABLES on).
    app = host.app(monkeypatch, HOST_A2A="1")
    assert send(app)["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    dispose(app)
    before = host.revisions()

    # Without the recipe: what a user saw (Alembic wants our tables gone).
    out = host.flask("migrate", "-m", "without", HOST_A2A="1")
    (unwanted,) = host.revisions() - before
    assert "drop_table('a2a_tasks')" in upgrade_body(unwanted)
    if host.url.startswith("sqlite"):  # (SQLAlchemy reflects them on PostgreSQL)
        assert "expression-based index" in out
    unwanted.unlink()

    # With the recipe: nothing to do, and no reflection of our expression indexes.
    out = host.flask("migrate", "-m", "with", HOST_A2A="1", HOST_RECIPE="1")
    assert "No changes in schema detected" in out, out
    assert "expression-based index" not in out and "a2a_" not in out
    assert host.revisions() == before

    # A change of the host's own models migrates alone.
    host.flask("migrate", "-m", "total", HOST_A2A="1", HOST_RECIPE="1", HOST_TOTAL="1")
    (total,) = host.revisions() - before
    body = upgrade_body(total)
    assert "add_column" in body and "'total'" in body and "a2a_" not in body


def catalog(url: str) -> dict[str, t.Any]:
    """Everything of ours the database holds: tables, columns, keys, index and trigger DDL."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            inspector = sa.inspect(conn)
            names = sorted(n for n in inspector.get_table_names() if n.startswith("a2a_"))
            shape: dict[str, t.Any] = {
                name: {
                    "columns": [
                        (c["name"], str(c["type"]), c["nullable"])
                        for c in inspector.get_columns(name)
                    ],
                    "key": inspector.get_pk_constraint(name)["constrained_columns"],
                }  # fmt: skip
                for name in names
            }
            if conn.dialect.name == "sqlite":
                query = "SELECT name, sql FROM sqlite_master WHERE type IN ('index', 'trigger')"
            elif conn.dialect.name == "mysql":
                query = (
                    "SELECT index_name, GROUP_CONCAT(column_name ORDER BY seq_in_index) "
                    "FROM information_schema.statistics WHERE table_schema = DATABASE() "
                    "GROUP BY table_name, index_name UNION SELECT trigger_name, action_statement "
                    "FROM information_schema.triggers WHERE trigger_schema = DATABASE()"
                )
            else:
                query = (
                    "SELECT indexname, indexdef FROM pg_indexes "
                    "UNION SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
                    "WHERE NOT tgisinternal UNION SELECT proname, prosrc FROM pg_proc"
                )
            rows = conn.exec_driver_sql(query).all()
            shape["ddl"] = sorted((name, sql) for name, sql in rows if name.startswith(
                ("a2a_", "ix_a2a_", "sqlite_autoindex_a2a_")))  # fmt: skip
            return shape
    finally:
        engine.dispose()


def migrated_host(folder: Path, url: str) -> Host:
    """The host with the recipe: its models' revision, then the documented A2A revision."""
    host = Host(folder, url)
    host.env.update(HOST_A2A="1", HOST_RECIPE="1", HOST_A2A_TABLES="migrations")
    host.flask("init")
    host.flask("migrate", "-m", "invoices")
    before = host.revisions()
    host.flask("revision", "-m", "a2a tables")
    (revision,) = host.revisions() - before
    imports = "from alembic import op\n\nfrom flask_a2a.store import migrations as a2a_migrations\n"
    text = revision.read_text().replace("from alembic import op\n", imports)
    text = re.sub(r"\ndef upgrade\(\):.*", A2A_REVISION, text, flags=re.S)
    revision.write_text(text)
    return host


def run_script(url: str, script: str) -> None:
    """Run an offline migration script as a DBA would (psql -f, sqlite3 .read)."""
    engine = sa.create_engine(url)
    try:
        raw = engine.raw_connection()
        try:
            driver: t.Any = raw.driver_connection
            if engine.dialect.name == "sqlite":
                driver.executescript(script)
            else:  # psycopg 3 or psycopg2: one simple query, the whole script
                driver.autocommit = True
                cursor = driver.cursor()
                cursor.execute(script)
                cursor.close()
        finally:
            raw.close()
    finally:
        engine.dispose()


def test_offline_upgrade_writes_the_ddl_the_store_would_run(
    new_database: t.Callable[[], str], tmp_path: Path
) -> None:
    """``flask db upgrade --sql`` (Alembic's offline mode) writes our tables' DDL; a DBA who
    runs the script gets the schema the store makes itself; ``downgrade --sql`` drops it."""
    host = migrated_host(tmp_path / "host", new_database())
    script = host.run("upgrade", "--sql").stdout
    assert "CREATE TABLE a2a_tasks" in script and "CREATE TABLE a2a_push_configs" in script
    assert "ix_a2a_tasks_tier" in script
    if host.url.startswith(("postgresql", "mysql")):
        assert "CREATE TABLE a2a_task_counts" in script and "CREATE TRIGGER" in script
    if host.url.startswith("mysql"):
        return  # one statement per call there (no multi-statement scripts over the driver)
    scripted, itself = new_database(), new_database()  # (autogenerate touched the host's)
    run_script(scripted, script)
    engine = sa.create_engine(itself)
    SQLStore(engine)
    engine.dispose()
    assert catalog(scripted) == catalog(itself)
    down = host.run("downgrade", "head:base", "--sql").stdout
    assert "DROP TABLE a2a_tasks" in down
    run_script(scripted, down)
    assert not [name for name in catalog(scripted) if name.startswith("a2a_")]


def test_migrations_create_what_the_store_needs_from_an_empty_database(
    new_database: t.Callable[[], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = migrated_host(tmp_path / "host", new_database())
    host.flask("upgrade")

    # The store runs no DDL (A2A_CREATE_TABLES off) and serves on what the migration made.
    app = host.app(monkeypatch)
    task = send(app)["task"]
    with app.app_context():
        stored = (
            app.extensions["migrate"]
            .db.session.execute(sa.text("SELECT id FROM a2a_tasks"))
            .scalars()
            .all()
        )
    assert stored == [task["id"]]
    dispose(app)

    # The same schema as a store that creates its tables itself.
    itself = new_database()
    engine = sa.create_engine(itself)
    SQLStore(engine)
    engine.dispose()
    assert catalog(host.url) == catalog(itself)
    made = catalog(host.url)
    assert {"a2a_tasks", "a2a_push_configs"} <= set(made)
    names = {name for name, _ in made["ddl"]}
    assert {"ix_a2a_tasks_tier", "ix_a2a_tasks_owner"} <= names
    if host.url.startswith("postgresql"):  # the counts and their triggers came along
        assert "a2a_task_counts" in made and "a2a_count_tasks" in names
        assert {"a2a_tasks_count_insert", "a2a_tasks_count_delete"} <= names
    if host.url.startswith("mysql"):  # row-level count triggers (no function on MySQL)
        assert "a2a_task_counts" in made
        assert {"a2a_tasks_count_insert", "a2a_tasks_count_delete"} <= names

    host.flask("downgrade", "base")
    assert not [name for name in catalog(host.url) if name.startswith("a2a_")]


def test_without_table_creation_missing_tables_fail_clearly_until_migrated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from flask import Flask

    from flask_a2a import A2A, Principal, Skill
    from tests.conftest import echo

    url = f"sqlite:///{tmp_path / 'app.db'}"
    app = Flask("no_tables")
    app.config.update(A2A_DATABASE_URL=url, A2A_CREATE_TABLES=False)
    a2a = A2A(app, skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
              principal=lambda: Principal(owner="alice"))  # fmt: skip
    client = A2ATestClient(app, "alice")
    with caplog.at_level(logging.ERROR, "flask_a2a"):
        refused = [
            client.rpc("SendMessage", {"message": client.message("hi", skill="echo")}),
            client.rpc("SendMessage", {"message": client.message("hi", skill="echo"),
                                       "configuration": {"returnImmediately": True}}),
            client.rpc("ListTasks", {}),
            client.rpc("GetTask", {"id": "nope"}),
        ]  # fmt: skip
    streamed, events = client.stream(
        "SendStreamingMessage", {"message": client.message("hi", skill="echo")}
    )
    assert streamed.status_code == 200 and events == []  # it ends (it used to hang)
    for answer in refused:  # the caller learns the operator must act, not the table names
        assert answer.code == -32603
        assert "task store has no tables" in answer.error["message"]
        assert "a2a_" not in answer.text
    # One line, at the first call, naming the tables and both fixes.
    (line,) = [r.getMessage() for r in caplog.records if r.name == "flask_a2a"]
    assert line.startswith("flask_a2a: tables a2a_push_configs, a2a_tasks missing")
    assert "`flask db upgrade`" in line
    assert "flask_a2a.store.migrations.create_tables(db.engine) after db.create_all()" in line
    engine = sa.create_engine(url)
    assert sa.inspect(engine).get_table_names() == []  # the store ran no DDL
    migrations.create_tables(engine)  # what a test fixture does (the migration: its bind)
    engine.dispose()
    assert client.send("again", skill="echo")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    a2a.shutdown(2, app)


def test_include_name_skips_only_the_exchanges_tables() -> None:
    seen: list[tuple[str | None, str]] = []

    def host(name: str | None, type_: str, parents: t.Mapping[str, str | None]) -> bool:
        seen.append((name, type_))
        return name != "legacy"

    include = migrations.include_name("x_", host=host)
    assert not include("x_tasks", "table", {}) and not include("x_task_counts", "table", {})
    assert include("invoice", "table", {}) and not include("legacy", "table", {})
    assert include("a2a_tasks", "table", {})  # another prefix's tables are the host's
    assert ("x_tasks", "table") not in seen and ("invoice", "table") in seen
