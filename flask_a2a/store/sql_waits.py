"""Client-side bounds on every wait for the database: a hung server fails a call, never hangs it.

The statement timeout is the server's to enforce, so a database that accepts connections and
never answers (a stopped or wedged server, a half-dead proxy, a host lost behind a live TCP
endpoint) would hold a connect for libpq's default 130 s and a read for ever. Each engine gets
two client-side bounds, set on the DBAPI connection as it is made (a ``do_connect`` listener,
so they hold on any engine: the store's own and, through :func:`bound_waits`, a host's):

- **connect**: PostgreSQL ``connect_timeout`` (libpq counts whole seconds, at least 2; per
  address tried); PyMySQL / mysqlclient ``connect_timeout``, and the server's greeting read
  under the same bound;
- **read**: every later wait for the server. psycopg 3.3+: each wait of the connection
  (``Connection.wait``) ends after the bound, and the connection is closed (its protocol state
  is unknown), so the pool discards it; PyMySQL / mysqlclient ``read_timeout`` and
  ``write_timeout`` (socket timeouts). psycopg's waits are gevent-friendly once gevent has
  patched ``select`` before psycopg is imported (gunicorn ``-k gevent`` does).

Those bound each wait; a call that tries the database more than once (a run's last write tried
again on a fresh connection, a create whose shared INSERT failed tried alone) would wait each
try's bound in turn. So a call may set **one deadline for all its waits** (:func:`waits_until`,
a context variable: per thread, per greenlet): each wait is then cut to what is left of it
(psycopg's reads; every driver's connect, in whole seconds where the driver counts them; PyMySQL's
reads from the connection's next checkout on), and a connect with no time left fails at once.
:func:`one_call` gives a store call the engine's connect and read bounds together: a try on a
pooled connection the database stopped answering, then one on a fresh connection.

SQLite needs neither: its only wait is a lock, bounded by the busy timeout (the statement timeout).
SQLAlchemy is imported only by :func:`bound_waits`: the exchange sets deadlines on any store.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import math
import time
import typing as t
import weakref

if t.TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: Seconds a new connection may take by default (``A2A_DATABASE_CONNECT_TIMEOUT``).
CONNECT_TIMEOUT: t.Final = 3.0
#: What a read may wait past the statement timeout by default (``A2A_DATABASE_READ_TIMEOUT``):
#: the server ends a statement at its timeout, and its answer still has to travel.
READ_MARGIN: t.Final = 1.0
#: The shortest read a deadline leaves (seconds): a statement already sent gets this much.
_LEAST_READ: t.Final = 0.001

#: When every wait for the database in this context must have ended (``time.monotonic()``).
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "flask_a2a_database_deadline", default=None
)
#: Engines bounded by :func:`bound_waits`: the bound of one call on each (connect + read).
_CALL_BOUNDS: weakref.WeakKeyDictionary[Engine, float] = weakref.WeakKeyDictionary()


def read_timeout_for(statement_timeout: float | None, read_timeout: float | None) -> float | None:
    """The read bound: ``read_timeout``, else the statement timeout plus :data:`READ_MARGIN`."""
    if read_timeout is not None:
        return read_timeout
    return None if statement_timeout is None else statement_timeout + READ_MARGIN


def call_bound(connect_timeout: float | None, read_timeout: float | None) -> float | None:
    """One call's bound with these bounds: a read on a pooled connection the database stopped
    answering, then a connect for a fresh one (None: unbounded)."""
    if connect_timeout is None or read_timeout is None:
        return None
    return connect_timeout + read_timeout


class Until:
    """A deadline in force while entered (see :func:`waits_until`)."""

    __slots__ = ("deadline", "_token")

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self._token: contextvars.Token[float | None] | None = None

    def __enter__(self) -> None:
        deadline = self.deadline
        if deadline is not None:
            current = _DEADLINE.get()
            if current is None or deadline < current:
                self._token = _DEADLINE.set(deadline)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _DEADLINE.reset(self._token)
            self._token = None


def waits_until(deadline: float | None) -> Until:
    """Every wait for the database in this context ends by ``deadline`` (``time.monotonic()``),
    whatever its own bound; an earlier deadline already in force wins, and None adds none."""
    return Until(deadline)


def one_call(engine: Engine) -> Until:
    """The waits of one store call on ``engine``, bounded together by its connect and read
    bounds (:func:`call_bound`); nothing for an engine :func:`bound_waits` never bounded."""
    bound = _CALL_BOUNDS.get(engine)
    return waits_until(None if bound is None else time.monotonic() + bound)


def time_left() -> float | None:
    """Seconds left before this context's deadline (None: it has none; 0 or less: passed)."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


def _cut(bound: float | None) -> float | None:
    """``bound`` cut to what is left before this context's deadline."""
    left = time_left()
    if left is None:
        return bound
    left = max(left, _LEAST_READ)
    return left if bound is None else min(bound, left)


def _whole_seconds(given: t.Any, least: int) -> int | None:
    """A driver's connect timeout in whole seconds (None or 0 and less: unbounded)."""
    if given is None or float(given) <= 0:
        return None
    return max(least, math.ceil(float(given)))


def _connect_left(dialect: t.Any, given: t.Any, least: int | None) -> float | None:
    """The connect timeout a connect made now gets: ``given``, cut to what is left before the
    deadline (``least``: the driver counts whole seconds, this many at least; None: floats).
    Raises the driver's OperationalError when not even that much is left."""
    left = time_left()
    if left is None:
        return t.cast("float | None", given)
    if least is None:
        if left > 0:
            return left if given is None else min(float(given), left)
    elif math.floor(left) >= least:
        whole = _whole_seconds(given, least)
        return math.floor(left) if whole is None else min(whole, math.floor(left))
    dbapi = getattr(dialect, "loaded_dbapi", None) or dialect.dbapi
    raise dbapi.OperationalError(PASSED)


#: What a wait cut by the deadline says (the driver's OperationalError, wrapped by SQLAlchemy).
PASSED: t.Final = (
    "the database did not answer within the call's bound "
    "(A2A_DATABASE_READ_TIMEOUT + A2A_DATABASE_CONNECT_TIMEOUT)"
)


def bound_waits(
    engine: Engine, *, connect_timeout: float | None = CONNECT_TIMEOUT,
    read_timeout: float | None = None,
) -> None:  # fmt: skip
    """Bound every new connection of ``engine``: its connect by ``connect_timeout`` seconds,
    each later wait for the server by ``read_timeout`` (None: unbounded), and every wait by the
    deadline of the call that makes it (:func:`waits_until`). Settings given in the engine's
    own ``connect_args`` win. Connections already pooled keep what they had. A connect made
    under a deadline is made here (a ``do_connect`` listener registered after this one is not
    reached for it)."""
    import sqlalchemy as sa

    driver = engine.dialect.driver
    bound = call_bound(connect_timeout, read_timeout)
    if bound is not None:
        _CALL_BOUNDS[engine] = bound
    if engine.dialect.name == "postgresql":
        bounded = _bounded_psycopg(read_timeout) if driver == "psycopg" else None

        @sa.event.listens_for(engine, "do_connect")
        def _connect_pg(dialect: t.Any, record: t.Any, cargs: t.Any, cparams: t.Any) -> t.Any:
            if connect_timeout is not None:
                cparams.setdefault("connect_timeout", max(2, math.ceil(connect_timeout)))
            if time_left() is None:
                return None if bounded is None else bounded.connect(*cargs, **cparams)
            left = _connect_left(dialect, cparams.get("connect_timeout"), 2)
            params = {**cparams, "connect_timeout": left}
            return (dialect if bounded is None else bounded).connect(*cargs, **params)

    elif engine.dialect.name in ("mysql", "mariadb") and driver in ("pymysql", "mysqldb"):
        pymysql = driver == "pymysql"

        @sa.event.listens_for(engine, "do_connect")
        def _connect_mysql(dialect: t.Any, record: t.Any, cargs: t.Any, cparams: t.Any) -> t.Any:
            params = dict(cparams)
            reads = params.get("read_timeout", read_timeout)  # the engine's own wins
            writes = params.get("write_timeout", read_timeout)
            if connect_timeout is not None:
                params.setdefault("connect_timeout", _mysql_seconds(connect_timeout, driver))
            # PyMySQL reads the server's greeting under its read timeout: the connect's bound
            # (the checkout below sets the read bound); mysqlclient keeps it: the read bound.
            greeting = params.get("connect_timeout") if pymysql else reads
            greeting = reads if greeting is None or "read_timeout" in params else greeting
            if time_left() is not None:
                params["connect_timeout"] = _connect_left(
                    dialect, params.get("connect_timeout"), None if pymysql else 1
                )
                if pymysql:  # mysqlclient keeps its read bound for the connection's life
                    greeting = _cut(greeting)
            if greeting is not None:
                params["read_timeout"] = _mysql_seconds(greeting, driver)
            if writes is not None:
                params["write_timeout"] = _mysql_seconds(writes, driver)
            connection = dialect.connect(*cargs, **params)
            if pymysql:
                connection._flask_a2a_waits = (reads, writes)
            return connection

        if pymysql:

            @sa.event.listens_for(engine, "checkout")
            def _reads_left(dbapi_connection: t.Any, record: t.Any, proxy: t.Any) -> None:
                # PyMySQL applies its read and write timeouts to the socket at each wait.
                waits = getattr(dbapi_connection, "_flask_a2a_waits", None)
                if waits is None:  # pooled before this engine was bounded: kept as it is
                    return
                reads, writes = waits
                dbapi_connection._read_timeout = _cut(reads)
                dbapi_connection._write_timeout = _cut(writes)


def _mysql_seconds(seconds: float, driver: str) -> float | int:
    """PyMySQL takes float seconds; mysqlclient whole ones (at least 1)."""
    return seconds if driver == "pymysql" else max(1, math.ceil(seconds))


@functools.cache
def _bounded_psycopg(read_timeout: float | None) -> t.Any:
    """A ``psycopg.Connection`` whose every wait for the server ends after ``read_timeout``, or
    at the call's deadline if sooner (psycopg 3.3+, whose waits take a timeout; older:
    psycopg's own class, connect bound only)."""
    import psycopg

    waits = inspect.signature(psycopg.Connection.wait).parameters
    if "timeout" not in waits:
        return psycopg.Connection
    wait_timeout = getattr(psycopg.errors, "_WaitTimeout", psycopg.OperationalError)

    class BoundedConnection(psycopg.Connection):
        """Each wait without a timeout of its own gets ``read_timeout``, or what is left of
        the call's deadline; past it the connection is closed (mid-protocol, it cannot be
        reused) and the call fails."""

        def wait(self, gen: t.Any, interval: float = 0.1, timeout: float | None = None) -> t.Any:
            if timeout is not None:
                return super().wait(gen, interval, timeout)
            bound = _cut(read_timeout)
            if bound is None:
                return super().wait(gen, interval)
            try:
                return super().wait(gen, interval, bound)
            except wait_timeout:
                self.pgconn.finish()
                raise psycopg.OperationalError(
                    f"the database did not answer within {read_timeout:g} s "
                    "(A2A_DATABASE_READ_TIMEOUT)"
                    if bound == read_timeout
                    else PASSED
                ) from None

    return BoundedConnection
