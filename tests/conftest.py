"""Shared fixtures: a fresh app per test, demo principals, runners and stores.

The ``runner_kind`` fixture runs each case once per runner: threads in this (unpatched)
process, gevent in a gevent-patched pytest session that ``test_gevent_session.py`` starts.
"""

from __future__ import annotations

import threading
import time
import typing as t

import pytest
from flask import Flask, request

from flask_a2a import A2A, Part, Principal, Skill, TaskContext
from flask_a2a.exchange.runner import GeventRunner, ThreadRunner, gevent_patched
from flask_a2a.store import MemoryStore
from flask_a2a.testing import A2ATestClient

#: token -> principal, shared by every test app.
TOKENS: dict[str, Principal] = {
    "alice": Principal("alice"),
    "bob": Principal("bob"),
    "alice-read": Principal("alice", scopes=frozenset({"tasks:read"})),
    "alice-write": Principal("alice", scopes=frozenset({"tasks:write"})),
    "alice-t2": Principal("alice", tenant="t2"),
}


def wait_for(predicate: t.Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes (bounded; for state that has no
    event to await, such as another thread's bookkeeping)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        threading.Event().wait(0.005)
    return predicate()


def next_millisecond() -> None:
    """Wait for the wire clock (millisecond precision) to tick, so timestamps are distinct."""
    from flask_a2a.protocol.model import utcnow

    start = utcnow()
    assert wait_for(lambda: utcnow() > start, timeout=1.0)


def token_principal() -> Principal | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return TOKENS.get(token) if scheme == "Bearer" else None


def echo(task: TaskContext) -> None:
    task.artifact([Part(text=task.message.text)], name="echo")


class Gate:
    """A handler that blocks until the test opens it (no sleeps: tests await events)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def handler(self, task: TaskContext) -> None:
        self.calls += 1
        task.working()
        self.entered.set()
        while not self.release.wait(0.01):
            task.check()
        task.artifact([Part(text="done")], name="gate")


@pytest.fixture
def gate() -> Gate:
    """A fresh gate: its handler holds a task WORKING until the test opens it."""
    return Gate()


@pytest.fixture
def webhook() -> t.Iterator[t.Any]:
    """A local webhook receiver (``tests/webhook.py``), closed after the test."""
    from tests.webhook import Webhook

    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture(params=["threads", "gevent"])
def runner_kind(request: pytest.FixtureRequest) -> str:
    """The runner a case's app gets. Each session keeps only its own cases (see
    :func:`pytest_collection_modifyitems`): threads here, gevent in the patched session."""
    return t.cast(str, request.param)


def param_of(item: pytest.Item, name: str) -> t.Any:
    """The value of parameter ``name`` in this case (None when it has no such parameter)."""
    callspec = getattr(item, "callspec", None)
    return None if callspec is None else callspec.params.get(name)


def gevent_case(item: pytest.Item) -> bool:
    """The case runs in the gevent-patched session: its ``runner_kind`` is gevent, or it is
    marked ``gevent_session`` (it asserts what only a patched process shows)."""
    if param_of(item, "runner_kind") == "gevent":
        return True
    return item.get_closest_marker("gevent_session") is not None


def runs_here(item: pytest.Item, patched: bool) -> bool:
    """The case belongs to this session (:func:`gevent_case`), and is no REST case of a
    ``jsonrpc_only`` test."""
    if param_of(item, "binding") == "rest" and item.get_closest_marker("jsonrpc_only"):
        return False
    return gevent_case(item) == patched


def gevent_shard() -> tuple[int, int] | None:
    """``(index, count)`` when this patched session runs one shard of the gevent cases
    (``A2A_TEST_GEVENT_SHARD=index/count``, set by ``tests/live/test_gevent_session.py``)."""
    import os

    shard = os.environ.get("A2A_TEST_GEVENT_SHARD")
    if not shard:
        return None
    index, count = shard.split("/")
    return int(index), int(count)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (not skip) what does not run here: the unpatched session runs no gevent
    case, the patched one (``tests/live/test_gevent_session.py``) runs nothing else, so no
    case is collected to be skipped and nothing runs twice; a patched shard keeps every
    count-th case from its index; a ``jsonrpc_only`` test has no REST case. Then the long
    work goes first (:func:`start_rank`), so parallel workers start on it and share the rest
    meanwhile."""
    patched = gevent_patched()
    shard = gevent_shard() if patched else None
    kept: list[pytest.Item] = []
    other: list[pytest.Item] = []
    for item in items:
        (kept if runs_here(item, patched) else other).append(item)
    if shard is not None:
        index, count = shard
        other.extend(item for position, item in enumerate(kept) if position % count != index)
        kept = kept[index::count]
    if other:
        config.hook.pytest_deselected(items=other)
    if config.pluginmanager.hasplugin("xdist"):
        for item in kept:
            if shares_a_module_fixture(item):
                item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    items[:] = sorted(kept, key=lambda item: start_rank(item))  # stable: the order otherwise


def shares_a_module_fixture(item: pytest.Item) -> bool:
    """The case uses a fixture set up once per module (a live server, a browser): its module's
    cases then go to one pytest-xdist worker (``--dist loadgroup``), which sets it up once."""
    if not isinstance(item, pytest.Function):
        return False
    defined = item._fixtureinfo.name2fixturedefs
    return any(
        fixture.scope == "module" for name in item.fixturenames for fixture in defined.get(name, ())
    )


def start_rank(item: pytest.Item) -> int:
    """Long work first, so that parallel workers end together: the ``early`` tests (the
    gevent shards), then the modules kept on one worker, then the rest."""
    if item.get_closest_marker("early") is not None:
        return 0
    return 1 if shares_a_module_fixture(item) else 2


@pytest.fixture
def make_runner(runner_kind: str) -> t.Callable[..., t.Any]:
    def build(size: int | None = None) -> t.Any:
        if runner_kind == "gevent":
            return GeventRunner(size or 100)
        return ThreadRunner(size or 32)

    return build


@pytest.fixture
def make_store() -> t.Callable[[], t.Any]:
    """The store backend (the SQL suite parametrizes its own)."""
    return MemoryStore


@pytest.fixture
def make_app(
    make_runner: t.Callable[..., t.Any], make_store: t.Callable[[], t.Any]
) -> t.Iterator[t.Callable[..., Flask]]:
    """Build a fresh TESTING app: ``make_app(skills=[...], config={...}, **A2A options)``."""
    exchanges: list[t.Any] = []

    def build(
        skills: t.Sequence[Skill] | None = None,
        config: dict[str, t.Any] | None = None,
        runner_size: int | None = None,
        **options: t.Any,
    ) -> Flask:
        app = Flask("test_app")
        app.config["TESTING"] = True
        app.config["A2A_KEEPALIVE_INTERVAL"] = 0.2
        app.config.update(config or {})
        options.setdefault("store", make_store())
        options.setdefault("runner", make_runner(runner_size))
        options.setdefault("principal", token_principal)
        skills = skills or [Skill(id="echo", name="Echo", description="Echo.", handler=echo)]
        a2a = A2A(app, skills=skills, **options)
        exchanges.append(a2a.exchange(app))
        return app

    yield build
    for exchange in exchanges:
        exchange.shutdown(timeout=5)


@pytest.fixture
def app(make_app: t.Callable[..., Flask]) -> Flask:
    return make_app()


@pytest.fixture
def client(app: Flask) -> A2ATestClient:
    return A2ATestClient(app, token="alice")


@pytest.fixture(params=["jsonrpc", "rest"])
def binding(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a case once per binding: every ``A2ATestClient`` made without ``binding=`` (the
    ``client`` fixture's too) speaks it. A module opts in with
    ``pytestmark = pytest.mark.usefixtures("binding")``; a case only JSON-RPC has carries
    ``@pytest.mark.jsonrpc_only("why")`` and its REST case is deselected
    (:func:`pytest_collection_modifyitems`)."""
    kind = t.cast(str, request.param)
    monkeypatch.setattr(A2ATestClient, "default_binding", kind)
    return kind


# ---------------------------------------------------------------- store backends (SQL suite)

PG_DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def session_worker() -> str | None:
    """This session's name among the sessions of one run that share the database servers: the
    pytest-xdist worker (``gw0``, ``gw1``...), or what a patched gevent session was given
    (``A2A_TEST_WORKER``); None for a session run alone."""
    import os

    return os.environ.get("A2A_TEST_WORKER") or os.environ.get("PYTEST_XDIST_WORKER") or None


def worker_url(url: str) -> str:
    """``url`` with the database of this session: the configured one's name plus
    ``_<worker>`` (``test_gw0``), so that parallel sessions never meet on one database;
    ``url`` itself for a session run alone. :func:`worker_databases` creates it."""
    import sqlalchemy as sa

    worker = session_worker()
    if worker is None:
        return url
    parsed = sa.engine.make_url(url)
    return parsed.set(database=f"{parsed.database}_{worker}").render_as_string(hide_password=False)


def configured_pg_url() -> str:
    """``A2A_TEST_DATABASE_URL`` (CI sets it) or the local default, shared by every session."""
    import os

    return os.environ.get("A2A_TEST_DATABASE_URL") or PG_DEFAULT_URL


def pg_url() -> str:
    """PostgreSQL for this session's tests (:func:`worker_url` of the configured one)."""
    return worker_url(configured_pg_url())


@pytest.fixture(scope="session")
def pg_engine() -> t.Iterator[t.Any]:
    """A session-wide PostgreSQL engine, or a skip that says why there is none."""
    import sqlalchemy as sa

    url = pg_url()
    try:
        engine = sa.create_engine(
            url, connect_args={"connect_timeout": 3}, pool_size=10, future=True
        )
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except Exception as exc:
        pytest.skip(f"PostgreSQL is not reachable at {url} (set A2A_TEST_DATABASE_URL): {exc}")
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def pg_own_engine(pg_engine: t.Any) -> t.Iterator[t.Any]:
    """An engine as ``A2A_DATABASE_URL`` gets one: its connections carry the store's default
    settings and autocommit, so a store on it runs one-statement calls in one round trip."""
    from flask_a2a.store.sql import engine_from_url

    engine = engine_from_url(
        pg_url(), statement_timeout=5.0, connect_args={"connect_timeout": 3}, pool_size=10
    )
    yield engine
    engine.dispose()


MYSQL_DEFAULT_URL = "mysql+pymysql://root@127.0.0.1:3306/test?charset=utf8mb4"


def configured_mysql_url() -> str:
    """``A2A_TEST_MYSQL_URL`` (CI sets it) or the local default, shared by every session."""
    import os

    return os.environ.get("A2A_TEST_MYSQL_URL") or MYSQL_DEFAULT_URL


def mysql_url() -> str:
    """MariaDB/MySQL for this session's tests (:func:`worker_url` of the configured one)."""
    return worker_url(configured_mysql_url())


@pytest.fixture(scope="session", autouse=True)
def worker_databases() -> None:
    """A session run beside others (a pytest-xdist worker, a gevent shard) creates its own
    PostgreSQL and MariaDB databases when missing, and keeps them for the next run. A server
    that does not answer is left to ``pg_engine`` / ``mysql_engine``, which skip saying why."""
    import sqlalchemy as sa

    if session_worker() is None:
        return
    for configured, url in ((configured_pg_url(), pg_url()), (configured_mysql_url(), mysql_url())):
        name = sa.engine.make_url(url).database
        try:
            engine = sa.create_engine(
                configured, connect_args={"connect_timeout": 3}, isolation_level="AUTOCOMMIT"
            )
        except ImportError:  # the driver is not installed: the engine fixture says so
            continue
        try:
            with engine.connect() as conn:
                if engine.dialect.name == "postgresql":
                    found = conn.execute(
                        sa.text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
                    ).first()
                    if found is None:
                        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
                else:
                    conn.exec_driver_sql(
                        f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4"
                    )
        except sa.exc.SQLAlchemyError:
            pass  # not reachable: the engine fixture skips its tests, saying why
        finally:
            engine.dispose()


@pytest.fixture(scope="session")
def mysql_engine() -> t.Iterator[t.Any]:
    """A session-wide MariaDB/MySQL engine (the host's kind: no session settings), or a skip
    that says why there is none."""
    import sqlalchemy as sa

    url = mysql_url()
    try:
        engine = sa.create_engine(
            url, connect_args={"connect_timeout": 3}, pool_size=10, future=True
        )
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except Exception as exc:
        pytest.skip(f"MariaDB/MySQL is not reachable at {url} (set A2A_TEST_MYSQL_URL; "
                    f"pip install flask-a2a[mysql]): {exc}")  # fmt: skip
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def mysql_own_engine(mysql_engine: t.Any) -> t.Iterator[t.Any]:
    """An engine as ``A2A_DATABASE_URL`` gets one (session settings, autocommit)."""
    from flask_a2a.store.sql import engine_from_url

    engine = engine_from_url(
        mysql_url(), statement_timeout=5.0, connect_args={"connect_timeout": 3}, pool_size=10
    )
    yield engine
    engine.dispose()


#: The SQL backends, for modules whose ``store_kind`` leaves out the memory store.
SQL_KINDS: t.Final = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
]


@pytest.fixture(params=["memory", *SQL_KINDS])
def store_kind(request: pytest.FixtureRequest) -> str:
    return t.cast(str, request.param)


@pytest.fixture
def new_store(
    store_kind: str, request: pytest.FixtureRequest, tmp_path: t.Any
) -> t.Iterator[t.Callable[..., t.Any]]:
    """``new_store(**SQLStore options)``: a fresh store of ``store_kind``; SQL tables use a
    unique prefix and are dropped afterwards."""
    import uuid

    import sqlalchemy as sa

    from flask_a2a.store.sql import SQLStore

    made: list[SQLStore] = []
    engines: list[t.Any] = []

    def build(**options: t.Any) -> t.Any:
        if store_kind == "memory":
            return MemoryStore()
        if store_kind == "sqlite":
            engine = sa.create_engine(f"sqlite:///{tmp_path / 'a2a.db'}")
            engines.append(engine)
        elif store_kind == "mysql":
            engine = request.getfixturevalue("mysql_own_engine")
        else:  # the store runs SET LOCAL on a foreign engine when its settings differ
            engine = request.getfixturevalue("pg_own_engine")
        options.setdefault("table_prefix", f"a2a_{uuid.uuid4().hex[:10]}_")
        store = SQLStore(engine, **options)
        made.append(store)
        return store

    yield build
    for store in made:
        store.drop()
    for engine in engines:
        engine.dispose()


@pytest.fixture
def new_pg_database(pg_engine: t.Any) -> t.Iterator[t.Callable[[], str]]:
    """``new_pg_database()``: the URL of a new, uniquely named PostgreSQL database (for tests
    that need the default ``a2a_`` tables or a whole schema to themselves); dropped afterwards."""
    import uuid

    import sqlalchemy as sa

    admin = pg_engine.execution_options(isolation_level="AUTOCOMMIT")
    names: list[str] = []

    def create() -> str:
        name = f"a2a_test_{uuid.uuid4().hex[:12]}"
        with admin.begin() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        names.append(name)
        return sa.engine.make_url(pg_url()).set(database=name).render_as_string(hide_password=False)

    yield create
    with admin.begin() as conn:
        for name in names:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# Engines tests touched close their idle connections after each test (tests/engine_hygiene.py).
pytest_plugins = ["tests.engine_hygiene"]
