"""The SQL store: SQLAlchemy 2 Core on PostgreSQL, MySQL/MariaDB or SQLite, shared by every replica.

This module is the store's operations. Its tables and their DDL are ``sql_schema`` (created if
absent; with ``create_tables=False`` migrations make them: ``flask_a2a.store.migrations``); how
a statement reaches the database is ``sql_statements``; what a database does its own way is its
dialect's (``sql_dialect``: ``sql_postgres``, ``sql_mysql``, ``sql_sqlite``).

Writes are optimistic: ``UPDATE ... WHERE id = :id AND version = :expected``. ListTasks filters
owner, tenant and scope set in SQL and pages by keyset on (status timestamp, id);
``totalSize`` is the tiers' counts on PostgreSQL and MySQL (an indexed ``COUNT`` when the list
is filtered, and on SQLite), so a page costs O(page). Timestamps are integer microseconds since
the epoch: exact, and one order on every backend.

Every call runs with a statement timeout (PostgreSQL ``statement_timeout``, MariaDB
``max_statement_time`` / MySQL ``max_execution_time`` and the InnoDB lock wait, SQLite
``busy_timeout``), so a store call never hangs forever: carried by the connection on an engine
from :func:`engine_from_url` (a one-statement call is then one autocommit round trip), set
for the transaction only on the host's engine.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import typing as t

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..protocol.limits import refusal, unstorable
from ..protocol.model import PushConfig, TaskState, Tier
from ..protocol.wire import dump_stored_push_config, push_config_from_wire, task_from_wire
from . import leases, sql_counts, sql_mysql
from .base import ListQuery, StaleTaskError, TaskPage, TaskRecord, encode_task, record_json
from .leases import LEASED_STATES, LapsedRun, LeaseTerms
from .rounds import RoundFailed, Rounds
from .sql_dialect import (
    MULTI_ROWS,
    ROW_FIELDS,
    SQLDialect,
    chunks,
    exact,
    from_micros,
    micros,
    scope_key,
    scope_text,
)
from .sql_engine import engine_from_url as engine_from_url
from .sql_engine import session_settings, to_millis
from .sql_postgres import PostgresDialect
from .sql_schema import MissingTablesError as MissingTablesError
from .sql_schema import Schema
from .sql_sqlite import SQLiteDialect
from .sql_statements import Statements
from .sql_versions import require

log = logging.getLogger("flask_a2a")

_LEASED_STATES: t.Final = sorted(s.value for s in LEASED_STATES)
#: The dialects whose differences have a module of their own (any other: the standard).
_DIALECTS: t.Final[dict[str, type[SQLDialect]]] = {
    "postgresql": PostgresDialect,
    "sqlite": SQLiteDialect,
    **dict.fromkeys(sql_mysql.DIALECTS, sql_mysql.MySQLDialect),
}


class _Columns:
    """A DBAPI row's columns by name (the table's column positions)."""

    __slots__ = ("_at", "_values")

    def __init__(self, at: dict[str, int], values: tuple[t.Any, ...]) -> None:
        self._at = at
        self._values = values

    def __getattr__(self, name: str) -> t.Any:
        return self._values[self._at[name]]


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


def _same_row(stored: _Columns, row: dict[str, t.Any]) -> bool:
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
        return self._record(_Columns(self._column_at, values))

    def _record(self, row: t.Any) -> TaskRecord:
        return TaskRecord(
            task=task_from_wire(json.loads(row.body)),
            owner=row.owner,
            tenant=row.tenant,
            scopes=scope_key(row.scopes),
            created_at=from_micros(row.created_at),
            version=row.version,
            skill=row.skill,
        )

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
            **self._lease_of(record),
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

    def _lease_of(self, record: TaskRecord) -> dict[str, t.Any]:
        """A new row's lease: a running task's creation is its run's start."""
        terms = self.lease_terms
        if terms is None or record.state not in LEASED_STATES:
            return {"run_by": None, "lease_until": None, "run_deadline": None}
        deadline = None
        if terms.timeout > 0:
            deadline = micros(record.created_at) + int(terms.timeout * 1e6)
        until = time.time_ns() // 1000 + int(terms.ttl * 1e6)
        return {"run_by": leases.holder(), "lease_until": until, "run_deadline": deadline}

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

    def _stored(self, task_id: str) -> _Columns | None:
        """The task's row as stored (its body as written), or None."""
        rows, _ = self.statements.execute("get", self._get, {"task_id": task_id})
        return _Columns(self._column_at, tuple(rows[0])) if rows else None

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
        c = self.tasks.c
        out: dict[str, tuple[int, TaskState]] = {}
        with self.statements.one() as conn:
            for chunk in chunks(task_ids):
                query = sa.select(c.id, c.version, c.state).where(c.id.in_(chunk))
                for row in conn.execute(query):
                    out[row.id] = (row.version, TaskState(row.state))
        return out

    # -- run leases (``store/leases.py``, ``exchange/run_leases.py``)

    def renew_runs(self, task_ids: list[str], until: int) -> None:
        """Push the leases of this process's running tasks to ``until`` (micros): one
        statement per 500 runs. A task settled or paused meanwhile takes none; one whose lease
        was never written (its first write failed) takes it now."""
        c = self.tasks.c
        with self.statements.one() as conn:
            for chunk in chunks(task_ids):
                conn.execute(
                    self.tasks.update()
                    .where(c.id.in_(chunk), c.state.in_(_LEASED_STATES))
                    .values(lease_until=until, run_by=leases.holder())
                )

    def lease_run(self, task_id: str, until: int, deadline: int | None) -> None:
        """Take the lease of a run started over a stored task (a paused task resumed)."""
        c = self.tasks.c
        with self.statements.one() as conn:
            conn.execute(
                self.tasks.update()
                .where(c.id == task_id, c.state.in_(_LEASED_STATES))
                .values(lease_until=until, run_deadline=deadline, run_by=leases.holder())
            )

    def release_runs(self, task_ids: list[str]) -> None:
        """End the leases of tasks that run on outside any run (handed off to a job)."""
        c = self.tasks.c
        with self.statements.one() as conn:
            for chunk in chunks(task_ids):
                conn.execute(
                    self.tasks.update()
                    .where(c.id.in_(chunk))
                    .values(lease_until=None, run_deadline=None)
                )

    def lapsed_runs(self, now: int, limit: int) -> list[LapsedRun]:
        """Up to ``limit`` running tasks whose lease ended before ``now`` (micros), oldest
        lapse first: a range of the lease index, which holds a value for running tasks only."""
        c = self.tasks.c
        query = (
            sa.select(c.id, c.run_by, c.run_deadline)
            .where(c.lease_until < now)
            .order_by(c.lease_until)
            .limit(limit)
        )
        with self.statements.one() as conn:
            return [LapsedRun(row[0], row[1], row[2]) for row in conn.execute(query)]

    def list_tasks(self, query: ListQuery) -> TaskPage:
        c = self.tasks.c
        where: list[t.Any] = [c.owner == query.owner]
        params: dict[str, t.Any] = {}
        if query.tenanted:
            where.extend(exact(c.tenant, "tenant", query.tenant is None))
            params["tenant"] = query.tenant or ""
        if query.scoped:
            scopes = scope_text(query.scopes)
            where.extend(self.dialect.scopes_is(self.tasks, scopes is None))
            params.update(self.dialect.scope_params(scopes))
        if query.context_id:
            where.append(c.context_id == query.context_id)
        if query.states is not None:
            where.append(c.state.in_(sorted(s.value for s in query.states)))
        if query.status_after is not None:
            where.append(c.status_ts >= micros(query.status_after))
        page_where = list(where)
        if query.cursor is not None:
            stamp, last_id = query.cursor
            page_where.extend(self.dialect.page_after(self.tasks, micros(stamp), last_id))
        filtered = query.context_id or query.states is not None or query.status_after is not None
        if self.counts is not None and not filtered:  # the tiers' trigger-kept counts
            counted = sql_counts.total(
                self.counts,
                query.owner,
                query.tenant if query.tenanted else sql_counts.ANY,
                self.dialect.counted_scopes(scope_text(query.scopes))
                if query.scoped
                else sql_counts.ANY,
            )
        else:
            counted = sa.select(sa.func.count()).select_from(self.tasks).where(*where)
        with self.statements.one() as conn:  # the count and the page: two reads, no transaction
            count = int(conn.execute(counted, params).scalar_one())
            rows = []
            if query.limit > 0:
                rows = list(
                    conn.execute(
                        sa.select(self.tasks)
                        .where(*page_where)
                        .order_by(c.status_ts.desc(), c.id.desc())
                        .limit(query.limit + 1),
                        params,
                    )
                )
        records = [self._record(row) for row in rows[: query.limit]]
        more = len(rows) > query.limit
        last = records[-1].task if records else None
        next_cursor = (last.status.timestamp, last.id) if more and last is not None else None
        return TaskPage(records, count, next_cursor)

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

    # -- push configs

    def put_push_config(self, owner: str, config: PushConfig, keep: int) -> PushConfig:
        pc = self.push_configs.c
        body = json.dumps(dump_stored_push_config(config), separators=(",", ":"))
        with self.statements.tx() as conn:
            conn.execute(
                self.push_configs.delete().where(pc.task_id == config.task_id, pc.id == config.id)
            )
            last = conn.execute(
                sa.select(sa.func.max(pc.seq)).where(pc.task_id == config.task_id)
            ).scalar()
            seq = max(time.time_ns() // 1000, (last or 0) + 1)
            conn.execute(
                self.push_configs.insert().values(
                    task_id=config.task_id, id=config.id, owner=owner, seq=seq, body=body
                )
            )
            if keep > 0:
                old = (
                    sa.select(pc.id)
                    .where(pc.task_id == config.task_id)
                    .order_by(pc.seq.desc())
                    .offset(keep)
                )
                stale = [row.id for row in conn.execute(old)]
                if stale:
                    conn.execute(
                        self.push_configs.delete().where(
                            pc.task_id == config.task_id, pc.id.in_(stale)
                        )
                    )
        return config

    def get_push_config(self, task_id: str, config_id: str) -> PushConfig | None:
        pc = self.push_configs.c
        with self.statements.one() as conn:
            body = conn.execute(
                sa.select(pc.body).where(pc.task_id == task_id, pc.id == config_id)
            ).scalar()
        return None if body is None else push_config_from_wire(json.loads(body))

    def list_push_configs(self, task_id: str) -> list[PushConfig]:
        pc = self.push_configs.c
        with self.statements.one() as conn:
            bodies = conn.execute(
                sa.select(pc.body).where(pc.task_id == task_id).order_by(pc.seq)
            ).scalars()
            return [push_config_from_wire(json.loads(body)) for body in bodies]

    def delete_push_config(self, task_id: str, config_id: str) -> bool:
        pc = self.push_configs.c
        with self.statements.one() as conn:
            result = conn.execute(
                self.push_configs.delete().where(pc.task_id == task_id, pc.id == config_id)
            )
        return bool(result.rowcount)

    # -- data export and erasure

    def owners(self) -> list[str]:
        """Every owner holding a task (``flask a2a trim`` walks them)."""
        with self.statements.one() as conn:
            query = sa.select(self.tasks.c.owner).distinct().order_by(self.tasks.c.owner)
            return list(conn.execute(query).scalars())

    def export_owner(self, owner: str) -> dict[str, list[dict[str, t.Any]]]:
        c, pc = self.tasks.c, self.push_configs.c
        with self.statements.tx() as conn:
            rows = list(
                conn.execute(
                    sa.select(self.tasks).where(c.owner == owner).order_by(c.status_ts, c.id)
                )
            )
            bodies = list(
                conn.execute(
                    sa.select(pc.body).where(pc.owner == owner).order_by(pc.task_id, pc.seq)
                ).scalars()
            )
        return {
            "tasks": [record_json(self._record(row)) for row in rows],
            "pushConfigs": [json.loads(body) for body in bodies],
        }

    def erase_owner(self, owner: str) -> int:
        with self.statements.tx() as conn:
            configs = conn.execute(
                self.push_configs.delete().where(self.push_configs.c.owner == owner)
            ).rowcount
            tasks = conn.execute(self.tasks.delete().where(self.tasks.c.owner == owner)).rowcount
            if self.counts is not None:  # the owner's (now zero) counts go too
                conn.execute(self.counts.delete().where(self.counts.c.owner == owner))
        return int(configs) + int(tasks)
