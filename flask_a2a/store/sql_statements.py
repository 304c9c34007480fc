"""How one of the SQL store's statements reaches the database.

On an engine from :func:`~flask_a2a.store.sql_engine.engine_from_url` (whose connections carry
the statement timeout and autocommit) a one-statement call is one autocommit round trip, and the
hot statements run on the DBAPI cursor, compiled once (``sql_driver``); on the host's engine
every call is a short transaction bounded by the dialect (``SET LOCAL`` and the like). The
store's operations say what to run; this says how.
"""

from __future__ import annotations

import contextlib
import typing as t

from sqlalchemy.engine import Connection, Engine

from . import sql_driver, sql_waits


class Statements:
    """Runs the store's statements on ``engine``.

    :param transaction: the dialect's bounded transaction (``SQLDialect.transaction``).
    :param autocommits: the engine's connections carry the timeout and autocommit.
    :param require_tables: called before a statement while :attr:`ready` is False (migrations
        own the tables: it raises while they are missing; once it returns, they are there).
    """

    def __init__(
        self,
        engine: Engine,
        transaction: t.Callable[[], t.ContextManager[Connection]],
        *,
        autocommits: bool,
        require_tables: t.Callable[[], None],
        ready: bool,
    ) -> None:
        self.engine = engine
        self._transaction = transaction
        self.autocommits = autocommits
        self._require_tables = require_tables
        #: The tables are known to be there (made by the store, or checked once).
        self.ready = ready
        #: The hot statements' compiled text, run on the DBAPI cursor when the engine is the
        #: store's own (its connections carry the timeout and autocommit).
        self.driver = sql_driver.Driver(engine) if autocommits else None
        self._plain: dict[t.Hashable, sql_driver.Plain | None] = {}

    def bounded(self) -> sql_waits.Until:
        """One bound for the waits of a call that may reach the database more than once (a
        shared INSERT, then its row alone; an UPDATE, then the row read): the engine's connect
        and read bounds together, not each statement's (``sql_waits.one_call``)."""
        return sql_waits.one_call(self.engine)

    def _check_tables(self) -> None:
        self._require_tables()
        self.ready = True

    @contextlib.contextmanager
    def tx(self) -> t.Iterator[Connection]:
        """One short transaction, bounded by the statement timeout."""
        if not self.ready:
            self._check_tables()
        with self._transaction() as conn:
            yield conn

    @contextlib.contextmanager
    def one(self) -> t.Iterator[Connection]:
        """A call that is one statement: one autocommit round trip on an engine from
        ``engine_from_url``; else a bounded transaction."""
        if not self.ready:
            self._check_tables()
        if not self.autocommits:
            with self.tx() as conn:
                yield conn
            return
        with self.engine.connect() as conn:
            yield conn

    def plain_of(
        self, key: t.Hashable, statement: t.Any, columns: list[str] | None = None
    ) -> sql_driver.Plain | None:
        """``statement`` compiled for the DBAPI cursor (once per ``key``; a callable is built
        only when first needed); None: through SQLAlchemy (not the store's own engine, or the
        statement needs SQLAlchemy's binding)."""
        try:
            return self._plain[key]
        except KeyError:
            pass
        plain = None
        if self.driver is not None:
            if callable(statement):
                statement = statement()
            plain = sql_driver.compile_plain(self.engine, statement, columns)
        self._plain[key] = plain
        return plain

    def run(
        self,
        key: t.Hashable,
        statement: t.Any,
        params: dict[str, t.Any],
        columns: list[str] | None = None,
    ) -> tuple[list[tuple[t.Any, ...]], int] | None:
        """One autocommit statement on the DBAPI cursor: its rows and row count; None when it
        must go through SQLAlchemy (see :meth:`plain_of`)."""
        plain = self.plain_of(key, statement, columns)
        if plain is None:
            return None
        if not self.ready:
            self._check_tables()
        assert self.driver is not None
        return self.driver.run(plain, params)

    def execute(
        self,
        key: t.Hashable,
        statement: t.Any,
        params: dict[str, t.Any],
        columns: list[str] | None = None,
    ) -> tuple[t.Sequence[t.Sequence[t.Any]], int]:
        """One autocommit statement: its rows (each in the statement's column order) and row
        count, on the DBAPI cursor when it can (:meth:`run`), else through SQLAlchemy."""
        ran = self.run(key, statement, params, columns)
        if ran is not None:
            return ran
        with self.one() as conn:
            result = conn.execute(statement, params)
            return (result.all() if result.returns_rows else []), result.rowcount
