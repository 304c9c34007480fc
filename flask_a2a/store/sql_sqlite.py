"""What the SQL store does differently on SQLite: a busy timeout bounds each transaction's wait
for the file's lock, and a trim is cheap (no round trip), so it runs inside the settle."""

from __future__ import annotations

import typing as t

from sqlalchemy.engine import Connection

from .sql_dialect import SQLDialect


class SQLiteDialect(SQLDialect):
    """SQLite (a file, or ``:memory:`` for tests and the example)."""

    deferred_trims: t.ClassVar[bool] = False

    def bound(self, conn: Connection) -> None:
        conn.exec_driver_sql(f"PRAGMA busy_timeout = {self.millis}")
