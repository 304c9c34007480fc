"""What a SQL database does its own way, behind the one small interface the SQL store calls.

:class:`SQLDialect` is the store's SQL as the standard has it (SQLite runs it with its busy
timeout, trimming inside the settle). Each database's differences live in its own module, the
way SQLAlchemy's dialects or requests' adapters are shaped: ``sql_postgres`` (advisory DDL lock,
``SET LOCAL`` bounds, statement-level count triggers, the one-statement trim), ``sql_mysql``
(MariaDB/MySQL: exact collations, hashed scope keys, DDL locks, session bounds, row-level
triggers, an update without ``RETURNING``, the two-step trim) and ``sql_sqlite``. The store
(``sql``) holds one per engine, chosen by the engine's dialect name, and reads as the operations
it offers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import typing as t
from datetime import datetime, timedelta, timezone

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..protocol.limits import MAX_KEY, MAX_TASK_ID, refusal
from ..protocol.model import TERMINAL_STATES, Tier
from .base import StaleTaskError, TaskRecord

if t.TYPE_CHECKING:
    from .sql_statements import Statements

#: Ids are read in slices of this many (one statement each: bound parameters are limited).
CHUNK: t.Final = 500
#: Rounds of up to this many rows are one statement (one text per size).
MULTI_ROWS: t.Final = 64
TERMINAL_STATES_SORTED: t.Final = sorted(s.value for s in TERMINAL_STATES)
#: The same as plain bound values (not an expanding IN): the trim's text is fixed.
TERMINAL_LITERALS: t.Final = [sa.literal(state) for state in TERMINAL_STATES_SORTED]


_EPOCH: t.Final = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICRO: t.Final = timedelta(microseconds=1)
#: Task columns holding a caller's string, the field that names it, and its length.
ROW_FIELDS: t.Final = (
    ("id", "id", MAX_TASK_ID),
    ("context_id", "contextId", MAX_KEY),
    ("owner", "owner", MAX_KEY),
    ("tenant", "tenant", MAX_KEY),
    ("skill", "skill", MAX_KEY),
)


def micros(value: datetime) -> int:
    """A stored timestamp: integer microseconds since the epoch (one order everywhere)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return (value - _EPOCH) // _MICRO


def from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=int(value))


def scope_text(scopes: tuple[str, ...] | None) -> str | None:
    """The canonical stored scope set: a sorted JSON list, NULL for a session."""
    return None if scopes is None else json.dumps(sorted(scopes), separators=(",", ":"))


def scope_key(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(json.loads(text))


def blank(column: t.Any) -> t.Any:
    """``COALESCE(column, '')``, spelled the same in the indexes and the queries."""
    return sa.func.coalesce(column, sa.literal_column("''"))


def exact(column: t.Any, name: str, null: bool) -> list[t.Any]:
    """Exact match on a nullable key, through the COALESCE the indexes hold.

    The bound value of ``name`` is the key or ``''``; ``null`` picks ``IS NULL`` for the exact
    half, so one prepared statement serves each shape.
    """
    same = column.is_(None) if null else column == sa.bindparam(name)
    return [blank(column) == sa.bindparam(name), same]


def refuse_nul(row: dict[str, t.Any]) -> None:
    """Refuse (-32602) a caller's string holding a NUL (PostgreSQL cannot hold one, MySQL
    would), naming its field."""
    for column, field, _ in ROW_FIELDS:
        value = row.get(column)
        if value is not None and "\x00" in value:
            raise refusal(field, "must not contain NUL characters")


def chunks(ids: list[str]) -> t.Iterator[list[str]]:
    """``ids`` in slices of :data:`CHUNK`."""
    for start in range(0, len(ids), CHUNK):
        yield ids[start : start + CHUNK]


def shape(tier: Tier) -> tuple[bool, bool]:
    """Which of the tier's keys are NULL: one prepared statement per shape."""
    return (tier.tenant is None, tier.scopes is None)


class StoreHost(t.Protocol):
    """What a dialect uses of the store it serves (``sql.SQLStore``): its tables, how its
    statements run, and a tier's WHERE."""

    tasks: sa.Table
    push_configs: sa.Table
    statements: Statements

    def tier_where(self, tenant_null: bool, scopes_null: bool) -> list[t.Any]: ...

    def get_task(self, task_id: str, owner: str | None = None) -> TaskRecord | None: ...


class SQLDialect:
    """The standard behaviour; a database overrides what it does differently.

    :param engine: the store's engine.
    :param millis: the statement timeout, in milliseconds.
    :param asynchronous_commit: the store's ``asynchronous_commit`` (PostgreSQL).
    :param carried: the engine's connections carry the timeout and commit mode already.
    :param autocommits: ... and autocommit (an engine from ``engine_from_url``).
    """

    #: The task counts per tier are kept by triggers (``sql_counts``): ``totalSize`` reads them.
    counts: t.ClassVar[bool] = False
    #: A trim is a round trip: retention runs it just after a settle's answer.
    deferred_trims: t.ClassVar[bool] = True
    #: ``UPDATE``/``DELETE ... RETURNING`` compiles (not on MySQL, nor SQLite on SQLAlchemy 1.4).
    returning: t.ClassVar[bool] = True

    def __init__(
        self,
        engine: Engine,
        *,
        millis: int,
        asynchronous_commit: bool,
        carried: bool,
        autocommits: bool,
    ) -> None:
        self.engine = engine
        self.name = engine.dialect.name
        self.millis = millis
        self.asynchronous_commit = asynchronous_commit
        self.carried = carried
        self.autocommits = autocommits
        #: Statements built once (SQLAlchemy then caches their compiled form).
        self._built: dict[t.Hashable, t.Any] = {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    # -- tables

    def extra_columns(self) -> list[sa.Column[t.Any]]:
        """Columns of the task table only this database needs."""
        return []

    def indexes(self, tasks: sa.Table, prefix: str, lease_index: sa.Index) -> tuple[sa.Index, ...]:
        """The task table's indexes. NULL is no equality for the planner, so the keys are
        COALESCEd: then the index gives the page order, and the raw columns at the end let
        counts stay index-only."""
        c = tasks.c
        return (
            sa.Index(
                f"ix_{prefix}tasks_tier",
                c.owner, blank(c.tenant), blank(c.scopes), c.status_ts.desc(), c.id.desc(),
                c.tenant, c.scopes,
            ),
            sa.Index(
                f"ix_{prefix}tasks_owner",
                c.owner, blank(c.tenant), c.status_ts.desc(), c.id.desc(), c.tenant,
            ),
            lease_index,
        )  # fmt: skip

    def ddl_lock(
        self, conn: Connection, name: str, seconds: float
    ) -> contextlib.AbstractContextManager[None]:
        """Replicas opening the store together must not race on DDL (no lock here)."""
        return contextlib.nullcontext()

    def upgrade_table(self, conn: Connection, table: sa.Table) -> None:
        """Bring an existing table's columns to the declared types (nothing to do here)."""

    def add_extra_columns(self, conn: Connection, tasks: sa.Table, present: set[str]) -> None:
        """An older task table gains :meth:`extra_columns` (none here)."""

    def create_indexes(self, conn: Connection, indexes: t.Iterable[sa.Index]) -> None:
        """Create the indexes an older table lacks."""
        for index in indexes:
            conn.execute(sa.schema.CreateIndex(index, if_not_exists=True))

    def install_counts(
        self, conn: Connection, tasks: sa.Table, counts: sa.Table, prefix: str
    ) -> None:
        """The triggers keeping ``counts`` (a database with :attr:`counts`)."""
        raise NotImplementedError

    def uninstall_counts(self, conn: Connection, prefix: str) -> None:
        """What dropping the tables leaves of the count triggers."""

    # -- sessions

    def bound(self, conn: Connection) -> None:
        """The statement timeout for this transaction only (no standard way: none here)."""

    @contextlib.contextmanager
    def transaction(self) -> t.Iterator[Connection]:
        """One short transaction, bounded by the statement timeout."""
        if self.autocommits:
            with self.engine.connect() as conn:
                conn = conn.execution_options(isolation_level="READ COMMITTED")
                with conn.begin():
                    yield conn
            return
        with self.engine.begin() as conn:
            if not self.carried:
                self.bound(conn)
            yield conn

    # -- rows

    def check_row(self, row: dict[str, t.Any]) -> None:
        """Refuse (-32602) what this database would store altered (nothing here)."""

    def round_order(self, rows: list[dict[str, t.Any]]) -> list[dict[str, t.Any]]:
        """The rows of one multi-row INSERT, in the order they are written."""
        return rows

    def scope_params(self, text: str | None) -> dict[str, str]:
        """The bound values of :meth:`scopes_is` for a stored scope text."""
        return {"scopes": text or ""}

    def counted_scopes(self, text: str | None) -> str:
        """The count table's key for a stored scope text (``sql_counts``: ``''`` for none)."""
        return text or ""

    def scopes_is(self, tasks: sa.Table, null: bool) -> list[t.Any]:
        """Exact match on the scope set."""
        return exact(tasks.c.scopes, "scopes", null)

    def page_after(self, tasks: sa.Table, stamp: int, last_id: str) -> list[t.Any]:
        """The keyset page's bound: rows before (status timestamp, id)."""
        c = tasks.c
        return [sa.tuple_(c.status_ts, c.id) < sa.tuple_(stamp, last_id)]

    def update_statement(self, tasks: sa.Table, changes: dict[str, t.Any]) -> t.Any:
        """The optimistic UPDATE (``:task_id``, ``:expected``), returning the row's
        creation-time fields; without RETURNING the caller's are in the WHERE instead (they
        never change), so a matched row has exactly those."""
        c = tasks.c
        update = tasks.update().where(
            c.id == sa.bindparam("task_id"), c.version == sa.bindparam("expected")
        )
        if self.returning:
            return update.values(**changes).returning(c.owner, c.tenant, c.scopes, c.created_at)
        return update.where(
            c.owner == sa.bindparam("was_owner"),
            c.tenant.is_not_distinct_from(sa.bindparam("was_tenant")),
            c.scopes.is_not_distinct_from(sa.bindparam("was_scopes")),
            c.created_at == sa.bindparam("was_created_at"),
        ).values(**changes)

    def update(
        self,
        host: StoreHost,
        statement: t.Any,
        record: TaskRecord,
        expected_version: int,
        values: dict[str, t.Any],
    ) -> TaskRecord:
        """One optimistic UPDATE; :class:`StaleTaskError` when the row moved (or is gone)."""
        if not self.returning:
            return self._update_owned(host, statement, record, expected_version, values)
        rows, _ = host.statements.execute("update", statement, values)
        if not rows:  # say what it holds now
            raise StaleTaskError(host.get_task(record.task.id))
        # Creation-time ownership comes from the row, whatever the caller's record says.
        owner, tenant, scopes, created_at = rows[0]
        return TaskRecord(
            task=record.task,
            owner=owner,
            tenant=tenant,
            scopes=scope_key(scopes),
            created_at=from_micros(created_at),
            version=expected_version + 1,
            skill=record.skill,
        )

    def _update_owned(
        self,
        host: StoreHost,
        statement: t.Any,
        record: TaskRecord,
        expected_version: int,
        values: dict[str, t.Any],
    ) -> TaskRecord:
        """Without RETURNING: if the caller's creation-time fields are not the row's, the row
        is read and the update made with the row's (ownership never moves)."""
        owned = {
            **values, "was_owner": record.owner, "was_tenant": record.tenant,
            "was_scopes": scope_text(record.scopes), "was_created_at": micros(record.created_at),
        }  # fmt: skip
        _, matched = host.statements.execute("update_owned", statement, owned)
        if matched == 1:
            return dataclasses.replace(record, version=expected_version + 1)
        current = host.get_task(record.task.id)
        if current is None or current.version != expected_version:
            raise StaleTaskError(current)
        return self._update_owned(
            host, statement,
            dataclasses.replace(
                record, owner=current.owner, tenant=current.tenant, scopes=current.scopes,
                created_at=current.created_at,
            ),
            expected_version, values,
        )  # fmt: skip

    # -- trims

    def oldest_terminal(self, host: StoreHost, tier: Tier) -> t.Any:
        """The tier's terminal rows past ``:keep``, newest first."""
        c = host.tasks.c
        return (
            sa.select(c.id)
            .where(*host.tier_where(*shape(tier)), c.state.in_(TERMINAL_LITERALS))
            .order_by(c.status_ts.desc(), c.id.desc())
            .offset(sa.bindparam("keep"))
        )

    def trim_statement(self, host: StoreHost, tier: Tier) -> t.Any:
        """The tier's trim, built once per shape (SQLAlchemy caches its compiled form)."""
        key = ("trim", *shape(tier))
        statement = self._built.get(key)
        if statement is None:
            statement = self._built[key] = self.build_trim(host, tier)
        return statement

    def build_trim(self, host: StoreHost, tier: Tier) -> t.Any:
        """Delete the oldest terminal rows past ``:keep``, returning their ids (without
        RETURNING: the candidates, which :meth:`trim` deletes)."""
        c = host.tasks.c
        oldest = self.oldest_terminal(host, tier)
        if not self.returning:
            return oldest
        return host.tasks.delete().where(c.id.in_(oldest.scalar_subquery())).returning(c.id)

    def trim(self, host: StoreHost, tier: Tier, params: dict[str, t.Any]) -> list[str]:
        """Delete the tier's oldest terminal tasks past ``:keep`` and the owner's orphan
        configs, in one transaction. Without RETURNING the candidates are read first, then
        deleted by id (a terminal task never changes, so they stay the ones to delete)."""
        c, pc = host.tasks.c, host.push_configs.c
        statement = self.trim_statement(host, tier)
        with host.statements.tx() as conn:
            doomed = list(conn.execute(statement, params).scalars())
            if doomed and not self.returning:
                for chunk in chunks(doomed):
                    conn.execute(host.tasks.delete().where(c.id.in_(chunk)))
            if doomed:  # the trimmed tasks' configs, and any the owner left orphaned before
                alive = sa.select(host.tasks.c.id).where(host.tasks.c.id == pc.task_id).exists()
                conn.execute(host.push_configs.delete().where(pc.owner == tier.owner, ~alive))
        return doomed
