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
    from sqlalchemy.engine import Connection

    from .sql import SQLStore

#: Alembic's ``include_name(name, type_, parent_names) -> bool`` hook.
IncludeName = t.Callable[[str | None, str, t.Mapping[str, str | None]], bool]


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


def _declared(bind: Connection, prefix: str) -> SQLStore:
    """The store's table declarations for this connection's dialect; touches no table."""
    from .sql import SQLStore

    return SQLStore(bind.engine, prefix, create_tables=False)


def create_tables(bind: Connection, prefix: str = "a2a_") -> None:
    """In a revision's ``upgrade()``: ``create_tables(op.get_bind())``.

    Creates what the store needs and is missing, in the migration's transaction; idempotent,
    so it also adopts tables an earlier store already made.
    """
    _declared(bind, prefix).create_tables(bind)


def drop_tables(bind: Connection, prefix: str = "a2a_") -> None:
    """In a revision's ``downgrade()``: ``drop_tables(op.get_bind())`` (every task is lost)."""
    _declared(bind, prefix).drop_tables(bind)
