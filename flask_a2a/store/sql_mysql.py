"""What the SQL store does differently on MySQL and MariaDB.

* Keys compare byte for byte: ``utf8mb4`` with a binary NO PAD collation (MariaDB
  ``utf8mb4_nopad_bin``, MySQL 8 ``utf8mb4_0900_bin``), so ``'A' != 'a'`` and
  ``'alice' != 'alice '`` as on PostgreSQL; a PAD SPACE collation (``utf8mb4_bin``) would let an
  owner ``"alice "`` match ``"alice"``. Bodies are ``LONGTEXT`` (``TEXT`` holds 64 KiB).
* MariaDB has no expression indexes, so a task's scope set is indexed through a virtual column,
  ``scopes_key`` (SHA-256 of the canonical scope JSON, ``''`` for a session); the tier and owner
  indexes are on plain columns (``tenant IS NULL`` is an index lookup on MySQL).
* DDL is not transactional: each statement commits on its own. Replicas opening the store
  together serialize on ``GET_LOCK``.
* A store on the host's engine bounds each transaction by setting the session's timeouts and
  restoring them after (MySQL has no ``SET LOCAL``).
* A NUL in a key is refused (-32602): MySQL would store it, every other store refuses it.
* There is no ``UPDATE ... RETURNING``: the caller's creation-time fields are checked in the
  WHERE instead (they never change).
* The per-tier counts are kept by row-level triggers, keyed by the scope set's digest.
* A trim reads its candidates without locks, then locks and deletes them chunk by chunk
  (:meth:`MySQLDialect.trim`).

:class:`MySQLDialect` is what the store calls; the functions below are its pieces.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import typing as t
import zlib

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Connection
from sqlalchemy.ext.compiler import compiles

from ..protocol.model import Tier
from .sql_dialect import (
    MULTI_ROWS,
    TERMINAL_LITERALS,
    TERMINAL_STATES_SORTED,
    SQLDialect,
    StoreHost,
    chunks,
    refuse_nul,
    shape,
)
from .sql_versions import unvaried, variant

#: The SQLAlchemy dialect names of MySQL-protocol servers (``mysql+pymysql://``,
#: ``mariadb+pymysql://``).
DIALECTS: t.Final = ("mysql", "mariadb")
#: The table options: utf8mb4 for every text column, InnoDB (row locks, transactions).
TABLE_OPTIONS: t.Final[dict[str, t.Any]] = {
    "mysql_engine": "InnoDB", "mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin",
}  # fmt: skip
#: The virtual column holding a task's scope set as a fixed-size, indexable key.
SCOPES_KEY_SQL: t.Final = "COALESCE(SHA2(scopes, 256), '')"


class Exact(sa.String):
    """A key column compared byte for byte (on MySQL/MariaDB a binary NO PAD collation)."""

    cache_ok = True


def exact_collation(dialect: t.Any) -> str:
    """The binary NO PAD utf8mb4 collation of this server (``utf8mb4_bin`` before MySQL 8)."""
    if getattr(dialect, "is_mariadb", False):
        return "utf8mb4_nopad_bin"
    version = getattr(dialect, "server_version_info", None) or ()
    return "utf8mb4_0900_bin" if tuple(version) >= (8, 0, 17) else "utf8mb4_bin"


@compiles(Exact, "mysql")
@compiles(Exact, "mariadb")
def _exact_ddl(type_: Exact, compiler: t.Any, **kw: t.Any) -> str:
    collation = exact_collation(compiler.dialect)
    return f"VARCHAR({type_.length}) CHARACTER SET utf8mb4 COLLATE {collation}"


#: Long text (bodies, scope sets): LONGTEXT on MySQL/MariaDB, whose TEXT holds 64 KiB only.
LONG_TEXT: t.Final = variant(
    sa.Text(), mysql.LONGTEXT(charset="utf8mb4", collation="utf8mb4_bin"), *DIALECTS
)
#: A SHA-256 hex digest (or ``''``): 64 ASCII bytes in an index, whatever the scope set's size.
DIGEST: t.Final = variant(
    sa.String(64), mysql.VARCHAR(64, charset="ascii", collation="ascii_bin"), *DIALECTS
)
#: The counts table's scope-set key: the JSON itself elsewhere, its digest on MySQL.
DIGEST_KEY: t.Final = variant(
    sa.Text(), mysql.VARCHAR(64, charset="ascii", collation="ascii_bin"), *DIALECTS
)


def scopes_key(scope_text: str | None) -> str:
    """What ``scopes_key`` holds for a stored scope set (NULL: a session's, ``''``)."""
    return "" if scope_text is None else hashlib.sha256(scope_text.encode()).hexdigest()


def skip_locked(dialect: t.Any) -> bool:
    """``FOR UPDATE SKIP LOCKED`` exists: MariaDB 10.6, MySQL 8.0."""
    version = tuple(getattr(dialect, "server_version_info", None) or ())
    return version >= ((10, 6) if getattr(dialect, "is_mariadb", False) else (8, 0, 1))


@contextlib.contextmanager
def ddl_lock(conn: Connection, name: str, seconds: float) -> t.Iterator[None]:
    """Replicas opening the store together must not race on DDL: a named server lock."""
    key = f"flask_a2a:{zlib.crc32(name.encode()):08x}"
    got = conn.exec_driver_sql(
        "SELECT GET_LOCK(%s, %s)", (key, max(1, math.ceil(seconds)))
    ).scalar()
    if got != 1:
        raise sa.exc.OperationalError("GET_LOCK", {}, TimeoutError(f"{name}: DDL lock busy"))
    try:
        yield
    finally:
        with contextlib.suppress(sa.exc.DBAPIError):
            conn.exec_driver_sql("SELECT RELEASE_LOCK(%s)", (key,))


def upgrade(conn: Connection, table: sa.Table) -> None:
    """Bring an existing table's columns to the declared types and collations.

    A table made by hand, or by an SQLAlchemy model with the server's default collation
    (often case-insensitive ``utf8mb4_general_ci``), or with a 64 KiB ``TEXT`` body, is altered
    in place (``ALTER TABLE ... MODIFY``, which rewrites the table: run it in a quiet hour).
    """
    rows = conn.execute(
        sa.text(
            "SELECT column_name, data_type, collation_name, column_type "
            "FROM information_schema.columns "
            "WHERE table_schema = DATABASE() AND table_name = :t"
        ),
        {"t": table.name},
    ).all()
    present = {row[0].lower(): row for row in rows}
    quote = conn.dialect.identifier_preparer.quote
    changes = []
    for column in table.columns:
        row = present.get(column.name)
        if row is None or column.computed is not None:
            continue
        declared = column.type.compile(dialect=conn.dialect)
        data_type, collation = str(row[1]).lower(), row[2]
        wanted_collation = None
        if isinstance(unvaried(column.type), Exact):
            wanted_collation = exact_collation(conn.dialect)
        elif "TEXT" in declared.upper():
            wanted_collation = "utf8mb4_bin"
        kind = declared.split("(")[0].split()[0].lower()
        wrong_type = kind in ("longtext", "varchar") and data_type != kind
        wrong_collation = wanted_collation is not None and collation != wanted_collation
        if wrong_type or wrong_collation:
            null = "NULL" if column.nullable else "NOT NULL"
            changes.append(f"MODIFY {quote(column.name)} {declared} {null}")
    if changes:
        conn.exec_driver_sql(f"ALTER TABLE {quote(table.name)} {', '.join(changes)}")


def add_scopes_key(conn: Connection, table: sa.Table) -> None:
    """An older task table gains the virtual ``scopes_key`` column its tier index needs."""
    quote = conn.dialect.identifier_preparer.quote
    kind = table.c.scopes_key.type.compile(dialect=conn.dialect)
    conn.exec_driver_sql(
        f"ALTER TABLE {quote(table.name)} ADD COLUMN scopes_key {kind} "
        f"AS ({SCOPES_KEY_SQL}) VIRTUAL"
    )


def missing_indexes(conn: Connection, indexes: t.Iterable[sa.Index]) -> list[sa.Index]:
    """The indexes not there yet (MySQL has no ``CREATE INDEX IF NOT EXISTS``)."""
    inspector = sa.inspect(conn)
    wanted = list(indexes)
    if not wanted:
        return []
    table = wanted[0].table
    assert table is not None
    have = {ix["name"] for ix in inspector.get_indexes(table.name)}
    return [index for index in wanted if index.name not in have]


@contextlib.contextmanager
def explicit_transaction(conn: Connection) -> t.Iterator[Connection]:
    """A transaction on an autocommitting connection: ``START TRANSACTION`` ... ``COMMIT``,
    two round trips, where switching the connection out of autocommit and back costs four."""
    conn.exec_driver_sql("START TRANSACTION")
    try:
        yield conn
    except BaseException:
        with contextlib.suppress(sa.exc.DBAPIError):
            conn.exec_driver_sql("ROLLBACK")
        raise
    conn.exec_driver_sql("COMMIT")


def bound_session(conn: Connection, millis: int) -> None:
    """On the host's engine, in the store's transaction: the store's timeouts for the session,
    the host's saved for :func:`restore_session` (MySQL has no ``SET LOCAL``).

    MariaDB ``max_statement_time`` (seconds) or MySQL ``max_execution_time`` (ms, SELECT only)
    and the InnoDB lock wait (whole seconds).
    """
    name, value = _timeout(conn, millis)
    seconds = max(1, math.ceil(millis / 1000))
    conn.exec_driver_sql(
        f"SET @a2a_timeout = @@SESSION.{name}, @a2a_lock = @@SESSION.innodb_lock_wait_timeout, "
        f"SESSION {name} = {value}, SESSION innodb_lock_wait_timeout = {seconds}"
    )


def restore_session(conn: Connection, millis: int) -> None:
    """The host's timeouts back on the connection (after the store's transaction ended)."""
    name, _ = _timeout(conn, millis)
    with contextlib.suppress(sa.exc.DBAPIError):
        conn.exec_driver_sql(
            f"SET SESSION {name} = @a2a_timeout, SESSION innodb_lock_wait_timeout = @a2a_lock"
        )


def _timeout(conn: Connection, millis: int) -> tuple[str, str]:
    if getattr(conn.dialect, "is_mariadb", False):
        return "max_statement_time", f"{millis / 1000:.3f}"
    return "max_execution_time", str(millis)


def install_counts(conn: Connection, tasks: sa.Table, counts: sa.Table) -> None:
    """Row-level triggers keeping ``<prefix>task_counts``, then the counts of the rows there.

    MySQL triggers are FOR EACH ROW only (no statement-level transition tables): each inserted
    task adds 1 to its tier's row (``INSERT ... ON DUPLICATE KEY UPDATE``), each deleted one
    subtracts 1, in the writing statement's transaction. ``TRUNCATE`` fires no trigger: after
    truncating the task table by hand, truncate the counts table too.
    """
    quote = conn.dialect.identifier_preparer.quote
    task_table, count_table = quote(tasks.name), quote(counts.name)

    def tenant(r: str) -> str:
        return f"COALESCE(CONCAT('+', {r}.tenant), '')"

    def scopes(r: str) -> str:
        return f"COALESCE(SHA2({r}.scopes, 256), '')"

    for name in ("insert", "delete"):
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {quote(f'{tasks.name}_count_{name}')}")
    conn.exec_driver_sql(
        f"CREATE TRIGGER {quote(f'{tasks.name}_count_insert')} AFTER INSERT ON {task_table} "
        f"FOR EACH ROW INSERT INTO {count_table} (owner, tenant_key, scopes_key, tasks) "
        f"VALUES (NEW.owner, {tenant('NEW')}, {scopes('NEW')}, 1) "
        f"ON DUPLICATE KEY UPDATE tasks = tasks + 1"
    )
    conn.exec_driver_sql(
        f"CREATE TRIGGER {quote(f'{tasks.name}_count_delete')} AFTER DELETE ON {task_table} "
        f"FOR EACH ROW UPDATE {count_table} SET tasks = tasks - 1 WHERE owner = OLD.owner "
        f"AND tenant_key = {tenant('OLD')} AND scopes_key = {scopes('OLD')}"
    )
    conn.exec_driver_sql(f"DELETE FROM {count_table}")
    conn.exec_driver_sql(
        f"INSERT INTO {count_table} (owner, tenant_key, scopes_key, tasks) "
        f"SELECT owner, {tenant(task_table)}, {scopes(task_table)}, COUNT(*) FROM {task_table} "
        f"GROUP BY 1, 2, 3"
    )


class MySQLDialect(SQLDialect):
    """MariaDB and MySQL (``mysql+pymysql://``, ``mariadb+pymysql://``)."""

    counts = True
    returning = False

    # -- tables

    def extra_columns(self) -> list[sa.Column[t.Any]]:
        """The scope set's digest, a virtual column the tier index can hold."""
        computed = sa.Computed(sa.text(SCOPES_KEY_SQL), persisted=False)
        return [sa.Column("scopes_key", DIGEST, computed)]

    def indexes(self, tasks: sa.Table, prefix: str, lease_index: sa.Index) -> tuple[sa.Index, ...]:
        """Plain columns (MariaDB has no expression indexes). InnoDB appends the primary key
        (id) to each, so they give the (status_ts, id) page order; both fit the 3072-byte key
        limit (255 utf8mb4 characters are 1020 bytes)."""
        c = tasks.c
        return (
            sa.Index(f"ix_{prefix}tasks_tier", c.owner, c.tenant, c.scopes_key, c.status_ts),
            sa.Index(f"ix_{prefix}tasks_owner", c.owner, c.tenant, c.status_ts),
            lease_index,
        )

    def ddl_lock(
        self, conn: Connection, name: str, seconds: float
    ) -> contextlib.AbstractContextManager[None]:
        return ddl_lock(conn, name, seconds)

    def upgrade_table(self, conn: Connection, table: sa.Table) -> None:
        upgrade(conn, table)

    def add_extra_columns(self, conn: Connection, tasks: sa.Table, present: set[str]) -> None:
        if "scopes_key" not in present:
            add_scopes_key(conn, tasks)

    def create_indexes(self, conn: Connection, indexes: t.Iterable[sa.Index]) -> None:
        for index in missing_indexes(conn, indexes):
            conn.execute(sa.schema.CreateIndex(index))

    def install_counts(
        self, conn: Connection, tasks: sa.Table, counts: sa.Table, prefix: str
    ) -> None:
        install_counts(conn, tasks, counts)

    # -- sessions

    @contextlib.contextmanager
    def transaction(self) -> t.Iterator[Connection]:
        if self.autocommits:  # the session is READ COMMITTED already
            with self.engine.connect() as conn, explicit_transaction(conn):
                yield conn
            return
        # The host's engine: its settings come back after the transaction.
        with self.engine.connect() as conn:
            conn = conn.execution_options(isolation_level="READ COMMITTED")
            try:
                with conn.begin():
                    bound_session(conn, self.millis)
                    yield conn
            finally:
                restore_session(conn, self.millis)

    # -- rows

    def check_row(self, row: dict[str, t.Any]) -> None:
        refuse_nul(row)  # MySQL would store it; every other store refuses it

    def round_order(self, rows: list[dict[str, t.Any]]) -> list[dict[str, t.Any]]:
        """Tiers in one order: concurrent rounds take count rows in one order."""
        return sorted(rows, key=lambda row: (row["owner"], row["tenant"] or "",
                                             row["scopes"] or ""))  # fmt: skip

    def scope_params(self, text: str | None) -> dict[str, str]:
        return {"scopes": text or "", "scopes_key": scopes_key(text)}

    def counted_scopes(self, text: str | None) -> str:
        """Keyed by digest: an index key holds at most 3072 bytes."""
        return scopes_key(text)

    def scopes_is(self, tasks: sa.Table, null: bool) -> list[t.Any]:
        """Through the indexed digest, then exactly."""
        c = tasks.c
        same = c.scopes.is_(None) if null else c.scopes == sa.bindparam("scopes")
        return [c.scopes_key == sa.bindparam("scopes_key"), same]

    def page_after(self, tasks: sa.Table, stamp: int, last_id: str) -> list[t.Any]:
        """MySQL ranges on a plain bound, not on a row comparison: both."""
        return [*super().page_after(tasks, stamp, last_id), tasks.c.status_ts <= stamp]

    # -- trims

    def build_trim(self, host: StoreHost, tier: Tier) -> t.Any:
        """The candidates, read without locks (:meth:`trim` deletes them)."""
        return self.oldest_terminal(host, tier)

    def trim(self, host: StoreHost, tier: Tier, params: dict[str, t.Any]) -> list[str]:
        """The candidates by a read that takes no lock (one round trip, usually empty); then per
        chunk one short transaction locks them ``SKIP LOCKED`` (a row another trim holds is that
        trim's to delete) before any count row is touched, deletes them by primary key and the
        owner's orphan configs. A trim takes its task rows first, never waits on a task row,
        and takes its tier's count row last, so trims and settles never wait in a cycle."""
        c, pc = host.tasks.c, host.push_configs.c
        oldest = self.trim_statement(host, tier)
        rows, _ = host.statements.execute(("trim", *shape(tier)), oldest, params)
        candidates = [row[0] for row in rows]
        doomed: list[str] = []
        skip = skip_locked(self.engine.dialect)
        for chunk in chunks(candidates):
            if host.statements.driver is not None and len(chunk) <= MULTI_ROWS:
                trimmed = self._trim_chunk(host, tier, chunk, skip)
                if trimmed is not None:
                    doomed.extend(trimmed)
                    continue
            with host.statements.tx() as conn:
                locked = sa.select(c.id).where(c.id.in_(chunk), c.state.in_(TERMINAL_STATES_SORTED))
                ids = list(conn.execute(locked.with_for_update(skip_locked=skip)).scalars())
                if not ids:
                    continue
                # One primary-key DELETE per row: an IN list may be planned as a scan that
                # waits on rows another trim holds while this one holds the count row.
                conn.execute(self._delete_one(host), [{"doomed": task_id} for task_id in ids])
                alive = sa.select(c.id).where(c.id == pc.task_id).exists()
                conn.execute(host.push_configs.delete().where(pc.owner == tier.owner, ~alive))
            doomed.extend(ids)
        return doomed

    def _delete_one(self, host: StoreHost) -> t.Any:
        statement = self._built.get("delete_one")
        if statement is None:
            statement = host.tasks.delete().where(host.tasks.c.id == sa.bindparam("doomed"))
            self._built["delete_one"] = statement
        return statement

    def _trim_chunk(
        self, host: StoreHost, tier: Tier, chunk: list[str], skip: bool
    ) -> list[str] | None:
        """:meth:`trim`'s transaction for one chunk, on the DBAPI cursor (statements compiled
        once per chunk size); None: it must go through SQLAlchemy."""
        c, pc = host.tasks.c, host.push_configs.c
        n = len(chunk)

        def locking() -> t.Any:
            listed: list[t.Any] = [sa.bindparam(f"id_{i}") for i in range(n)]
            locked = sa.select(c.id).where(c.id.in_(listed), c.state.in_(TERMINAL_LITERALS))
            return locked.with_for_update(skip_locked=skip)

        def orphans() -> t.Any:
            alive = sa.select(c.id).where(c.id == pc.task_id).exists()
            return host.push_configs.delete().where(pc.owner == sa.bindparam("owner"), ~alive)

        lock = host.statements.plain_of(("trim_lock", n), locking)
        delete = host.statements.plain_of("delete_one", self._delete_one(host))
        orphan = host.statements.plain_of("orphans", orphans)
        driver = host.statements.driver
        if driver is None or lock is None or delete is None or orphan is None:
            return None
        with driver.transaction() as tx:
            ids = [row[0] for row in tx.run(lock, {f"id_{i}": v for i, v in enumerate(chunk)})]
            if ids:
                # One primary-key DELETE per row (as above).
                tx.many(delete, [{"doomed": task_id} for task_id in ids])
                tx.run(orphan, {"owner": tier.owner})
        return ids
