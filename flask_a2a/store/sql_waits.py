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

SQLite needs neither: its only wait is a lock, bounded by the busy timeout (the statement timeout).
"""

from __future__ import annotations

import functools
import inspect
import math
import typing as t

import sqlalchemy as sa
from sqlalchemy.engine import Engine

#: Seconds a new connection may take by default (``A2A_DATABASE_CONNECT_TIMEOUT``).
CONNECT_TIMEOUT: t.Final = 3.0
#: What a read may wait past the statement timeout by default (``A2A_DATABASE_READ_TIMEOUT``):
#: the server ends a statement at its timeout, and its answer still has to travel.
READ_MARGIN: t.Final = 1.0


def read_timeout_for(statement_timeout: float | None, read_timeout: float | None) -> float | None:
    """The read bound: ``read_timeout``, else the statement timeout plus :data:`READ_MARGIN`."""
    if read_timeout is not None:
        return read_timeout
    return None if statement_timeout is None else statement_timeout + READ_MARGIN


def bound_waits(
    engine: Engine, *, connect_timeout: float | None = CONNECT_TIMEOUT,
    read_timeout: float | None = None,
) -> None:  # fmt: skip
    """Bound every new connection of ``engine``: its connect by ``connect_timeout`` seconds,
    each later wait for the server by ``read_timeout`` (None: unbounded). Settings given in
    the engine's own ``connect_args`` win. Connections already pooled keep what they had."""
    driver = engine.dialect.driver
    if engine.dialect.name == "postgresql":
        bounded = _bounded_psycopg(read_timeout) if driver == "psycopg" else None

        @sa.event.listens_for(engine, "do_connect")
        def _connect_pg(dialect: t.Any, record: t.Any, cargs: t.Any, cparams: t.Any) -> t.Any:
            if connect_timeout is not None:
                cparams.setdefault("connect_timeout", max(2, math.ceil(connect_timeout)))
            return None if bounded is None else bounded.connect(*cargs, **cparams)

    elif engine.dialect.name in ("mysql", "mariadb") and driver in ("pymysql", "mysqldb"):
        # PyMySQL reads the server's greeting under its read timeout: the connect's bound
        # until the "connect" listener below sets the read bound (mysqlclient: the read bound).
        greeting = connect_timeout if driver == "pymysql" else read_timeout
        greeting = read_timeout if greeting is None else greeting

        @sa.event.listens_for(engine, "do_connect")
        def _connect_mysql(dialect: t.Any, record: t.Any, cargs: t.Any, cparams: t.Any) -> None:
            if connect_timeout is not None:
                cparams.setdefault("connect_timeout", _mysql_seconds(connect_timeout, driver))
            if greeting is not None:
                cparams.setdefault("read_timeout", _mysql_seconds(greeting, driver))
            if read_timeout is not None:
                cparams.setdefault("write_timeout", _mysql_seconds(read_timeout, driver))

        if driver == "pymysql" and greeting != read_timeout:

            @sa.event.listens_for(engine, "connect")
            def _read_bound(dbapi_connection: t.Any, record: t.Any) -> None:
                # PyMySQL compares it at each read; one the engine's connect_args set is kept.
                if getattr(dbapi_connection, "_read_timeout", None) == greeting:
                    dbapi_connection._read_timeout = read_timeout


def _mysql_seconds(seconds: float, driver: str) -> float | int:
    """PyMySQL takes float seconds; mysqlclient whole ones (at least 1)."""
    return seconds if driver == "pymysql" else max(1, math.ceil(seconds))


@functools.cache
def _bounded_psycopg(read_timeout: float | None) -> t.Any:
    """A ``psycopg.Connection`` whose every wait for the server ends after ``read_timeout``
    (psycopg 3.3+, whose waits take a timeout; older: psycopg's own class, connect bound only)."""
    import psycopg

    waits = inspect.signature(psycopg.Connection.wait).parameters
    if read_timeout is None or "timeout" not in waits:
        return psycopg.Connection
    wait_timeout = getattr(psycopg.errors, "_WaitTimeout", psycopg.OperationalError)

    class BoundedConnection(psycopg.Connection):
        """Each wait without a timeout of its own gets ``read_timeout``; past it the connection
        is closed (mid-protocol, it cannot be reused) and the call fails."""

        def wait(self, gen: t.Any, interval: float = 0.1, timeout: float | None = None) -> t.Any:
            if timeout is not None:
                return super().wait(gen, interval, timeout)
            try:
                return super().wait(gen, interval, read_timeout)
            except wait_timeout:
                self.pgconn.finish()
                raise psycopg.OperationalError(
                    f"the database did not answer within {read_timeout:g} s "
                    "(A2A_DATABASE_READ_TIMEOUT)"
                ) from None

    return BoundedConnection
