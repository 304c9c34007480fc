"""How the SQL store reaches the database: an engine of its own, carrying its settings.

An engine from :func:`engine_from_url` puts the store's statement timeout (and commit mode) in
every connection, autocommits on PostgreSQL and MySQL/MariaDB and keeps a fixed pool, so the
store can run a one-statement call as one round trip (``SQLStore`` asks
:func:`session_settings`). Any other engine is the host's: the store then sets what it needs
``LOCAL``ly (MySQL: for the session, restored after) per transaction.
"""

from __future__ import annotations

import inspect
import math
import typing as t
import weakref

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.engine.default import DefaultDialect

from .base import EXTRA_HINT
from .sql_versions import require, reset_to_autocommit
from .sql_waits import CONNECT_TIMEOUT, bound_waits, read_timeout_for

#: Engines built by :func:`engine_from_url` whose connections carry the store's session settings
#: (statement timeout, asynchronous commit), and whether they autocommit (PostgreSQL): the store
#: then runs a one-statement call as one round trip.
_SESSION_SETTINGS: weakref.WeakKeyDictionary[Engine, tuple[int, bool, bool]] = (
    weakref.WeakKeyDictionary()
)


def engine_from_url(
    url: str,
    *,
    statement_timeout: float | None = None,
    asynchronous_commit: bool = True,
    connect_timeout: float | None = CONNECT_TIMEOUT,
    read_timeout: float | None = None,
    **options: t.Any,
) -> Engine:
    """An engine for ``A2A_DATABASE_URL``; a missing driver names the extra to install.

    With ``statement_timeout`` every connection carries it (PostgreSQL ``statement_timeout``
    and, if ``asynchronous_commit``, ``synchronous_commit = off``; MySQL/MariaDB: the
    :func:`mysql_session` settings; SQLite's busy timeout). On PostgreSQL and MySQL the engine
    then autocommits, so a :class:`SQLStore` on it runs a one-statement
    call as one round trip instead of ``BEGIN; SET LOCAL ...; statement; COMMIT``; the store
    opens real transactions where a call needs several statements. Give such an engine to the
    store alone. An in-memory SQLite URL gets one shared connection, so every thread sees the
    same database.

    Every new connection is bounded on the client side (:mod:`.sql_waits`): its connect by
    ``connect_timeout`` seconds, each later wait for the server by ``read_timeout`` (default:
    the statement timeout plus a second; None with no statement timeout), so a database that
    hangs fails the call instead of holding it.
    """
    require(url)  # this SQLAlchemy runs the store, and has a dialect for the URL's driver
    connect_args = dict(options.pop("connect_args", {}))
    millis = None if statement_timeout is None else to_millis(statement_timeout)
    if url in ("sqlite://", "sqlite:///:memory:") or url.startswith("sqlite:///:memory:?"):
        options.setdefault("poolclass", sa.pool.StaticPool)
        connect_args.setdefault("check_same_thread", False)
    elif url.startswith("sqlite"):
        # A file: pooled connections shared by threads, SQLAlchemy 2's default (1.4 opens and
        # closes one per use).
        options.setdefault("poolclass", sa.pool.QueuePool)
        connect_args.setdefault("check_same_thread", False)
    autocommit = False
    if millis is not None and url.startswith("postgresql"):
        autocommit = True
        sync = " -c synchronous_commit=off" if asynchronous_commit else ""
        connect_args["options"] = f"-c statement_timeout={millis}{sync}"
        options.setdefault("isolation_level", "AUTOCOMMIT")
        # A fixed pool: past it a call waits (bounded like a statement) instead of opening a
        # connection per request, which costs PostgreSQL a process (~10x a store call).
        options.setdefault("pool_size", 20)
        options.setdefault("max_overflow", 0)
        options.setdefault("pool_timeout", millis / 1000)
    elif millis is not None and url.startswith(("mysql", "mariadb")):
        autocommit = True
        options.setdefault("isolation_level", "AUTOCOMMIT")
        options.setdefault("pool_size", 20)  # as for PostgreSQL: a fixed pool
        options.setdefault("max_overflow", 0)
        options.setdefault("pool_timeout", millis / 1000)
        options.setdefault("pool_recycle", 3600)  # before the server's wait_timeout drops it
        # A ROLLBACK as each call ends is a round trip on MySQL (PyMySQL sends it even in
        # autocommit): skipped, and ``_reset_mysql`` rolls back only a connection the server
        # says is in a transaction (an explicit one the store left open).
        options.setdefault("pool_reset_on_return", None)
        if "skip_autocommit_rollback" in inspect.signature(DefaultDialect).parameters:
            options.setdefault("skip_autocommit_rollback", True)  # SQLAlchemy 2.0.43 and later
    elif millis is not None and url.startswith("sqlite"):
        connect_args["timeout"] = millis / 1000
    # SQLAlchemy 2's Engine on 1.4 too (2.x takes only True): no implicit autocommit, and the
    # store's autocommit is the connection's isolation level on both.
    options.setdefault("future", True)
    try:
        engine = sa.create_engine(url, connect_args=connect_args, **options)
    except ImportError as exc:
        hint = EXTRA_HINT
        if url.startswith(("mysql", "mariadb")):
            hint = "pip install flask-a2a[mysql]"
        elif "psycopg2" in str(exc):  # postgresql+psycopg2://, or postgresql:// before 2.1
            hint = "pip install psycopg2-binary"
        raise ImportError(
            f"the SQL store could not load the database driver for {url.split(':', 1)[0]!r} "
            f"({exc}); {hint}"
        ) from exc
    if millis is not None and engine.dialect.name in ("mysql", "mariadb"):
        carried = millis

        if options.get("pool_reset_on_return", "rollback") is None:
            sa.event.listen(engine, "reset", _reset_mysql)

        @sa.event.listens_for(engine, "connect")
        def _carry(dbapi_connection: t.Any, record: t.Any) -> None:
            """Every new connection: the store's timeouts, strict mode, READ COMMITTED."""
            cursor = dbapi_connection.cursor()
            try:
                for statement in mysql_session(carried, is_mariadb(dbapi_connection)):
                    cursor.execute(statement)
            finally:
                cursor.close()

    if autocommit:
        reset_to_autocommit(engine)
    if millis is not None:
        _SESSION_SETTINGS[engine] = (millis, asynchronous_commit, autocommit)
    bound_waits(
        engine, connect_timeout=connect_timeout,
        read_timeout=read_timeout_for(statement_timeout, read_timeout),
    )  # fmt: skip
    return engine


#: The server's "in a transaction" status bit (``SERVER_STATUS_IN_TRANS``).
_IN_TRANSACTION: t.Final = 1


def _reset_mysql(dbapi_connection: t.Any, record: t.Any, state: t.Any = None) -> None:
    """A connection back in the pool is rolled back only if the server says a transaction is
    open (PyMySQL keeps the last status; a driver without it is always rolled back). ``state``:
    SQLAlchemy 2 passes the reset's, 1.4 only the first two."""
    if getattr(dbapi_connection, "server_status", _IN_TRANSACTION) & _IN_TRANSACTION:
        dbapi_connection.rollback()


def is_mariadb(dbapi_connection: t.Any) -> bool:
    """The server a MySQL-protocol DBAPI connection talks to is MariaDB (not MySQL)."""
    info = dbapi_connection.get_server_info()
    if isinstance(info, bytes):
        info = info.decode()
    return "mariadb" in str(info).lower()


def mysql_session(millis: int, mariadb: bool) -> list[str]:
    """What a MySQL/MariaDB session of the store carries.

    The statement timeout: MariaDB's ``max_statement_time`` (seconds, every statement);
    MySQL's ``max_execution_time`` (milliseconds) bounds SELECTs only, so the lock waits are
    bounded too (``innodb_lock_wait_timeout``, whole seconds, at least 1). Strict mode: a value
    that does not fit is refused, never truncated. READ COMMITTED: no gap locks, so concurrent
    settles and trims do not deadlock on ranges (docs/storage-and-scaling.md, MariaDB/MySQL).
    """
    seconds = max(1, math.ceil(millis / 1000))
    timeout = (
        f"max_statement_time = {millis / 1000:.3f}" if mariadb else f"max_execution_time = {millis}"
    )
    strict = "TRIM(BOTH ',' FROM CONCAT(@@SESSION.sql_mode, ',STRICT_ALL_TABLES'))"
    settings = (
        f"SET SESSION {timeout}, SESSION innodb_lock_wait_timeout = {seconds}, "
        f"SESSION lock_wait_timeout = {seconds}, SESSION sql_mode = {strict}"
    )
    return [settings, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"]


def to_millis(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def session_settings(engine: Engine) -> tuple[int, bool, bool] | None:
    """(statement timeout ms, asynchronous commit, autocommit) that ``engine``'s connections
    carry, or None for an engine not built by :func:`engine_from_url`."""
    return _SESSION_SETTINGS.get(engine)
