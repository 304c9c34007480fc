"""Task counts per tier, kept by triggers: ListTasks' ``totalSize`` in O(tiers).

``<prefix>task_counts`` holds one row per (owner, tenant, scope set) with the number of task rows
in it. Statement-level triggers on the task table add each statement's inserted rows and
subtract its deleted ones (and a TRUNCATE empties it), in the same transaction, so the count is
exact whoever writes the table: the store, another replica, or SQL run by hand. Tasks never move
between tiers (the store keeps owner, tenant and scope set on update), so updates need no trigger.

Keys are ``''`` for no tenant / a session's scope set, ``'+' || tenant`` and the scope-set JSON
otherwise, so a NULL and an empty string never share a row.

On MySQL/MariaDB the triggers are row-level (``sql_mysql.install_counts``) and the scope-set key
is its SHA-256 (an index key holds at most 3072 bytes).
"""

from __future__ import annotations

import typing as t

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..protocol.limits import MAX_KEY
from . import sql_mysql


def tenant_key(tenant: str | None) -> str:
    return "" if tenant is None else "+" + tenant


def counts_table(metadata: sa.MetaData, prefix: str) -> sa.Table:
    return sa.Table(
        f"{prefix}task_counts",
        metadata,
        sa.Column("owner", sql_mysql.Exact(MAX_KEY), primary_key=True),
        sa.Column("tenant_key", sql_mysql.Exact(MAX_KEY + 1), primary_key=True),
        sa.Column("scopes_key", sql_mysql.DIGEST_KEY, primary_key=True),
        sa.Column("tasks", sa.BigInteger, nullable=False),
        **sql_mysql.TABLE_OPTIONS,
    )


def function_name(prefix: str) -> str:
    return f"{prefix}count_tasks"


def install(conn: Connection, tasks: sa.Table, counts: sa.Table, prefix: str) -> None:
    """Create the triggers and fill the counts from the rows already there.

    Runs in the store's DDL transaction: ``CREATE TRIGGER`` locks the task table against
    writes until commit, so the backfill and the triggers see the same rows.
    """
    quote = conn.dialect.identifier_preparer.quote
    task_table, count_table = quote(tasks.name), quote(counts.name)
    function = quote(function_name(prefix))
    keys = "owner, COALESCE('+' || tenant, ''), COALESCE(scopes, '')"

    def upsert(sign: str, source: str) -> str:
        # Sorted, so concurrent statements lock count rows in one order (no deadlock).
        return (
            f"INSERT INTO {count_table} AS c (owner, tenant_key, scopes_key, tasks) "
            f"SELECT {keys}, {sign}count(*) FROM {source} GROUP BY 1, 2, 3 ORDER BY 1, 2, 3 "
            f"ON CONFLICT (owner, tenant_key, scopes_key) DO UPDATE SET tasks = c.tasks + "
            f"excluded.tasks"
        )

    conn.exec_driver_sql(
        f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        f"BEGIN\n"
        f"  IF TG_OP = 'INSERT' THEN {upsert('', 'new_rows')};\n"
        f"  ELSIF TG_OP = 'DELETE' THEN {upsert('-', 'old_rows')};\n"
        f"  ELSE DELETE FROM {count_table};\n"
        f"  END IF;\n"
        f"  RETURN NULL;\n"
        f"END $$"
    )
    triggers: list[tuple[str, str]] = [
        ("insert", "AFTER INSERT ON {t} REFERENCING NEW TABLE AS new_rows"),
        ("delete", "AFTER DELETE ON {t} REFERENCING OLD TABLE AS old_rows"),
        ("truncate", "AFTER TRUNCATE ON {t}"),
    ]
    for name, when in triggers:
        trigger = quote(f"{tasks.name}_count_{name}")
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {trigger} ON {task_table}")
        conn.exec_driver_sql(
            f"CREATE TRIGGER {trigger} {when.format(t=task_table)} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
        )
    conn.exec_driver_sql(f"DELETE FROM {count_table}")
    conn.exec_driver_sql(upsert("", task_table))


def uninstall(conn: Connection, prefix: str) -> None:
    """Drop the trigger function (the triggers go with the task table)."""
    function = conn.dialect.identifier_preparer.quote(function_name(prefix))
    conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {function}() CASCADE")


def total(counts: sa.Table, owner: str, tenant: str | None | t.Any, scopes_key: t.Any) -> t.Any:
    """``SUM(tasks)`` of the owner's tiers, narrowed to a tenant and a scope set when given
    (pass ``ANY`` to leave one open; ``scopes_key`` is the dialect's ``counted_scopes``)."""
    c = counts.c
    query = sa.select(sa.func.coalesce(sa.func.sum(c.tasks), 0)).where(c.owner == owner)
    if tenant is not ANY:
        query = query.where(c.tenant_key == tenant_key(tenant))
    if scopes_key is not ANY:
        query = query.where(c.scopes_key == scopes_key)
    return query


#: ``total``'s "any tenant" / "any scope set".
ANY: t.Final = object()
