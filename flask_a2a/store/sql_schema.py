"""The SQL store's tables, their indexes and their DDL: made, brought up to date, dropped.

Two tables, ``<prefix>tasks`` and ``<prefix>push_configs`` (on PostgreSQL and MySQL also
``<prefix>task_counts``, kept by triggers: ``sql_counts``). A task table made by an older
release gets the newer columns (and indexes) on open, or by a migration
(``flask_a2a.store.migrations``); its rows then read as a session's, made in no tenant. What a
database declares its own way (collations, a digest column, index shapes, DDL locks) is its
dialect's (``sql_dialect``).
"""

from __future__ import annotations

import typing as t

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..protocol.errors import InternalError
from ..protocol.limits import MAX_KEY, MAX_TASK_ID
from . import sql_counts, sql_mysql
from .sql_dialect import SQLDialect

#: Ids are compared byte-wise in SQL, as Python compares them (keyset paging needs one order).
_ID = sql_mysql.Exact(MAX_TASK_ID).with_variant(sa.String(MAX_TASK_ID, collation="C"), "postgresql")
#: A caller's key (owner, tenant, ids), matched exactly (MySQL: binary NO PAD collation).
_KEY = sql_mysql.Exact(MAX_KEY)
#: Columns added after the first release: an older table gets them on open (or by migration).
ADDED_COLUMNS: t.Final = ("tenant", "scopes", "run_by", "lease_until", "run_deadline")


class MissingTablesError(RuntimeError):
    """Table creation is off and the store's tables (or columns) are not there.

    ``str(exc)`` (logged once, at the first call that meets it) names the tables and the fix;
    the caller is answered :attr:`answer`, -32603 saying the operator must create them.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        #: What the caller is told (a store error's ``answer``: ``bindings.checks``).
        self.answer = InternalError(
            "Internal error: this server's task store has no tables; its operator must "
            "create them (see the server log)"
        )

    @classmethod
    def naming(cls, missing: list[str], table_prefix: str) -> MissingTablesError:
        """The error for these missing tables (or ``table.column``), with the fix."""
        prefix = "" if table_prefix == "a2a_" else f", {table_prefix!r}"
        return cls(
            f"flask_a2a: {'table' if len(missing) == 1 else 'tables'} "
            f"{', '.join(missing)} missing and table creation is off (A2A_CREATE_TABLES = "
            "False): run `flask db upgrade` (the revision that calls "
            "flask_a2a.store.migrations.create_tables), or in a test fixture call "
            f"flask_a2a.store.migrations.create_tables(db.engine{prefix}) after "
            "db.create_all() (docs/existing-app.md, Tests)"
        )


class Schema:
    """The store's tables for one dialect and table prefix; touches no database until asked."""

    def __init__(self, dialect: SQLDialect, table_prefix: str) -> None:
        self.dialect = dialect
        self.table_prefix = table_prefix
        self.metadata = sa.MetaData()
        self.tasks = sa.Table(
            f"{table_prefix}tasks",
            self.metadata,
            sa.Column("id", _ID, primary_key=True),
            sa.Column("owner", _KEY, nullable=False),
            sa.Column("tenant", _KEY, nullable=True),
            sa.Column("scopes", sql_mysql.LONG_TEXT, nullable=True),
            sa.Column("skill", _KEY, nullable=True),
            sa.Column("version", sa.Integer, nullable=False),
            sa.Column("state", sa.String(32), nullable=False),
            sa.Column("status_ts", sa.BigInteger, nullable=False),
            sa.Column("context_id", _KEY, nullable=True),
            sa.Column("created_at", sa.BigInteger, nullable=False),
            sa.Column("body", sql_mysql.LONG_TEXT, nullable=False),
            # The run's lease (``store/leases.py``): NULL unless the task is running.
            sa.Column("run_by", _KEY, nullable=True),
            sa.Column("lease_until", sa.BigInteger, nullable=True),
            sa.Column("run_deadline", sa.BigInteger, nullable=True),
            *dialect.extra_columns(),
            **sql_mysql.TABLE_OPTIONS,
        )
        #: The lapsed-lease sweep reads a range of it: only running tasks have a value.
        self.lease_index = sa.Index(f"ix_{table_prefix}tasks_lease", self.tasks.c.lease_until)
        self.indexes = dialect.indexes(self.tasks, table_prefix, self.lease_index)
        self.push_configs = sa.Table(
            f"{table_prefix}push_configs",
            self.metadata,
            sa.Column("task_id", _ID, primary_key=True),
            sa.Column("id", _KEY, primary_key=True),
            sa.Column("owner", _KEY, nullable=False, index=True),
            sa.Column("seq", sa.BigInteger, nullable=False),
            sa.Column("body", sql_mysql.LONG_TEXT, nullable=False),
            **sql_mysql.TABLE_OPTIONS,
        )
        #: PostgreSQL and MySQL: task counts per tier, kept by triggers (``sql_counts``).
        self.counts = (
            sql_counts.counts_table(self.metadata, table_prefix) if dialect.counts else None
        )

    def missing(self, conn: Connection) -> list[str]:
        """The tables (or, when all are there, task columns) not in the database."""
        inspector = sa.inspect(conn)
        missing = [table.name for table in self.metadata.sorted_tables
                   if not inspector.has_table(table.name)]  # fmt: skip
        if not missing:
            present = {col["name"] for col in inspector.get_columns(self.tasks.name)}
            missing = [f"{self.tasks.name}.{col.name}" for col in self.tasks.columns
                       if col.name not in present]  # fmt: skip
        return missing

    def create(self, conn: Connection, lock_timeout: float) -> None:
        """Create what is missing on ``conn`` (in its transaction); bring an older table up to
        date. Replicas starting together do not race on the DDL (the dialect's lock)."""
        with self.dialect.ddl_lock(conn, self.tasks.name, lock_timeout):
            self._create(conn)

    def _create(self, conn: Connection) -> None:
        inspector = sa.inspect(conn)
        if inspector.has_table(self.tasks.name):
            present = {col["name"] for col in inspector.get_columns(self.tasks.name)}
            # Types and collations first (MySQL): the new columns come out right.
            self.dialect.upgrade_table(conn, self.tasks)
            quote = conn.dialect.identifier_preparer.quote
            for name in ADDED_COLUMNS:
                if name not in present:
                    kind = self.tasks.c[name].type.compile(dialect=conn.dialect)
                    conn.exec_driver_sql(
                        f"ALTER TABLE {quote(self.tasks.name)} ADD COLUMN {name} {kind}"
                    )
            self.dialect.add_extra_columns(conn, self.tasks, present)
            self.dialect.create_indexes(conn, self.indexes)  # an older table may lack them
        else:
            self.metadata.create_all(conn, tables=[self.tasks], checkfirst=False)
        if not inspector.has_table(self.push_configs.name):
            self.metadata.create_all(conn, tables=[self.push_configs], checkfirst=False)
        else:
            self.dialect.upgrade_table(conn, self.push_configs)
        if self.counts is not None and not inspector.has_table(self.counts.name):
            self.metadata.create_all(conn, tables=[self.counts], checkfirst=False)
            self.dialect.install_counts(conn, self.tasks, self.counts, self.table_prefix)

    def drop(self, conn: Connection) -> None:
        """Drop what :meth:`create` makes (every task is lost)."""
        self.metadata.drop_all(conn, checkfirst=True)
        self.dialect.uninstall_counts(conn, self.table_prefix)
