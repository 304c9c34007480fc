"""The SQL store's reads of many tasks: a ListTasks page with its ``totalSize``, and the
replica poll's versions.

A page filters owner, tenant and scope set in SQL and is a keyset range on (status timestamp,
id); ``totalSize`` is the tiers' trigger-kept counts (``sql_counts``) when the list is not
filtered further and the database keeps them, else an indexed ``COUNT``. So a page costs
O(page).
"""

from __future__ import annotations

import typing as t

import sqlalchemy as sa

from ..protocol.model import TaskState
from . import sql_counts
from .base import ListQuery, TaskPage
from .sql_dialect import SQLDialect, chunks, exact, micros, scope_text
from .sql_rows import read_record

if t.TYPE_CHECKING:
    from .sql_statements import Statements


class Listing:
    """Reads of many task rows from ``tasks`` (``counts``: the tiers' counts, if kept)."""

    def __init__(
        self,
        dialect: SQLDialect,
        statements: Statements,
        tasks: sa.Table,
        counts: sa.Table | None,
    ) -> None:
        self.dialect = dialect
        self.statements = statements
        self.tasks = tasks
        self.counts = counts

    def page(self, query: ListQuery) -> TaskPage:
        """One page of ``query``'s tasks, newest status first, and how many there are."""
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
        records = [read_record(row) for row in rows[: query.limit]]
        more = len(rows) > query.limit
        last = records[-1].task if records else None
        next_cursor = (last.status.timestamp, last.id) if more and last is not None else None
        return TaskPage(records, count, next_cursor)

    def versions(self, task_ids: list[str]) -> dict[str, tuple[int, TaskState]]:
        """Version and state of each task still stored (one query per 500 ids)."""
        c = self.tasks.c
        out: dict[str, tuple[int, TaskState]] = {}
        with self.statements.one() as conn:
            for chunk in chunks(task_ids):
                query = sa.select(c.id, c.version, c.state).where(c.id.in_(chunk))
                for row in conn.execute(query):
                    out[row.id] = (row.version, TaskState(row.state))
        return out
