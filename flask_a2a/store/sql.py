"""The SQL store: SQLAlchemy 2 Core on PostgreSQL, MySQL/MariaDB or SQLite, shared by every replica.

This module is the store: what it is built from, and a task's own row (created, read, updated,
deleted, trimmed: the hot path, written here in full). Its other operations are plain objects it
builds once over its tables and calls: a ListTasks page and the replica poll (``sql_listing``),
the run lease columns (``sql_leases``), push configs (``sql_push``), an owner's data exported or
erased (``sql_owners``); a row read back is ``sql_rows``'. Its tables and their DDL are
``sql_schema`` (created if absent; with ``create_tables=False`` migrations make them:
``flask_a2a.store.migrations``); how a statement reaches the database is ``sql_statements``;
what a database does its own way is its dialect's (``sql_dialect``: ``sql_postgres``,
``sql_mysql``, ``sql_sqlite``).

Writes are optimistic: ``UPDATE ... WHERE id = :id AND version = :expected``. Timestamps are
integer microseconds since the epoch: exact, and one order on every backend.

Every call runs with a statement timeout (PostgreSQL ``statement_timeout``, MariaDB
``max_statement_time`` / MySQL ``max_execution_time`` and the InnoDB lock wait, SQLite
``busy_timeout``), so a store call never hangs forever: carried by the connection on an engine
from :func:`engine_from_url` (a one-statement call is then one autocommit round trip), set
for the transaction only on the host's engine.
"""

from __future__ import annotations

import dataclasses
import logging
import typing as t

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..protocol.limits import refusal, unstorable
from ..protocol.model import PushConfig, TaskState, Tier
from . import sql_mysql
from .base import ListQuery, StaleTaskError, TaskPage, TaskRecord, encode_task
from .leases import LEASED_STATES, LapsedRun, LeaseTerms
from .rounds import RoundFailed, Rounds
from .sql_dialect import MULTI_ROWS, ROW_FIELDS, SQLDialect, chunks, exact, micros, scope_text
from .sql_engine import engine_from_url as engine_from_url
from .sql_engine import session_settings, to_millis
from .sql_leases import LeaseRows
from .sql_listing import Listing
from .sql_owners import OwnerRows
from .sql_postgres import PostgresDialect
from .sql_push import PushConfigRows
from .sql_rows import Columns, new_lease, read_record
from .sql_schema import MissingTablesError as MissingTablesError
from .sql_schema import Schema
from .sql_sqlite import SQLiteDialect
from .sql_statements import Statements
from .sql_versions import require

log = logging.getLogger("flask_a2a")

#: The dialects whose differences have a module of their own (any other: the standard).
_DIALECTS: t.Final[dict[str, type[SQLDialect]]] = {
    "postgresql": PostgresDialect,
    "sqlite": SQLiteDialect,
    **dict.fromkeys(sql_mysql.DIALECTS, sql_mysql.MySQLDialect),
}


class _RoundRefused(Exception):
    """A multi-row INSERT failed: which row (if any) was at fault is not known."""


def _unstorable_field(row: dict[str, t.Any]) -> tuple[str, str] | None:
    """The field (and why) of a row PostgreSQL refused, when the row says which."""
    for column, field, limit in ROW_FIELDS:
        value = row.get(column)
        reason = None if value is None else unstorable(value, limit)
        if reason is not None:
            return field, reason
    return None


def _same_row(stored: Columns, row: dict[str, t.Any]) -> bool:
    """The stored row is ``row`` as a create wrote it: its first version, same ownership, same
    body (the task's JSON, with its timestamps and message ids: no other write makes it)."""
    return (
        stored.version == 1
        and stored.body == row["body"]
        and (stored.owner, stored.tenant, stored.scopes) == (row["owner"], row["tenant"],
                                                             row["scopes"])
    )  # fmt: skip


class SQLStore:
    """A :class:`~flask_a2a.store.Store` on a SQLAlchemy engine (PostgreSQL, MySQL/MariaDB
    or SQLite).

    :param engine: the app's engine (Flask-SQLAlchemy's, or one from ``A2A_DATABASE_URL``).
    :param table_prefix: prefix of the two table names, so several exchanges can share a DB.
    :param statement_timeout: seconds any one store call may wait on the database.
    :param shared: other processes use the same tables, so runs poll for foreign writes
        (a cancel served by another replica). Default: True except for in-memory SQLite.
    :param asynchronous_commit: on PostgreSQL, the store's own transactions do not wait for
        the WAL flush (about 1 ms per write here); a database crash may lose the last few task
        updates, never corrupt them. Set False for synchronous commits.
    :param create_tables: create what is missing when the store opens. False: migrations own
        the tables (:mod:`flask_a2a.store.migrations`); the store runs no DDL and its first call
        fails with :class:`MissingTablesError` while they are absent.
    """

    filters_scope = True
    filters_tenant = True

    def __init__(
        self,
        engine: Engine,
        table_prefix: str = "a2a_",
        *,
        statement_timeout: float = 5.0,
        shared: bool | None = None,
        asynchronous_commit: bool = True,
        create_tables: bool = True,
    ) -> None:
        require()  # a SQLAlchemy older than the floor: one clear line, not a TypeError later
        self.engine = engine
        #: PostgreSQL: commit without waiting for the WAL flush (``synchronous_commit = off``).
        self.asynchronous_commit = asynchronous_commit
        self.table_prefix = table_prefix
        self.statement_timeout = statement_timeout
        millis = to_millis(statement_timeout)
        carried = session_settings(engine)
        #: The engine's connections already carry this timeout and commit mode ...
        session = carried is not None and carried[:2] == (millis, asynchronous_commit)
        #: ... and autocommit: a one-statement call is one round trip.
        autocommits = session and bool(carried and carried[2])
        #: What this database does its own way (``sql_postgres``, ``sql_mysql``,
        #: ``sql_sqlite``); ``dialect.name`` is SQLAlchemy's name for it.
        self.dialect = _DIALECTS.get(engine.dialect.name, SQLDialect)(
            engine,
            millis=millis,
            asynchronous_commit=asynchronous_commit,
            carried=session,
            autocommits=autocommits,
        )
        if shared is None:
            in_memory = engine.url.database in (None, "", ":memory:")
            shared = not (self.dialect.name == "sqlite" and in_memory)
        #: Other processes write these tables: the exchange polls them for foreign changes.
        self.shared = shared
        #: A trim is a round trip (PostgreSQL, MySQL): retention runs it just after a settle's
        #: answer, shared by the tier's settles meanwhile (``exchange/retention.py``).
        self.deferred_trims = self.dialect.deferred_trims
        #: The tables and their DDL (``sql_schema``); the store's names for them below.
        self.schema = Schema(self.dialect, table_prefix)
        self.metadata = self.schema.metadata
        self.tasks = self.schema.tasks
        self.push_configs = self.schema.push_configs
        self.counts = self.schema.counts
        self.indexes = self.schema.indexes
        self.lease_index = self.schema.lease_index
        #: Creates arriving while one INSERT runs are stored together by the next.
        self._creates: Rounds[None, dict[str, t.Any]] = Rounds()
        #: How a statement reaches the database (``sql_statements``).
        self.statements = Statements(
            engine,
            self.dialect.transaction,
            autocommits=autocommits,
            require_tables=self._require_tables,
            ready=create_tables,
        )
        self._build()
        #: The store's other operations, each over the tables it needs.
        self._listing = Listing(self.dialect, self.statements, self.tasks, self.counts)
        self._leases = LeaseRows(self.statements, self.tasks)
        self._push = PushConfigRows(self.statements, self.push_configs)
        self._owners = OwnerRows(self.statements, self.tasks, self.push_configs, self.counts)
        #: The terms of the run leases this process's running tasks are created with; None
        #: (the default): they are created with none (``exchange/run_leases.py`` sets them).
        self.lease_terms: LeaseTerms | None = None
        self._missing_logged = False
        if create_tables:
            self._open()

    @property
    def mysql(self) -> bool:
        """MySQL or MariaDB (dialect ``mysql`` or ``mariadb``): ``sql_mysql``."""
        return isinstance(self.dialect, sql_mysql.MySQLDialect)

    @classmethod
    def from_url(cls, url: str, table_prefix: str = "a2a_", **options: t.Any) -> SQLStore:
        """A store on its own engine, whose connections carry the statement timeout."""
        settings = {
            "statement_timeout": options.get("statement_timeout", 5.0),
            "asynchronous_commit": options.get("asynchronous_commit", True),
        }
        return cls(engine_from_url(url, **settings), table_prefix, **options)

    def _open(self) -> None:
        """Create what is missing, in one bounded transaction."""
        with self.statements.tx() as conn:
            self.create_tables(conn)

    def _require_tables(self) -> None:
        """``A2A_CREATE_TABLES`` is off: the first call checks the migrations made the tables."""
        with self.engine.connect() as conn:
            missing = self.schema.missing(conn)
        if missing:
            error = MissingTablesError.naming(missing, self.table_prefix)
            if not self._missing_logged:  # once: every call until then is refused the same
                self._missing_logged = True
                log.error("%s", error)
            raise error

    def create_tables(self, conn: Connection) -> None:
        """Create what is missing on ``conn`` (in its transaction); add the newer columns to an
        older task table. Idempotent: a migration may run it over tables the store made."""
        self.schema.create(conn, self.statement_timeout)

    def drop(self) -> None:
        """Drop the tables (tests, and hosts that remove the exchange)."""
        with self.engine.begin() as conn:
            self.drop_tables(conn)

    def drop_tables(self, conn: Connection) -> None:
        """Drop what :meth:`create_tables` makes, on ``conn`` (a migration's downgrade)."""
        self.schema.drop(conn)

    # -- rows

    def _record_of(self, values: tuple[t.Any, ...]) -> TaskRecord:
        """A task row read on the DBAPI cursor (the table's columns, in order)."""
        return read_record(Columns(self._column_at, values))

    def _tier_params(self, tier: Tier) -> dict[str, t.Any]:
        return {"owner": tier.owner, "tenant": tier.tenant or "",
                **self.dialect.scope_params(scope_text(tier.scopes))}  # fmt: skip

    def tier_where(self, tenant_null: bool, scopes_null: bool) -> list[t.Any]:
        """One tier (owner, tenant, scope set), bound as ``:owner``, ``:tenant``, ``:scopes``."""
        c = self.tasks.c
        return [
            c.owner == sa.bindparam("owner"),
            *exact(c.tenant, "tenant", tenant_null),
            *self.dialect.scopes_is(self.tasks, scopes_null),
        ]

    def _build(self) -> None:
        """The hot statements, built once: SQLAlchemy then caches their compiled form."""
        c = self.tasks.c
        self._column_at = {column.name: i for i, column in enumerate(self.tasks.columns)}
        self._insert = self.tasks.insert()
        self._get = sa.select(self.tasks).where(c.id == sa.bindparam("task_id"))
        self._get_owned = self._get.where(c.owner == sa.bindparam("owner"))
        #: What an update writes (the rest of the row is the task's creation-time fields).
        changes: dict[str, t.Any] = {
            name: sa.bindparam(f"new_{name}")
            for name in ("body", "version", "state", "status_ts", "skill")
        }
        for name in ("lease_until", "run_deadline"):  # kept while running, else NULL
            changes[name] = sa.case((sa.bindparam("new_leased") == 1, c[name]))
        self._update = self.dialect.update_statement(self.tasks, changes)

    # -- tasks

    def create_task(self, record: TaskRecord) -> TaskRecord:
        body = encode_task(record.task)
        record = dataclasses.replace(record, version=1)
        task = record.task
        row = {
            "id": task.id,
            "owner": record.owner,
            "tenant": record.tenant,
            "scopes": scope_text(record.scopes),
            "skill": record.skill,
            "version": 1,
            "state": task.status.state.value,
            "status_ts": micros(task.status.timestamp),
            "context_id": task.context_id,
            "created_at": micros(record.created_at),
            "body": body,
            **new_lease(self.lease_terms, record),
        }
        self.dialect.check_row(row)
        with self.statements.bounded():  # the shared INSERT and the row alone: one bound
            try:
                try:  # concurrent creates share one INSERT (group commit)
                    self._creates.run(None, row, self._insert_rows)
                except (RoundFailed, _RoundRefused):  # maybe another caller's row: ours alone
                    self._insert_rows([row])
            except sa.exc.IntegrityError:
                stored = self._stored(task.id)
                if stored is None or not _same_row(stored, row):
                    raise ValueError(f"task {task.id!r} exists") from None
                # Our own earlier INSERT, taken by the database though its answer was lost
                # (a retry after a timeout): the row is what this call stores.
                return record
            except sa.exc.DataError:
                unfit = _unstorable_field(row)
                if unfit is None:
                    raise
                raise refusal(*unfit) from None
        return record

    def _insert_rows(self, rows: list[dict[str, t.Any]]) -> None:
        """One INSERT for a round's rows: on the store's own engine one multi-row ``VALUES``
        statement (one autocommit round trip, atomic), else in one transaction (psycopg
        pipelines the rows, and on an autocommitting connection each would commit alone). Any
        failure of several rows is retried row by row, so one caller's bad row (or a dropped
        connection) fails only that caller."""
        if len(rows) == 1:
            self.statements.execute("insert", self._insert, rows[0], list(rows[0]))
            return
        rows = self.dialect.round_order(rows)
        try:
            if len(rows) <= MULTI_ROWS:
                keys = list(rows[0])
                params = {f"{key}_{i}": value for i, row in enumerate(rows)
                          for key, value in row.items()}  # fmt: skip
                statement = lambda: self.tasks.insert().values(  # noqa: E731
                    [{key: sa.bindparam(f"{key}_{i}") for key in keys} for i in range(len(rows))]
                )
                if self.statements.run(("insert", len(rows)), statement, params) is not None:
                    return
            with self.statements.tx() as conn:
                conn.execute(self._insert, rows)
        except sa.exc.SQLAlchemyError as exc:
            raise _RoundRefused() from exc

    def _stored(self, task_id: str) -> Columns | None:
        """The task's row as stored (its body as written), or None."""
        rows, _ = self.statements.execute("get", self._get, {"task_id": task_id})
        return Columns(self._column_at, tuple(rows[0])) if rows else None

    def get_task(self, task_id: str, owner: str | None = None) -> TaskRecord | None:
        if owner is None:
            rows, _ = self.statements.execute("get", self._get, {"task_id": task_id})
        else:
            rows, _ = self.statements.execute(
                "get_owned", self._get_owned, {"task_id": task_id, "owner": owner}
            )
        return self._record_of(tuple(rows[0])) if rows else None

    def update_task(self, record: TaskRecord, expected_version: int) -> TaskRecord:
        body = encode_task(record.task)
        task = record.task
        values = {
            "task_id": task.id,
            "expected": expected_version,
            "new_body": body,
            "new_version": expected_version + 1,
            "new_state": task.status.state.value,
            "new_status_ts": micros(task.status.timestamp),
            "new_skill": record.skill,
            # A write that settles or pauses the task ends its run's lease; others keep it.
            "new_leased": int(task.status.state in LEASED_STATES),
        }
        with self.statements.bounded():  # the UPDATE and the row read after it: one bound
            try:
                return self.dialect.update(self, self._update, record, expected_version, values)
            except StaleTaskError as exc:
                current = exc.current
                if current is None or current.version != expected_version + 1:
                    raise
                stored = self._stored(task.id)
                if stored is None or stored.version != current.version or stored.body != body:
                    raise
                # Our own earlier UPDATE, taken by the database though its answer was lost (a
                # retry after a timeout): the row holds exactly this write.
                return dataclasses.replace(current, task=task, skill=record.skill)

    def task_versions(self, task_ids: list[str]) -> dict[str, tuple[int, TaskState]]:
        """Version and state of each task still stored (one query for the replica poll)."""
        return self._listing.versions(task_ids)

    def list_tasks(self, query: ListQuery) -> TaskPage:
        """A page filtered in SQL, a keyset range on (status timestamp, id): ``sql_listing``."""
        return self._listing.page(query)

    def delete_tasks(self, task_ids: t.Iterable[str]) -> int:
        ids = list(dict.fromkeys(task_ids))
        deleted = 0
        with self.statements.tx() as conn:
            for chunk in chunks(ids):
                conn.execute(
                    self.push_configs.delete().where(self.push_configs.c.task_id.in_(chunk))
                )
                result = conn.execute(self.tasks.delete().where(self.tasks.c.id.in_(chunk)))
                deleted += result.rowcount
        return deleted

    def trim_terminal_tasks(self, tier: Tier, keep: int) -> list[str]:
        """Delete the tier's oldest terminal tasks past ``keep``, and the owner's orphan configs."""
        params = {**self._tier_params(tier), "keep": max(0, keep)}
        return self.dialect.trim(self, tier, params)

    # -- run leases (``store/leases.py``, ``exchange/run_leases.py``): ``sql_leases``

    def renew_runs(self, task_ids: list[str], until: int) -> None:
        """Push the leases of this process's running tasks to ``until`` (micros): one
        statement per 500 runs. A task settled or paused meanwhile takes none; one whose lease
        was never written (its first write failed) takes it now."""
        self._leases.renew(task_ids, until)

    def lease_run(self, task_id: str, until: int, deadline: int | None) -> None:
        """Take the lease of a run started over a stored task (a paused task resumed)."""
        self._leases.take(task_id, until, deadline)

    def release_runs(self, task_ids: list[str]) -> None:
        """End the leases of tasks that run on outside any run (handed off to a job)."""
        self._leases.release(task_ids)

    def lapsed_runs(self, now: int, limit: int) -> list[LapsedRun]:
        """Up to ``limit`` running tasks whose lease ended before ``now`` (micros), oldest
        lapse first: a range of the lease index, which holds a value for running tasks only."""
        return self._leases.lapsed(now, limit)

    # -- push configs: ``sql_push``

    def put_push_config(self, owner: str, config: PushConfig, keep: int) -> PushConfig:
        return self._push.put(owner, config, keep)

    def get_push_config(self, task_id: str, config_id: str) -> PushConfig | None:
        return self._push.get(task_id, config_id)

    def list_push_configs(self, task_id: str) -> list[PushConfig]:
        return self._push.of_task(task_id)

    def delete_push_config(self, task_id: str, config_id: str) -> bool:
        return self._push.delete(task_id, config_id)

    # -- data export and erasure: ``sql_owners``

    def owners(self) -> list[str]:
        """Every owner holding a task (``flask a2a trim`` walks them)."""
        return self._owners.owners()

    def export_owner(self, owner: str) -> dict[str, list[dict[str, t.Any]]]:
        return self._owners.export(owner)

    def erase_owner(self, owner: str) -> int:
        return self._owners.erase(owner)
