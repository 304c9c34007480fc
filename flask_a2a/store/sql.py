"""The SQL store: SQLAlchemy 2 Core on PostgreSQL, MySQL/MariaDB or SQLite, shared by every replica.

Two tables (``<prefix>tasks``, ``<prefix>push_configs``) are created if absent (on PostgreSQL
and MySQL also ``<prefix>task_counts``, kept by triggers: ``sql_counts``; what differs on
MySQL: ``sql_mysql``), and an older task table without
the ``tenant`` or ``scopes`` column gets it on open (its rows then read as a session's, made in
no tenant). With ``create_tables=False`` migrations make them instead
(``flask_a2a.store.migrations``).
Writes are optimistic: ``UPDATE ... WHERE id = :id AND version = :expected``.
ListTasks filters owner, tenant and scope set in SQL and pages by keyset on (status timestamp,
id); ``totalSize`` is the tiers' counts on PostgreSQL and MySQL (an indexed ``COUNT`` when the
list is filtered, and on SQLite), so a page costs O(page).
Timestamps are integer microseconds since the epoch: exact, and one order on every backend.

Every call runs with a statement timeout (PostgreSQL ``statement_timeout``, MariaDB
``max_statement_time`` / MySQL ``max_execution_time`` and the InnoDB lock wait, SQLite
``busy_timeout``), so a store call never hangs forever: carried by the connection on an engine
from :func:`engine_from_url` (a one-statement call is then one autocommit round trip), set
``LOCAL`` in a short transaction on the host's engine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
import typing as t
import zlib
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..protocol.errors import InternalError
from ..protocol.limits import MAX_KEY, MAX_TASK_ID, refusal, unstorable
from ..protocol.model import TERMINAL_STATES, PushConfig, TaskState, Tier
from ..protocol.wire import dump_stored_push_config, push_config_from_wire, task_from_wire
from . import leases, sql_counts, sql_driver, sql_mysql
from .base import ListQuery, StaleTaskError, TaskPage, TaskRecord, encode_task, record_json
from .leases import LEASED_STATES, LapsedRun, LeaseTerms
from .rounds import RoundFailed, Rounds
from .sql_engine import engine_from_url as engine_from_url
from .sql_engine import session_settings, to_millis

log = logging.getLogger("flask_a2a")

_EPOCH: t.Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO: t.Final = timedelta(microseconds=1)
#: Ids are compared byte-wise in SQL, as Python compares them (keyset paging needs one order).
_ID = sql_mysql.Exact(MAX_TASK_ID).with_variant(sa.String(MAX_TASK_ID, collation="C"), "postgresql")
#: A caller's key (owner, tenant, ids), matched exactly (MySQL: binary NO PAD collation).
_KEY = sql_mysql.Exact(MAX_KEY)
_CHUNK: t.Final = 500
#: Columns added after the first release: an older table gets them on open (or by migration).
_ADDED_COLUMNS: t.Final = ("tenant", "scopes", "run_by", "lease_until", "run_deadline")
_LEASED_STATES: t.Final = sorted(s.value for s in LEASED_STATES)
#: Rounds of up to this many creates are one multi-row INSERT statement (one text per size).
_MULTI_ROWS: t.Final = 64
_TERMINAL_STATES: t.Final = sorted(s.value for s in TERMINAL_STATES)
#: The same as plain bound values (not an expanding IN): the trim's text is fixed.
_TERMINAL_LITERALS: t.Final = [sa.literal(state) for state in _TERMINAL_STATES]


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


def _micros(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // _MICRO


def _datetime(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=int(micros))


def _blank(column: t.Any) -> t.Any:
    """``COALESCE(column, '')``, spelled the same in the indexes and the queries."""
    return sa.func.coalesce(column, sa.literal_column("''"))


def _is(column: t.Any, name: str, null: bool) -> list[t.Any]:
    """Exact match on a nullable key, through the COALESCE the indexes hold.

    The bound value of ``name`` is the key or ``''``; ``null`` picks ``IS NULL`` for the exact
    half, so one prepared statement serves each shape.
    """
    exact = column.is_(None) if null else column == sa.bindparam(name)
    return [_blank(column) == sa.bindparam(name), exact]


def _scope_text(scopes: tuple[str, ...] | None) -> str | None:
    """The canonical stored scope set: a sorted JSON list, NULL for a session."""
    return None if scopes is None else json.dumps(sorted(scopes), separators=(",", ":"))


def _scope_key(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(json.loads(text))


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


#: Task columns holding a caller's string, the field that names it, and its length.
_ROW_FIELDS: t.Final = (
    ("id", "id", MAX_TASK_ID),
    ("context_id", "contextId", MAX_KEY),
    ("owner", "owner", MAX_KEY),
    ("tenant", "tenant", MAX_KEY),
    ("skill", "skill", MAX_KEY),
)


def _nul_field(row: dict[str, t.Any]) -> str | None:
    """The field of a row holding a NUL (MySQL stores one; every other store refuses it)."""
    for column, field, _ in _ROW_FIELDS:
        value = row.get(column)
        if value is not None and "\x00" in value:
            return field
    return None


def _unstorable_field(row: dict[str, t.Any]) -> tuple[str, str] | None:
    """The field (and why) of a row PostgreSQL refused, when the row says which."""
    for column, field, limit in _ROW_FIELDS:
        value = row.get(column)
        reason = None if value is None else unstorable(value, limit)
        if reason is not None:
            return field, reason
    return None


def _chunks(ids: list[str]) -> t.Iterator[list[str]]:
    """``ids`` in slices of :data:`_CHUNK` (one statement each: bound parameters are limited)."""
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


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
        self.engine = engine
        #: PostgreSQL: commit without waiting for the WAL flush (``synchronous_commit = off``).
        self.asynchronous_commit = asynchronous_commit
        self.table_prefix = table_prefix
        self.statement_timeout = statement_timeout
        self.dialect = engine.dialect.name
        #: MySQL or MariaDB (dialect ``mysql`` or ``mariadb``): ``sql_mysql``.
        self.mysql = self.dialect in sql_mysql.DIALECTS
        self._millis = to_millis(statement_timeout)
        carried = session_settings(engine)
        #: The engine's connections already carry this timeout and commit mode.
        self._session_settings = carried is not None and carried[:2] == (
            self._millis,
            asynchronous_commit,
        )
        #: ... and autocommit: a one-statement call is one round trip.
        self._autocommits = self._session_settings and bool(carried and carried[2])
        if shared is None:
            in_memory = engine.url.database in (None, "", ":memory:")
            shared = not (self.dialect == "sqlite" and in_memory)
        #: Other processes write these tables: the exchange polls them for foreign changes.
        self.shared = shared
        #: A trim is a round trip (PostgreSQL, MySQL): retention runs it just after a settle's
        #: answer, shared by the tier's settles meanwhile (``exchange/retention.py``).
        self.deferred_trims = self.dialect != "sqlite"
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
            *self._mysql_columns(),
            **sql_mysql.TABLE_OPTIONS,
        )
        c = self.tasks.c
        #: The lapsed-lease sweep reads a range of it: only running tasks have a value.
        self.lease_index = sa.Index(f"ix_{table_prefix}tasks_lease", c.lease_until)
        # NULL is no equality for the planner, so the keys are COALESCEd: then the index gives
        # the page order, and the raw columns at the end let counts stay index-only.
        self.indexes = (
            self._mysql_indexes()
            if self.mysql
            else (
                sa.Index(
                    f"ix_{table_prefix}tasks_tier",
                    c.owner,
                    _blank(c.tenant),
                    _blank(c.scopes),
                    c.status_ts.desc(),
                    c.id.desc(),
                    c.tenant,
                    c.scopes,
                ),
                sa.Index(
                    f"ix_{table_prefix}tasks_owner",
                    c.owner,
                    _blank(c.tenant),
                    c.status_ts.desc(),
                    c.id.desc(),
                    c.tenant,
                ),
                self.lease_index,
            )
        )
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
            sql_counts.counts_table(self.metadata, table_prefix)
            if self.dialect == "postgresql" or self.mysql
            else None
        )
        #: Creates arriving while one INSERT runs are stored together by the next.
        self._creates: Rounds[None, dict[str, t.Any]] = Rounds()
        #: The hot statements' compiled text, run on the DBAPI cursor (``sql_driver``) when the
        #: engine is the store's own (its connections carry the timeout and autocommit).
        self._driver = sql_driver.Driver(engine) if self._autocommits else None
        self._plain: dict[t.Hashable, sql_driver.Plain | None] = {}
        self._statements()
        #: The terms of the run leases this process's running tasks are created with; None
        #: (the default): they are created with none (``exchange/run_leases.py`` sets them).
        self.lease_terms: LeaseTerms | None = None
        #: The tables are known to be there (made here, or checked once when migrations own them).
        self._ready = create_tables
        self._missing_logged = False
        if create_tables:
            self._open()

    @classmethod
    def from_url(cls, url: str, table_prefix: str = "a2a_", **options: t.Any) -> SQLStore:
        """A store on its own engine, whose connections carry the statement timeout."""
        settings = {
            "statement_timeout": options.get("statement_timeout", 5.0),
            "asynchronous_commit": options.get("asynchronous_commit", True),
        }
        return cls(engine_from_url(url, **settings), table_prefix, **options)

    def _mysql_columns(self) -> list[sa.Column[t.Any]]:
        """MySQL: the scope set's digest, a virtual column the tier index can hold."""
        if not self.mysql:
            return []
        computed = sa.Computed(sa.text(sql_mysql.SCOPES_KEY_SQL), persisted=False)
        return [sa.Column("scopes_key", sql_mysql.DIGEST, computed)]

    def _mysql_indexes(self) -> tuple[sa.Index, ...]:
        """MySQL/MariaDB: plain columns (MariaDB has no expression indexes). InnoDB appends the
        primary key (id) to each, so they give the (status_ts, id) page order; both fit the
        3072-byte key limit (255 utf8mb4 characters are 1020 bytes)."""
        c, prefix = self.tasks.c, self.table_prefix
        return (
            sa.Index(f"ix_{prefix}tasks_tier", c.owner, c.tenant, c.scopes_key, c.status_ts),
            sa.Index(f"ix_{prefix}tasks_owner", c.owner, c.tenant, c.status_ts),
            self.lease_index,
        )

    # -- connections

    def _bound(self, conn: Connection) -> None:
        """The statement timeout (and commit mode) for this transaction only."""
        if self.dialect == "postgresql":
            # LOCAL: only this transaction, never the host app's own on a shared engine.
            # Task rows are not jobs (docs/storage-and-scaling.md), so by default a commit
            # does not wait for the WAL flush; a crash may lose the last few updates.
            sync = "; SET LOCAL synchronous_commit = off" if self.asynchronous_commit else ""
            conn.exec_driver_sql(f"SET LOCAL statement_timeout = {self._millis}{sync}")
        elif self.dialect == "sqlite":
            conn.exec_driver_sql(f"PRAGMA busy_timeout = {self._millis}")

    @contextlib.contextmanager
    def _tx(self) -> t.Iterator[Connection]:
        """One short transaction, bounded by the statement timeout."""
        if not self._ready:
            self._require_tables()
        if self._autocommits and self.mysql:  # the session is READ COMMITTED already
            with self.engine.connect() as conn, sql_mysql.explicit_transaction(conn):
                yield conn
            return
        if self._autocommits:
            with self.engine.connect() as conn:
                conn = conn.execution_options(isolation_level="READ COMMITTED")
                with conn.begin():
                    yield conn
            return
        if self.mysql:  # the host's engine: its settings come back after the transaction
            with self.engine.connect() as conn:
                conn = conn.execution_options(isolation_level="READ COMMITTED")
                try:
                    with conn.begin():
                        sql_mysql.bound_session(conn, self._millis)
                        yield conn
                finally:
                    sql_mysql.restore_session(conn, self._millis)
            return
        with self.engine.begin() as conn:
            if not self._session_settings:
                self._bound(conn)
            yield conn

    @contextlib.contextmanager
    def _one(self) -> t.Iterator[Connection]:
        """A call that is one statement: one autocommit round trip on an engine from
        :func:`engine_from_url`; else a bounded transaction."""
        if not self._ready:
            self._require_tables()
        if not self._autocommits:
            with self._tx() as conn:
                yield conn
            return
        with self.engine.connect() as conn:
            yield conn

    def _plain_of(
        self, key: t.Hashable, statement: t.Any, columns: list[str] | None = None
    ) -> sql_driver.Plain | None:
        """``statement`` compiled for the DBAPI cursor (once per ``key``); None: through
        SQLAlchemy (not the store's own engine, or the statement needs SQLAlchemy's binding)."""
        try:
            return self._plain[key]
        except KeyError:
            pass
        plain = None
        if self._driver is not None:
            if callable(statement):  # built only when first needed
                statement = statement()
            plain = sql_driver.compile_plain(self.engine, statement, columns)
        self._plain[key] = plain
        return plain

    def _run(
        self,
        key: t.Hashable,
        statement: t.Any,
        params: dict[str, t.Any],
        columns: list[str] | None = None,
    ) -> tuple[list[tuple[t.Any, ...]], int] | None:
        """One autocommit statement on the DBAPI cursor: its rows and row count; None when it
        must go through SQLAlchemy (see :meth:`_plain_of`)."""
        plain = self._plain_of(key, statement, columns)
        if plain is None:
            return None
        if not self._ready:
            self._require_tables()
        assert self._driver is not None
        return self._driver.run(plain, params)

    def _execute(
        self,
        key: t.Hashable,
        statement: t.Any,
        params: dict[str, t.Any],
        columns: list[str] | None = None,
    ) -> tuple[t.Sequence[t.Sequence[t.Any]], int]:
        """One autocommit statement: its rows (each in the statement's column order) and row
        count, on the DBAPI cursor when it can (:meth:`_run`), else through SQLAlchemy."""
        ran = self._run(key, statement, params, columns)
        if ran is not None:
            return ran
        with self._one() as conn:
            result = conn.execute(statement, params)
            return (result.all() if result.returns_rows else []), result.rowcount

    def _open(self) -> None:
        """Create what is missing, in one bounded transaction."""
        with self._tx() as conn:
            self.create_tables(conn)

    def _require_tables(self) -> None:
        """``A2A_CREATE_TABLES`` is off: the first call checks the migrations made the tables."""
        with self.engine.connect() as conn:
            inspector = sa.inspect(conn)
            missing = [table.name for table in self.metadata.sorted_tables
                       if not inspector.has_table(table.name)]  # fmt: skip
            if not missing:
                present = {col["name"] for col in inspector.get_columns(self.tasks.name)}
                missing = [f"{self.tasks.name}.{col.name}" for col in self.tasks.columns
                           if col.name not in present]  # fmt: skip
        if missing:
            prefix = "" if self.table_prefix == "a2a_" else f", {self.table_prefix!r}"
            error = MissingTablesError(
                f"flask_a2a: {'table' if len(missing) == 1 else 'tables'} "
                f"{', '.join(missing)} missing and table creation is off (A2A_CREATE_TABLES = "
                "False): run `flask db upgrade` (the revision that calls "
                "flask_a2a.store.migrations.create_tables), or in a test fixture call "
                f"flask_a2a.store.migrations.create_tables(db.engine{prefix}) after "
                "db.create_all() (docs/existing-app.md, Tests)"
            )
            if not self._missing_logged:  # once: every call until then is refused the same
                self._missing_logged = True
                log.error("%s", error)
            raise error
        self._ready = True

    def create_tables(self, conn: Connection) -> None:
        """Create what is missing on ``conn`` (in its transaction); add ``tenant`` / ``scopes``
        to an older task table. Idempotent: a migration may run it over tables the store made."""
        if self.mysql:  # DDL is not transactional on MySQL: each statement commits alone
            with sql_mysql.ddl_lock(conn, self.tasks.name, self.statement_timeout):
                self._create_tables(conn)
            return
        if self.dialect == "postgresql":
            # Replicas starting together must not race on DDL (DDL is transactional here).
            key = zlib.crc32(self.tasks.name.encode()) & 0x7FFFFFFF
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
        self._create_tables(conn)

    def _create_tables(self, conn: Connection) -> None:
        inspector = sa.inspect(conn)
        if inspector.has_table(self.tasks.name):
            present = {col["name"] for col in inspector.get_columns(self.tasks.name)}
            if self.mysql:  # types and collations first: the new columns come out right
                sql_mysql.upgrade(conn, self.tasks)
            for name in _ADDED_COLUMNS:
                if name not in present:
                    column = self.tasks.c[name]
                    kind = column.type.compile(dialect=conn.dialect)
                    conn.exec_driver_sql(
                        f"ALTER TABLE {conn.dialect.identifier_preparer.quote(self.tasks.name)}"
                        f" ADD COLUMN {name} {kind}"
                    )
            if self.mysql:
                if "scopes_key" not in present:
                    sql_mysql.add_scopes_key(conn, self.tasks)
                for index in sql_mysql.missing_indexes(conn, self.indexes):
                    conn.execute(sa.schema.CreateIndex(index))
            else:
                for index in self.indexes:  # an older table may lack them
                    conn.execute(sa.schema.CreateIndex(index, if_not_exists=True))
        else:
            self.metadata.create_all(conn, tables=[self.tasks], checkfirst=False)
        if not inspector.has_table(self.push_configs.name):
            self.metadata.create_all(conn, tables=[self.push_configs], checkfirst=False)
        elif self.mysql:
            sql_mysql.upgrade(conn, self.push_configs)
        if self.counts is not None and not inspector.has_table(self.counts.name):
            self.metadata.create_all(conn, tables=[self.counts], checkfirst=False)
            if self.mysql:
                sql_mysql.install_counts(conn, self.tasks, self.counts)
            else:
                sql_counts.install(conn, self.tasks, self.counts, self.table_prefix)

    def drop(self) -> None:
        """Drop the tables (tests, and hosts that remove the exchange)."""
        with self.engine.begin() as conn:
            self.drop_tables(conn)

    def drop_tables(self, conn: Connection) -> None:
        """Drop what :meth:`create_tables` makes, on ``conn`` (a migration's downgrade)."""
        self.metadata.drop_all(conn, checkfirst=True)
        if self.counts is not None and not self.mysql:  # MySQL: the triggers went with the table
            sql_counts.uninstall(conn, self.table_prefix)

    # -- rows

    def _record_of(self, values: tuple[t.Any, ...]) -> TaskRecord:
        """A task row read on the DBAPI cursor (the table's columns, in order)."""
        return self._record(_Columns(self._column_at, values))

    def _record(self, row: t.Any) -> TaskRecord:
        return TaskRecord(
            task=task_from_wire(json.loads(row.body)),
            owner=row.owner,
            tenant=row.tenant,
            scopes=_scope_key(row.scopes),
            created_at=_datetime(row.created_at),
            version=row.version,
            skill=row.skill,
        )

    def _tier_params(self, tier: Tier) -> dict[str, t.Any]:
        return {"owner": tier.owner, "tenant": tier.tenant or "",
                **self._scope_params(_scope_text(tier.scopes))}  # fmt: skip

    def _scope_params(self, text: str | None) -> dict[str, str]:
        """The bound values of :meth:`_scopes_is` for a stored scope text."""
        params = {"scopes": text or ""}
        if self.mysql:
            params["scopes_key"] = sql_mysql.scopes_key(text)
        return params

    def _scopes_is(self, null: bool) -> list[t.Any]:
        """Exact match on the scope set; on MySQL through its indexed digest."""
        c = self.tasks.c
        if not self.mysql:
            return _is(c.scopes, "scopes", null)
        exact = c.scopes.is_(None) if null else c.scopes == sa.bindparam("scopes")
        return [c.scopes_key == sa.bindparam("scopes_key"), exact]

    def _tier_where(self, tenant_null: bool, scopes_null: bool) -> list[t.Any]:
        """One tier (owner, tenant, scope set), bound as ``:owner``, ``:tenant``, ``:scopes``."""
        c = self.tasks.c
        return [
            c.owner == sa.bindparam("owner"),
            *_is(c.tenant, "tenant", tenant_null),
            *self._scopes_is(scopes_null),
        ]

    def _statements(self) -> None:
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
        self._update = (
            self.tasks.update()
            .where(c.id == sa.bindparam("task_id"), c.version == sa.bindparam("expected"))
            .values(**changes)
            .returning(c.owner, c.tenant, c.scopes, c.created_at)
        )
        #: MySQL has no UPDATE ... RETURNING: the caller's creation-time fields are checked in
        #: the WHERE instead (they never change), so a matched row has exactly those.
        self._update_owned = (
            self.tasks.update()
            .where(
                c.id == sa.bindparam("task_id"), c.version == sa.bindparam("expected"),
                c.owner == sa.bindparam("was_owner"),
                c.tenant.is_not_distinct_from(sa.bindparam("was_tenant")),
                c.scopes.is_not_distinct_from(sa.bindparam("was_scopes")),
                c.created_at == sa.bindparam("was_created_at"),
            )
            .values(**changes)
        )  # fmt: skip
        self._delete_one = self.tasks.delete().where(c.id == sa.bindparam("doomed"))
        self._trims: dict[tuple[bool, bool], t.Any] = {}

    @staticmethod
    def _shape(tier: Tier) -> tuple[bool, bool]:
        """Which of the tier's keys are NULL: one prepared statement per shape."""
        return (tier.tenant is None, tier.scopes is None)

    def _trim_statement(self, tier: Tier) -> t.Any:
        """Delete the tier's terminal rows past ``:keep`` and the owner's orphan configs.

        On PostgreSQL it is one statement: the doomed rows are locked ``SKIP LOCKED``, so
        concurrent trims of one tier never wait on (or deadlock over) the same oldest rows;
        a row another trim holds is that trim's to delete.
        """
        shape = self._shape(tier)
        statement = self._trims.get(shape)
        if statement is not None:
            return statement
        c, pc = self.tasks.c, self.push_configs.c
        oldest = (
            sa.select(c.id)
            .where(*self._tier_where(*shape), c.state.in_(_TERMINAL_LITERALS))
            .order_by(c.status_ts.desc(), c.id.desc())
            .offset(sa.bindparam("keep"))
        )
        if self.mysql:  # MySQL: the candidates, read without locks (``_trim_mysql``)
            self._trims[shape] = oldest
            return oldest
        if self.dialect != "postgresql":
            statement = self.tasks.delete().where(c.id.in_(oldest.scalar_subquery()))
            self._trims[shape] = statement.returning(c.id)
            return self._trims[shape]
        locked = (
            sa.select(c.id)
            .where(c.id.in_(oldest.scalar_subquery()))
            .with_for_update(skip_locked=True)
        )
        doomed = (
            self.tasks.delete()
            .where(c.id.in_(locked.scalar_subquery()))
            .returning(c.id)
            .cte("doomed")
        )
        alive = sa.select(c.id).where(c.id == pc.task_id).exists()
        orphans = self.push_configs.delete().where(
            pc.owner == sa.bindparam("owner"),
            sa.select(doomed.c.id).exists(),
            sa.or_(pc.task_id.in_(sa.select(doomed.c.id)), ~alive),
        )
        self._trims[shape] = sa.select(doomed.c.id).add_cte(orphans.cte("orphans"))
        return self._trims[shape]

    # -- tasks

    def create_task(self, record: TaskRecord) -> TaskRecord:
        body = encode_task(record.task)
        record = dataclasses.replace(record, version=1)
        task = record.task
        row = {
            "id": task.id,
            "owner": record.owner,
            "tenant": record.tenant,
            "scopes": _scope_text(record.scopes),
            "skill": record.skill,
            "version": 1,
            "state": task.status.state.value,
            "status_ts": _micros(task.status.timestamp),
            "context_id": task.context_id,
            "created_at": _micros(record.created_at),
            "body": body,
            **self._lease_of(record),
        }
        if self.mysql and _nul_field(row) is not None:
            raise refusal(t.cast(str, _nul_field(row)), "must not contain NUL characters")
        try:
            try:  # concurrent creates share one INSERT (group commit)
                self._creates.run(None, row, self._insert_rows)
            except (RoundFailed, _RoundRefused):  # maybe another caller's row: ours alone
                self._insert_rows([row])
        except sa.exc.IntegrityError:
            raise ValueError(f"task {task.id!r} exists") from None
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
            deadline = _micros(record.created_at) + int(terms.timeout * 1e6)
        until = time.time_ns() // 1000 + int(terms.ttl * 1e6)
        return {"run_by": leases.holder(), "lease_until": until, "run_deadline": deadline}

    def _insert_rows(self, rows: list[dict[str, t.Any]]) -> None:
        """One INSERT for a round's rows: on the store's own engine one multi-row ``VALUES``
        statement (one autocommit round trip, atomic), else in one transaction (psycopg
        pipelines the rows, and on an autocommitting connection each would commit alone). Any
        failure of several rows is retried row by row, so one caller's bad row (or a dropped
        connection) fails only that caller."""
        if len(rows) == 1:
            self._execute("insert", self._insert, rows[0], list(rows[0]))
            return
        if self.mysql:  # tiers in one order: concurrent rounds take count rows in one order
            rows = sorted(rows, key=lambda row: (row["owner"], row["tenant"] or "",
                                                 row["scopes"] or ""))  # fmt: skip
        try:
            if len(rows) <= _MULTI_ROWS:
                keys = list(rows[0])
                params = {f"{key}_{i}": value for i, row in enumerate(rows)
                          for key, value in row.items()}  # fmt: skip
                statement = lambda: self.tasks.insert().values(  # noqa: E731
                    [{key: sa.bindparam(f"{key}_{i}") for key in keys} for i in range(len(rows))]
                )
                if self._run(("insert", len(rows)), statement, params) is not None:
                    return
            with self._tx() as conn:
                conn.execute(self._insert, rows)
        except sa.exc.SQLAlchemyError as exc:
            raise _RoundRefused() from exc

    def get_task(self, task_id: str, owner: str | None = None) -> TaskRecord | None:
        if owner is None:
            rows, _ = self._execute("get", self._get, {"task_id": task_id})
        else:
            rows, _ = self._execute(
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
            "new_status_ts": _micros(task.status.timestamp),
            "new_skill": record.skill,
            # A write that settles or pauses the task ends its run's lease; others keep it.
            "new_leased": int(task.status.state in LEASED_STATES),
        }
        if self.mysql:
            return self._update_mysql(record, expected_version, values)
        rows, _ = self._execute("update", self._update, values)
        if not rows:  # the row moved (or is gone): say what it holds now
            raise StaleTaskError(self.get_task(task.id))
        # Creation-time ownership comes from the row, whatever the caller's record says.
        owner, tenant, scopes, created_at = rows[0]
        return TaskRecord(
            task=task,
            owner=owner,
            tenant=tenant,
            scopes=_scope_key(scopes),
            created_at=_datetime(created_at),
            version=expected_version + 1,
            skill=record.skill,
        )

    def _update_mysql(
        self, record: TaskRecord, expected_version: int, values: dict[str, t.Any]
    ) -> TaskRecord:
        """One UPDATE whose WHERE holds the caller's creation-time fields; if they are not the
        row's, the row is read and the update made with the row's (ownership never moves)."""
        owned = {
            **values, "was_owner": record.owner, "was_tenant": record.tenant,
            "was_scopes": _scope_text(record.scopes),
            "was_created_at": _micros(record.created_at),
        }  # fmt: skip
        _, matched = self._execute("update_owned", self._update_owned, owned)
        if matched == 1:
            return dataclasses.replace(record, version=expected_version + 1)
        current = self.get_task(record.task.id)
        if current is None or current.version != expected_version:
            raise StaleTaskError(current)
        return self._update_mysql(
            dataclasses.replace(
                record, owner=current.owner, tenant=current.tenant, scopes=current.scopes,
                created_at=current.created_at,
            ),
            expected_version, values,
        )  # fmt: skip

    def task_versions(self, task_ids: list[str]) -> dict[str, tuple[int, TaskState]]:
        """Version and state of each task still stored (one query for the replica poll)."""
        c = self.tasks.c
        out: dict[str, tuple[int, TaskState]] = {}
        with self._one() as conn:
            for chunk in _chunks(task_ids):
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
        with self._one() as conn:
            for chunk in _chunks(task_ids):
                conn.execute(
                    self.tasks.update()
                    .where(c.id.in_(chunk), c.state.in_(_LEASED_STATES))
                    .values(lease_until=until, run_by=leases.holder())
                )

    def lease_run(self, task_id: str, until: int, deadline: int | None) -> None:
        """Take the lease of a run started over a stored task (a paused task resumed)."""
        c = self.tasks.c
        with self._one() as conn:
            conn.execute(
                self.tasks.update()
                .where(c.id == task_id, c.state.in_(_LEASED_STATES))
                .values(lease_until=until, run_deadline=deadline, run_by=leases.holder())
            )

    def release_runs(self, task_ids: list[str]) -> None:
        """End the leases of tasks that run on outside any run (handed off to a job)."""
        c = self.tasks.c
        with self._one() as conn:
            for chunk in _chunks(task_ids):
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
        with self._one() as conn:
            return [LapsedRun(row[0], row[1], row[2]) for row in conn.execute(query)]

    def list_tasks(self, query: ListQuery) -> TaskPage:
        c = self.tasks.c
        where: list[t.Any] = [c.owner == query.owner]
        params: dict[str, t.Any] = {}
        if query.tenanted:
            where.extend(_is(c.tenant, "tenant", query.tenant is None))
            params["tenant"] = query.tenant or ""
        if query.scoped:
            scopes = _scope_text(query.scopes)
            where.extend(self._scopes_is(scopes is None))
            params.update(self._scope_params(scopes))
        if query.context_id:
            where.append(c.context_id == query.context_id)
        if query.states is not None:
            where.append(c.state.in_(sorted(s.value for s in query.states)))
        if query.status_after is not None:
            where.append(c.status_ts >= _micros(query.status_after))
        page_where = list(where)
        if query.cursor is not None:
            stamp, last_id = query.cursor
            page_where.append(sa.tuple_(c.status_ts, c.id) < sa.tuple_(_micros(stamp), last_id))
            if self.mysql:  # MySQL ranges on a plain bound, not on a row comparison
                page_where.append(c.status_ts <= _micros(stamp))
        filtered = query.context_id or query.states is not None or query.status_after is not None
        if self.counts is not None and not filtered:  # the tiers' trigger-kept counts
            counted = sql_counts.total(
                self.counts,
                query.owner,
                query.tenant if query.tenanted else sql_counts.ANY,
                _scope_text(query.scopes) if query.scoped else sql_counts.ANY,
                hashed=self.mysql,
            )
        else:
            counted = sa.select(sa.func.count()).select_from(self.tasks).where(*where)
        with self._one() as conn:  # the count and the page: two reads, no transaction
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
        with self._tx() as conn:
            for chunk in _chunks(ids):
                conn.execute(
                    self.push_configs.delete().where(self.push_configs.c.task_id.in_(chunk))
                )
                result = conn.execute(self.tasks.delete().where(self.tasks.c.id.in_(chunk)))
                deleted += result.rowcount
        return deleted

    def trim_terminal_tasks(self, tier: Tier, keep: int) -> list[str]:
        """Delete the tier's oldest terminal tasks past ``keep``, and the owner's orphan configs."""
        params = {**self._tier_params(tier), "keep": max(0, keep)}
        statement = self._trim_statement(tier)
        if self.mysql:
            return self._trim_mysql(tier, statement, params)
        if self.dialect == "postgresql":  # one statement, run after every settle
            rows, _ = self._execute(("trim", *self._shape(tier)), statement, params)
            return [row[0] for row in rows]
        pc = self.push_configs.c
        with self._tx() as conn:
            doomed = list(conn.execute(statement, params).scalars())
            if doomed:  # the trimmed tasks' configs, and any the owner left orphaned before
                alive = sa.select(self.tasks.c.id).where(self.tasks.c.id == pc.task_id).exists()
                conn.execute(self.push_configs.delete().where(pc.owner == tier.owner, ~alive))
        return doomed

    def _trim_mysql(self, tier: Tier, oldest: t.Any, params: dict[str, t.Any]) -> list[str]:
        """The candidates by a read that takes no lock (one round trip, usually empty); then per
        chunk one short transaction locks them ``SKIP LOCKED`` (a row another trim holds is that
        trim's to delete) before any count row is touched, deletes them by primary key and the
        owner's orphan configs. A trim takes its task rows first, never waits on a task row,
        and takes its tier's count row last, so trims and settles never wait in a cycle."""
        c, pc = self.tasks.c, self.push_configs.c
        rows, _ = self._execute(("trim", *self._shape(tier)), oldest, params)
        candidates = [row[0] for row in rows]
        doomed: list[str] = []
        skip = sql_mysql.skip_locked(self.engine.dialect)
        for chunk in _chunks(candidates):
            if self._driver is not None and len(chunk) <= _MULTI_ROWS:
                trimmed = self._trim_mysql_chunk(tier, chunk, skip)
                if trimmed is not None:
                    doomed.extend(trimmed)
                    continue
            with self._tx() as conn:
                locked = sa.select(c.id).where(c.id.in_(chunk), c.state.in_(_TERMINAL_STATES))
                ids = list(conn.execute(locked.with_for_update(skip_locked=skip)).scalars())
                if not ids:
                    continue
                # One primary-key DELETE per row: an IN list may be planned as a scan that
                # waits on rows another trim holds while this one holds the count row.
                conn.execute(self._delete_one, [{"doomed": task_id} for task_id in ids])
                alive = sa.select(c.id).where(c.id == pc.task_id).exists()
                conn.execute(self.push_configs.delete().where(pc.owner == tier.owner, ~alive))
            doomed.extend(ids)
        return doomed

    def _trim_mysql_chunk(self, tier: Tier, chunk: list[str], skip: bool) -> list[str] | None:
        """:meth:`_trim_mysql`'s transaction for one chunk, on the DBAPI cursor (statements
        compiled once per chunk size); None: it must go through SQLAlchemy."""
        c, pc = self.tasks.c, self.push_configs.c
        n = len(chunk)

        def locking() -> t.Any:
            listed: list[t.Any] = [sa.bindparam(f"id_{i}") for i in range(n)]
            locked = sa.select(c.id).where(c.id.in_(listed), c.state.in_(_TERMINAL_LITERALS))
            return locked.with_for_update(skip_locked=skip)

        def orphans() -> t.Any:
            alive = sa.select(c.id).where(c.id == pc.task_id).exists()
            return self.push_configs.delete().where(pc.owner == sa.bindparam("owner"), ~alive)

        lock = self._plain_of(("trim_lock", n), locking)
        delete = self._plain_of("delete_one", self._delete_one)
        orphan = self._plain_of("orphans", orphans)
        if self._driver is None or lock is None or delete is None or orphan is None:
            return None
        with self._driver.transaction() as tx:
            ids = [row[0] for row in tx.run(lock, {f"id_{i}": v for i, v in enumerate(chunk)})]
            if ids:
                # One primary-key DELETE per row: an IN list may be planned as a scan that
                # waits on rows another trim holds while this one holds the count row.
                tx.many(delete, [{"doomed": task_id} for task_id in ids])
                tx.run(orphan, {"owner": tier.owner})
        return ids

    # -- push configs

    def put_push_config(self, owner: str, config: PushConfig, keep: int) -> PushConfig:
        pc = self.push_configs.c
        body = json.dumps(dump_stored_push_config(config), separators=(",", ":"))
        with self._tx() as conn:
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
        with self._one() as conn:
            body = conn.execute(
                sa.select(pc.body).where(pc.task_id == task_id, pc.id == config_id)
            ).scalar()
        return None if body is None else push_config_from_wire(json.loads(body))

    def list_push_configs(self, task_id: str) -> list[PushConfig]:
        pc = self.push_configs.c
        with self._one() as conn:
            bodies = conn.execute(
                sa.select(pc.body).where(pc.task_id == task_id).order_by(pc.seq)
            ).scalars()
            return [push_config_from_wire(json.loads(body)) for body in bodies]

    def delete_push_config(self, task_id: str, config_id: str) -> bool:
        pc = self.push_configs.c
        with self._one() as conn:
            result = conn.execute(
                self.push_configs.delete().where(pc.task_id == task_id, pc.id == config_id)
            )
        return bool(result.rowcount)

    # -- data export and erasure

    def owners(self) -> list[str]:
        """Every owner holding a task (``flask a2a trim`` walks them)."""
        with self._one() as conn:
            query = sa.select(self.tasks.c.owner).distinct().order_by(self.tasks.c.owner)
            return list(conn.execute(query).scalars())

    def export_owner(self, owner: str) -> dict[str, list[dict[str, t.Any]]]:
        c, pc = self.tasks.c, self.push_configs.c
        with self._tx() as conn:
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
        with self._tx() as conn:
            configs = conn.execute(
                self.push_configs.delete().where(self.push_configs.c.owner == owner)
            ).rowcount
            tasks = conn.execute(self.tasks.delete().where(self.tasks.c.owner == owner)).rowcount
            if self.counts is not None:  # the owner's (now zero) counts go too
                conn.execute(self.counts.delete().where(self.counts.c.owner == owner))
        return int(configs) + int(tasks)
