"""The SQL store: SQLAlchemy 2 Core on PostgreSQL or SQLite, shared by every replica.

Two tables (``<prefix>tasks``, ``<prefix>push_configs``) are created if absent, and an older
task table without the ``tenant`` or ``scopes`` column gets it on open (its rows then read as a
session's, made in no tenant). Writes are optimistic: ``UPDATE ... WHERE id = :id AND version =
:expected``. ListTasks filters owner, tenant and scope set in SQL, pages by keyset on
(status timestamp, id) and counts with an indexed ``COUNT``, so a page costs O(page).
Timestamps are integer microseconds since the epoch: exact, and one order on every backend.

Every call runs in one short transaction with a statement timeout (PostgreSQL
``SET LOCAL statement_timeout``, SQLite ``busy_timeout``), so a store call never hangs forever.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import typing as t
import zlib
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..model import TERMINAL_STATES, PushConfig, TaskState, Tier
from ..wire import dump_push_config, push_config_from_wire, task_from_wire
from .base import ListQuery, StaleTaskError, TaskPage, TaskRecord, encode_task, record_json

EXTRA_HINT: t.Final = "pip install flask-a2a[postgres]"
_EPOCH: t.Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO: t.Final = timedelta(microseconds=1)
#: Ids are compared byte-wise in SQL, as Python compares them (keyset paging needs one order).
_ID = sa.String(128).with_variant(sa.String(128, collation="C"), "postgresql")
_CHUNK: t.Final = 500


def engine_from_url(url: str, **options: t.Any) -> Engine:
    """An engine for ``A2A_DATABASE_URL``; a missing driver names the extra to install.

    An in-memory SQLite URL gets one shared connection, so every thread sees the same database.
    """
    if url in ("sqlite://", "sqlite:///:memory:") or url.startswith("sqlite:///:memory:?"):
        options.setdefault("poolclass", sa.pool.StaticPool)
        options.setdefault("connect_args", {"check_same_thread": False})
    try:
        return sa.create_engine(url, **options)
    except ImportError as exc:
        raise ImportError(
            f"the SQL store could not load the database driver for {url.split(':', 1)[0]!r} "
            f"({exc}); {EXTRA_HINT}"
        ) from exc


def _micros(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // _MICRO


def _datetime(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=int(micros))


def _blank(column: t.Any) -> t.Any:
    """``COALESCE(column, '')``, spelled the same in the indexes and the queries."""
    return sa.func.coalesce(column, sa.literal_column("''"))


def _is(column: t.Any, value: str | None) -> list[t.Any]:
    """Exact match on a nullable key, through the COALESCE the indexes hold."""
    exact = column.is_(None) if value is None else column == value
    return [_blank(column) == sa.literal(value or "", literal_execute=True), exact]


def _scope_text(scopes: tuple[str, ...] | None) -> str | None:
    """The canonical stored scope set: a sorted JSON list, NULL for a session."""
    return None if scopes is None else json.dumps(sorted(scopes), separators=(",", ":"))


def _scope_key(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(json.loads(text))


class SQLStore:
    """A :class:`~flask_a2a.store.Store` on a SQLAlchemy engine (PostgreSQL or SQLite).

    :param engine: the app's engine (Flask-SQLAlchemy's, or one from ``A2A_DATABASE_URL``).
    :param table_prefix: prefix of the two table names, so several exchanges can share a DB.
    :param statement_timeout: seconds any one store call may wait on the database.
    :param shared: other processes use the same tables, so runs poll for foreign writes
        (a cancel served by another replica). Default: True except for in-memory SQLite.
    :param asynchronous_commit: on PostgreSQL, the store's own transactions do not wait for
        the WAL flush (about 1 ms per write here); a database crash may lose the last few task
        updates, never corrupt them. Set False for synchronous commits.
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
    ) -> None:
        self.engine = engine
        #: PostgreSQL: commit without waiting for the WAL flush (``synchronous_commit = off``).
        self.asynchronous_commit = asynchronous_commit
        self.table_prefix = table_prefix
        self.statement_timeout = statement_timeout
        self.dialect = engine.dialect.name
        if shared is None:
            in_memory = engine.url.database in (None, "", ":memory:")
            shared = not (self.dialect == "sqlite" and in_memory)
        #: Other processes write these tables: the exchange polls them for foreign changes.
        self.shared = shared
        self.metadata = sa.MetaData()
        self.tasks = sa.Table(
            f"{table_prefix}tasks",
            self.metadata,
            sa.Column("id", _ID, primary_key=True),
            sa.Column("owner", sa.String(255), nullable=False),
            sa.Column("tenant", sa.String(255), nullable=True),
            sa.Column("scopes", sa.Text, nullable=True),
            sa.Column("skill", sa.String(255), nullable=True),
            sa.Column("version", sa.Integer, nullable=False),
            sa.Column("state", sa.String(32), nullable=False),
            sa.Column("status_ts", sa.BigInteger, nullable=False),
            sa.Column("context_id", sa.String(255), nullable=True),
            sa.Column("created_at", sa.BigInteger, nullable=False),
            sa.Column("body", sa.Text, nullable=False),
        )
        c = self.tasks.c
        # NULL is no equality for the planner, so the keys are COALESCEd: then the index gives
        # the page order, and the raw columns at the end let counts stay index-only.
        self.indexes = (
            sa.Index(
                f"ix_{table_prefix}tasks_tier",
                c.owner, _blank(c.tenant), _blank(c.scopes), c.status_ts.desc(), c.id.desc(),
                c.tenant, c.scopes,
            ),
            sa.Index(
                f"ix_{table_prefix}tasks_owner",
                c.owner, _blank(c.tenant), c.status_ts.desc(), c.id.desc(), c.tenant,
            ),
        )
        self.push_configs = sa.Table(
            f"{table_prefix}push_configs",
            self.metadata,
            sa.Column("task_id", _ID, primary_key=True),
            sa.Column("id", sa.String(255), primary_key=True),
            sa.Column("owner", sa.String(255), nullable=False, index=True),
            sa.Column("seq", sa.BigInteger, nullable=False),
            sa.Column("body", sa.Text, nullable=False),
        )
        self._open()

    @classmethod
    def from_url(cls, url: str, table_prefix: str = "a2a_", **options: t.Any) -> SQLStore:
        return cls(engine_from_url(url), table_prefix, **options)

    # -- connections

    @contextlib.contextmanager
    def _tx(self) -> t.Iterator[Connection]:
        """One short transaction, bounded by the statement timeout."""
        with self.engine.begin() as conn:
            millis = max(1, int(self.statement_timeout * 1000))
            if self.dialect == "postgresql":
                # LOCAL: only this transaction, never the host app's own on a shared engine.
                # Task rows are not jobs (docs/storage-and-scaling.md), so by default a commit
                # does not wait for the WAL flush; a crash may lose the last few updates.
                sync = "; SET LOCAL synchronous_commit = off" if self.asynchronous_commit else ""
                conn.exec_driver_sql(f"SET LOCAL statement_timeout = {millis}{sync}")
            elif self.dialect == "sqlite":
                conn.exec_driver_sql(f"PRAGMA busy_timeout = {millis}")
            yield conn

    def _open(self) -> None:
        """Create what is missing; add ``tenant`` / ``scopes`` to an older task table."""
        with self._tx() as conn:
            if self.dialect == "postgresql":
                # Replicas starting together must not race on DDL (DDL is transactional here).
                key = zlib.crc32(self.tasks.name.encode()) & 0x7FFFFFFF
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
            inspector = sa.inspect(conn)
            if inspector.has_table(self.tasks.name):
                present = {col["name"] for col in inspector.get_columns(self.tasks.name)}
                for name in ("tenant", "scopes"):
                    if name not in present:
                        column = self.tasks.c[name]
                        kind = column.type.compile(dialect=conn.dialect)
                        conn.exec_driver_sql(
                            f"ALTER TABLE {conn.dialect.identifier_preparer.quote(self.tasks.name)}"
                            f" ADD COLUMN {name} {kind}"
                        )
                for index in self.indexes:  # an older table may lack them
                    conn.execute(sa.schema.CreateIndex(index, if_not_exists=True))
            else:
                self.metadata.create_all(conn, tables=[self.tasks], checkfirst=False)
            if not inspector.has_table(self.push_configs.name):
                self.metadata.create_all(conn, tables=[self.push_configs], checkfirst=False)

    def drop(self) -> None:
        """Drop both tables (tests, and hosts that remove the exchange)."""
        with self._tx() as conn:
            self.metadata.drop_all(conn, checkfirst=True)

    # -- rows

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

    def _tier_conditions(
        self, owner: str, tenant: str | None, scopes: tuple[str, ...] | None
    ) -> list[t.Any]:
        c = self.tasks.c
        return [c.owner == owner, *_is(c.tenant, tenant), *_is(c.scopes, _scope_text(scopes))]

    # -- tasks

    def create_task(self, record: TaskRecord) -> TaskRecord:
        body = encode_task(record.task)
        record = dataclasses.replace(record, version=1)
        task = record.task
        try:
            with self._tx() as conn:
                conn.execute(
                    self.tasks.insert().values(
                        id=task.id,
                        owner=record.owner,
                        tenant=record.tenant,
                        scopes=_scope_text(record.scopes),
                        skill=record.skill,
                        version=1,
                        state=task.status.state.value,
                        status_ts=_micros(task.status.timestamp),
                        context_id=task.context_id,
                        created_at=_micros(record.created_at),
                        body=body,
                    )
                )
        except sa.exc.IntegrityError:
            raise ValueError(f"task {task.id!r} exists") from None
        return record

    def get_task(self, task_id: str, owner: str | None = None) -> TaskRecord | None:
        query = sa.select(self.tasks).where(self.tasks.c.id == task_id)
        if owner is not None:
            query = query.where(self.tasks.c.owner == owner)
        with self._tx() as conn:
            row = conn.execute(query).first()
        return None if row is None else self._record(row)

    def update_task(self, record: TaskRecord, expected_version: int) -> TaskRecord:
        body = encode_task(record.task)
        task, c = record.task, self.tasks.c
        statement = (
            self.tasks.update()
            .where(c.id == task.id, c.version == expected_version)
            .values(
                body=body,
                version=expected_version + 1,
                state=task.status.state.value,
                status_ts=_micros(task.status.timestamp),
                skill=record.skill,
            )
            .returning(c.owner, c.tenant, c.scopes, c.created_at)
        )
        with self._tx() as conn:
            row = conn.execute(statement).first()
            if row is None:
                current = conn.execute(sa.select(self.tasks).where(c.id == task.id)).first()
                raise StaleTaskError(None if current is None else self._record(current))
        # Creation-time ownership comes from the row, whatever the caller's record says.
        return TaskRecord(
            task=task,
            owner=row.owner,
            tenant=row.tenant,
            scopes=_scope_key(row.scopes),
            created_at=_datetime(row.created_at),
            version=expected_version + 1,
            skill=record.skill,
        )

    def task_versions(self, task_ids: list[str]) -> dict[str, tuple[int, TaskState]]:
        """Version and state of each task still stored (one query for the replica poll)."""
        c = self.tasks.c
        out: dict[str, tuple[int, TaskState]] = {}
        with self._tx() as conn:
            for start in range(0, len(task_ids), _CHUNK):
                chunk = task_ids[start : start + _CHUNK]
                query = sa.select(c.id, c.version, c.state).where(c.id.in_(chunk))
                for row in conn.execute(query):
                    out[row.id] = (row.version, TaskState(row.state))
        return out

    def list_tasks(self, query: ListQuery) -> TaskPage:
        c = self.tasks.c
        where: list[t.Any] = [c.owner == query.owner]
        if query.tenanted:
            where.extend(_is(c.tenant, query.tenant))
        if query.scoped:
            where.extend(_is(c.scopes, _scope_text(query.scopes)))
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
        with self._tx() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(self.tasks).where(*where))
            count = int(total.scalar_one())
            rows = []
            if query.limit > 0:
                rows = list(
                    conn.execute(
                        sa.select(self.tasks)
                        .where(*page_where)
                        .order_by(c.status_ts.desc(), c.id.desc())
                        .limit(query.limit + 1)
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
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                conn.execute(self.push_configs.delete().where(self.push_configs.c.task_id.in_(chunk)))
                result = conn.execute(self.tasks.delete().where(self.tasks.c.id.in_(chunk)))
                deleted += result.rowcount
        return deleted

    def trim_terminal_tasks(self, tier: Tier, keep: int) -> list[str]:
        """Delete the tier's oldest terminal tasks past ``keep``, and the owner's orphan configs."""
        c, pc = self.tasks.c, self.push_configs.c
        doomed_query = (
            sa.select(c.id)
            .where(
                *self._tier_conditions(tier.owner, tier.tenant, tier.scopes),
                c.state.in_(sorted(s.value for s in TERMINAL_STATES)),
            )
            .order_by(c.status_ts.desc(), c.id.desc())
            .offset(max(0, keep))
        )
        # One statement in the common case (nothing past the bound): it runs after every settle.
        delete = self.tasks.delete().where(c.id.in_(doomed_query.scalar_subquery()))
        with self._tx() as conn:
            if self.dialect == "postgresql":
                # Settles in one tier trim the same oldest rows: concurrent DELETEs of one set
                # deadlock (each waits a deadlock_timeout). One trimmer per tier at a time.
                name = f"{self.tasks.name}|{tier.owner}|{tier.tenant}|{tier.scopes}"
                key = zlib.crc32(name.encode())
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key & 0x7FFFFFFF})
            doomed = list(conn.execute(delete.returning(c.id)).scalars())
            if doomed:  # the trimmed tasks' configs, and any the owner left orphaned before
                alive = sa.select(c.id).where(c.id == pc.task_id).exists()
                conn.execute(self.push_configs.delete().where(pc.owner == tier.owner, ~alive))
        return doomed

    # -- push configs

    def put_push_config(self, owner: str, config: PushConfig, keep: int) -> PushConfig:
        pc = self.push_configs.c
        body = json.dumps(dump_push_config(config), separators=(",", ":"))
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
        with self._tx() as conn:
            body = conn.execute(
                sa.select(pc.body).where(pc.task_id == task_id, pc.id == config_id)
            ).scalar()
        return None if body is None else push_config_from_wire(json.loads(body))

    def list_push_configs(self, task_id: str) -> list[PushConfig]:
        pc = self.push_configs.c
        with self._tx() as conn:
            bodies = conn.execute(
                sa.select(pc.body).where(pc.task_id == task_id).order_by(pc.seq)
            ).scalars()
            return [push_config_from_wire(json.loads(body)) for body in bodies]

    def delete_push_config(self, task_id: str, config_id: str) -> bool:
        pc = self.push_configs.c
        with self._tx() as conn:
            result = conn.execute(
                self.push_configs.delete().where(pc.task_id == task_id, pc.id == config_id)
            )
        return bool(result.rowcount)

    # -- data export and erasure

    def owners(self) -> list[str]:
        """Every owner holding a task (``flask a2a trim`` walks them)."""
        with self._tx() as conn:
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
        return int(configs) + int(tasks)
