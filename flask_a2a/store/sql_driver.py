"""The hot statements run on the DBAPI cursor: compiled once, executed without SQLAlchemy's layers.

A blocking SendMessage costs the SQL store one INSERT and one retention trim, each one autocommit
round trip. Through ``Connection.execute`` each also paid SQLAlchemy's execution context, result
wrapping and connection wrapper (about as much CPU as the driver's own work). On an engine from
:func:`~flask_a2a.store.sql_engine.engine_from_url` (whose connections carry the statement
timeout and autocommit) the store runs those statements here instead: the SQL text is compiled
once per statement, and each call checks a DBAPI connection out of the engine's own pool (its
size, timeout and recycling hold), runs the text on a cursor and checks it back in.

What SQLAlchemy would do around a failure still happens: a driver error comes out wrapped as
SQLAlchemy's (``IntegrityError``, ``DataError``, ``OperationalError`` …), and a connection the
dialect calls disconnected is invalidated, so the next call gets a fresh one. A statement whose
compiled form needs bind processing or has parameters expanded at execution time is not taken
here (:func:`compile_plain` returns None) and runs through SQLAlchemy.
"""

from __future__ import annotations

import contextlib
import re
import typing as t

import sqlalchemy as sa
from sqlalchemy.engine import Engine


class Plain(t.NamedTuple):
    """A statement compiled for one engine: its SQL text and the values bound at compile time."""

    sql: str
    defaults: dict[str, t.Any]
    #: psycopg: the text holds ``$1``, ``$2`` … for these names, run on a ``RawCursor`` (psycopg
    #: then has no query to convert: it caches that only for short texts of few parameters).
    names: tuple[str, ...] | None = None


_PYFORMAT: t.Final = re.compile(r"%\((\w+)\)s|%%")


def _numbered(sql: str) -> tuple[str, tuple[str, ...]] | None:
    """A pyformat text with ``$n`` placeholders instead, and the name of each ``n``."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "%"
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    if "$" in sql or "%" in _PYFORMAT.sub("", sql):  # a "$" of its own, or another placeholder
        return None
    return _PYFORMAT.sub(number, sql), tuple(names)


def compile_plain(
    engine: Engine, statement: t.Any, column_keys: list[str] | None = None
) -> Plain | None:
    """``statement`` as text the DBAPI cursor runs with a dict of parameters (an INSERT's:
    ``column_keys``), or None when it cannot run without SQLAlchemy (bind processing, a
    positional paramstyle, parameters expanded at execution)."""
    dialect = engine.dialect
    if dialect.paramstyle not in ("pyformat", "named"):
        return None
    compiled = statement.compile(dialect=dialect, column_keys=column_keys)
    if compiled._bind_processors or compiled.positional or compiled.post_compile_params:
        return None  # type conversions, or text rendered per execution: SQLAlchemy's to do
    defaults = {key: value for key, value in compiled.params.items() if value is not None}
    sql = str(compiled)
    if dialect.driver == "psycopg" and (numbered := _numbered(sql)) is not None:
        return Plain(numbered[0], defaults, numbered[1])
    return Plain(sql, defaults)


class Driver:
    """Runs :class:`Plain` statements on ``engine``'s pooled DBAPI connections."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect
        dbapi = self.dialect.dbapi  # (2.x also names it loaded_dbapi; 1.4 only dbapi)
        assert dbapi is not None
        self._error = dbapi.Error
        self._raw_cursor: t.Any = None
        if self.dialect.driver == "psycopg":
            import psycopg

            self._raw_cursor = psycopg.RawCursor

    def _wrap(self, exc: Exception, plain: Plain, params: t.Any, fairy: t.Any,
              cursor: t.Any) -> BaseException:  # fmt: skip
        """SQLAlchemy's exception for a driver error; invalidates a disconnected connection."""
        gone = False
        try:
            gone = bool(
                self.dialect.is_disconnect(t.cast(t.Any, exc), fairy.dbapi_connection, cursor)
            )
        except Exception:  # noqa: BLE001 - the original error is what matters
            gone = False
        if gone:
            fairy.invalidate(exc)
        return sa.exc.DBAPIError.instance(
            plain.sql, params, exc, self._error, connection_invalidated=gone,
            dialect=self.dialect,
        )  # fmt: skip

    def run(
        self, plain: Plain, params: dict[str, t.Any], fetch: bool = True
    ) -> tuple[list[tuple[t.Any, ...]], int]:
        """Execute once; the rows (``fetch`` and the statement returns rows) and the row count."""
        values = {**plain.defaults, **params} if plain.defaults else params
        fairy = self.engine.raw_connection()
        try:
            if plain.names is not None and self._raw_cursor is not None:
                cursor = self._raw_cursor(fairy.dbapi_connection)
                arguments: t.Any = [values[name] for name in plain.names]
            else:
                cursor, arguments = fairy.cursor(), values
            try:
                cursor.execute(plain.sql, arguments)
                rows = list(cursor.fetchall()) if fetch and cursor.description is not None else []
                count = cursor.rowcount
                cursor.close()
                return rows, count
            except self._error as exc:
                raise self._wrap(exc, plain, values, fairy, cursor) from exc
            except Exception:
                raise
            except BaseException as exc:  # a timeout or exit mid-statement: the state is unknown
                fairy.invalidate(exc)
                raise
        finally:
            fairy.close()

    @contextlib.contextmanager
    def transaction(self) -> t.Iterator[Transaction]:
        """``START TRANSACTION`` … ``COMMIT`` on one pooled connection (MySQL/MariaDB, whose
        store connections autocommit); rolled back if anything in it fails."""
        fairy = self.engine.raw_connection()
        try:
            cursor = fairy.cursor()
            begun = Plain("START TRANSACTION", {})
            try:
                cursor.execute(begun.sql)
                yield Transaction(self, fairy, cursor)
                cursor.execute("COMMIT")
            except self._error as exc:
                with contextlib.suppress(Exception):
                    cursor.execute("ROLLBACK")
                raise self._wrap(exc, begun, {}, fairy, cursor) from exc
            except Exception:
                with contextlib.suppress(Exception):
                    cursor.execute("ROLLBACK")
                raise
            except BaseException as exc:  # a timeout or exit mid-statement: the state is unknown
                fairy.invalidate(exc)
                raise
            finally:
                with contextlib.suppress(Exception):
                    cursor.close()
        finally:
            fairy.close()


class Transaction:
    """Statements in one :meth:`Driver.transaction`."""

    def __init__(self, driver: Driver, fairy: t.Any, cursor: t.Any) -> None:
        self._driver = driver
        self._fairy = fairy
        self._cursor = cursor

    def run(self, plain: Plain, params: dict[str, t.Any]) -> list[tuple[t.Any, ...]]:
        """Execute once; the rows it returns."""
        values = {**plain.defaults, **params} if plain.defaults else params
        try:
            self._cursor.execute(plain.sql, values)
            return list(self._cursor.fetchall()) if self._cursor.description is not None else []
        except self._driver._error as exc:
            raise self._driver._wrap(exc, plain, values, self._fairy, self._cursor) from exc

    def many(self, plain: Plain, rows: list[dict[str, t.Any]]) -> None:
        """Execute once per parameter set (the driver's ``executemany``)."""
        values = [{**plain.defaults, **row} for row in rows] if plain.defaults else rows
        try:
            self._cursor.executemany(plain.sql, values)
        except self._driver._error as exc:
            raise self._driver._wrap(exc, plain, values, self._fairy, self._cursor) from exc
