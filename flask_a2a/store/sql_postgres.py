"""What the SQL store does differently on PostgreSQL.

* Replicas opening the store together serialize their DDL on a transaction-scoped advisory lock
  (DDL is transactional here).
* A store on the host's engine bounds each of its transactions with ``SET LOCAL
  statement_timeout`` (and, by default, ``synchronous_commit = off``): the host's own
  transactions never see either.
* The task counts per tier are kept by statement-level triggers (``sql_counts``).
* A trim is one statement: the doomed rows are locked ``SKIP LOCKED``, so concurrent trims of
  one tier never wait on (or deadlock over) the same oldest rows; a row another trim holds is
  that trim's to delete.
"""

from __future__ import annotations

import contextlib
import typing as t
import zlib

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..protocol.model import Tier
from . import sql_counts
from .sql_dialect import SQLDialect, StoreHost, refuse_nul, shape


class PostgresDialect(SQLDialect):
    """PostgreSQL (``postgresql+psycopg://``, ``postgresql+psycopg2://``)."""

    counts = True

    def ddl_lock(
        self, conn: Connection, name: str, seconds: float
    ) -> contextlib.AbstractContextManager[None]:
        key = zlib.crc32(name.encode()) & 0x7FFFFFFF
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
        return contextlib.nullcontext()  # released at the transaction's end

    def install_counts(
        self, conn: Connection, tasks: sa.Table, counts: sa.Table, prefix: str
    ) -> None:
        sql_counts.install(conn, tasks, counts, prefix)

    def uninstall_counts(self, conn: Connection, prefix: str) -> None:
        sql_counts.uninstall(conn, prefix)

    def check_row(self, row: dict[str, t.Any]) -> None:
        """psycopg2 raises a bare ValueError for a NUL (psycopg 3 a DataError): refused first."""
        refuse_nul(row)

    def bound(self, conn: Connection) -> None:
        # LOCAL: only this transaction, never the host app's own on a shared engine. Task rows
        # are not jobs (docs/storage-and-scaling.md), so by default a commit does not wait for
        # the WAL flush; a crash may lose the last few updates.
        sync = "; SET LOCAL synchronous_commit = off" if self.asynchronous_commit else ""
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {self.millis}{sync}")

    def build_trim(self, host: StoreHost, tier: Tier) -> t.Any:
        """One statement: delete the locked oldest rows, then the owner's orphan configs."""
        c, pc = host.tasks.c, host.push_configs.c
        oldest = self.oldest_terminal(host, tier)
        locked = (
            sa.select(c.id)
            .where(c.id.in_(oldest.scalar_subquery()))
            .with_for_update(skip_locked=True)
        )
        doomed = (
            host.tasks.delete()
            .where(c.id.in_(locked.scalar_subquery()))
            .returning(c.id)
            .cte("doomed")
        )
        alive = sa.select(c.id).where(c.id == pc.task_id).exists()
        orphans = host.push_configs.delete().where(
            pc.owner == sa.bindparam("owner"),
            sa.select(doomed.c.id).exists(),
            sa.or_(pc.task_id.in_(sa.select(doomed.c.id)), ~alive),
        )
        return sa.select(doomed.c.id).add_cte(orphans.cte("orphans"))

    def trim(self, host: StoreHost, tier: Tier, params: dict[str, t.Any]) -> list[str]:
        """One autocommit statement, run after every settle."""
        statement = self.trim_statement(host, tier)
        rows, _ = host.statements.execute(("trim", *shape(tier)), statement, params)
        return [row[0] for row in rows]
