"""What the SQL store does differently on SQLite: a busy timeout bounds each transaction's wait
for the file's lock, and a trim is cheap (no round trip), so it runs inside the settle.
SQLAlchemy 1.4 compiles no RETURNING for SQLite: the store then updates and trims as on MySQL."""

from __future__ import annotations

import typing as t

from sqlalchemy.engine import Connection

from .sql_dialect import SQLDialect
from .sql_versions import SQLITE_RETURNING


class SQLiteDialect(SQLDialect):
    """SQLite (a file, or ``:memory:`` for tests and the example)."""

    deferred_trims: t.ClassVar[bool] = False
    returning: t.ClassVar[bool] = SQLITE_RETURNING

    def bound(self, conn: Connection) -> None:
        conn.exec_driver_sql(f"PRAGMA busy_timeout = {self.millis}")
