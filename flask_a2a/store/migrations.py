"""Alembic / Flask-Migrate: keep autogenerate off the exchange's tables, make them in a migration.

The SQL store's tables are not in the host's models, so ``flask db migrate`` would drop them
(and warn about their expression indexes while reflecting them). :func:`include_name` tells
Alembic not to look at them at all: ``Migrate(app, db, include_name=include_name())``. Hosts
that want migrations to own the tables call :func:`create_tables` / :func:`drop_tables` from a
revision and set ``A2A_CREATE_TABLES = False``. Those run the very DDL the store runs when it
creates its tables itself (on PostgreSQL with the count triggers, which no ``MetaData`` can
describe), so both ways end in the same schema. docs/storage-and-scaling.md, "Migrations".
"""

from __future__ import annotations

import typing as t

if t.TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

    from .sql import SQLStore

#: Public (docs/api.md, "Where names live"); the rest of this module is private.
__all__ = ["create_tables", "drop_tables", "include_name", "table_names"]

#: Alembic's ``include_name(name, type_, parent_names) -> bool`` hook.
IncludeName = t.Callable[[t.Optional[str], str, t.Mapping[str, t.Optional[str]]], bool]


def table_names(prefix: str = "a2a_") -> frozenset[str]:
    """Every table the SQL store may own under ``prefix`` (the counts table: PostgreSQL only)."""
    return frozenset(f"{prefix}{name}" for name in ("tasks", "push_configs", "task_counts"))


def include_name(prefix: str = "a2a_", *, host: IncludeName | None = None) -> IncludeName:
    """An Alembic ``include_name`` hook that skips the exchange's tables.

    Alembic asks it before reflecting a table, so autogenerate neither drops our tables nor
    reflects (and warns about) their indexes. ``host`` is the app's own hook, asked about
    everything else.
    """
    ours = table_names(prefix)

    def include(name: str | None, type_: str, parent_names: t.Mapping[str, str | None]) -> bool:
        if type_ == "table" and name in ours:
            return False
        return host(name, type_, parent_names) if host is not None else True

    return include


def _declared(bind: t.Any, prefix: str) -> SQLStore:
    """The store's table declarations for this connection's dialect; touches no table."""
    from .sql import SQLStore

    return SQLStore(bind.engine, prefix, create_tables=False, shared=True)


def create_tables(bind: Connection | Engine, prefix: str = "a2a_") -> None:
    """In a revision's ``upgrade()``: ``create_tables(op.get_bind())``; in a test fixture,
    after ``db.create_all()``: ``create_tables(db.engine)``.

    Creates what the store needs and is missing, in the migration's transaction (an engine:
    in a transaction of its own); idempotent, so it also adopts tables an earlier store made.
    In Alembic's offline mode (``flask db upgrade --sql``) it writes the DDL of the tables
    into the script instead, as for an empty database (nothing can be read there to adopt).
    """
    from sqlalchemy.engine import Engine

    if isinstance(bind, Engine):
        with bind.begin() as conn:
            _declared(conn, prefix).create_tables(conn)
        return
    offline = _offline(bind)
    if offline is not None:
        store = _declared(offline, prefix)
        store.metadata.create_all(offline, checkfirst=False)  # with the indexes
        if store.counts is not None:
            store.dialect.install_counts(offline, store.tasks, store.counts, prefix)
        return
    _declared(bind, prefix).create_tables(bind)


def drop_tables(bind: Connection, prefix: str = "a2a_") -> None:
    """In a revision's ``downgrade()``: ``drop_tables(op.get_bind())`` (every task is lost);
    offline, the script drops them."""
    offline = _offline(bind)
    if offline is not None:
        store = _declared(offline, prefix)
        store.metadata.drop_all(offline, checkfirst=False)
        store.dialect.uninstall_counts(offline, prefix)
        return
    _declared(bind, prefix).drop_tables(bind)


def _offline(bind: object) -> Connection | None:
    """Alembic's offline bind (a SQLAlchemy mock connection), made fit for the store's DDL
    (typed as the Connection it stands in for)."""
    from sqlalchemy.engine.mock import MockConnection

    if not isinstance(bind, MockConnection):
        return None
    return t.cast("Connection", _OfflineBind(bind))


class _OfflineBind:
    """What the store's DDL needs of a connection, over Alembic's offline bind: every
    statement goes into the script (none runs, none is read back)."""

    def __init__(self, mock: t.Any) -> None:
        import sqlalchemy as sa

        self._mock = mock
        self.dialect = mock.dialect
        self.engine = self  # the store reads its dialect and URL off the engine
        self.url = sa.engine.make_url(f"{mock.dialect.name}://")

    def execute(self, statement: t.Any, parameters: t.Any = None) -> None:
        if parameters:
            raise RuntimeError("offline DDL takes no parameters")  # nothing of ours passes any
        self._mock.execute(statement)

    def exec_driver_sql(self, sql: str, parameters: t.Any = None) -> None:
        import sqlalchemy as sa

        self.execute(sa.text(sql.replace(":", "\\:")), parameters)  # the text's own colons

    def _run_ddl_visitor(self, visitor: t.Any, element: t.Any, **kwargs: t.Any) -> None:
        self._mock._run_ddl_visitor(visitor, element, **kwargs)  # create_all / drop_all
