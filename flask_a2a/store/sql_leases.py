"""The run lease columns of the SQL store's task rows (``leases`` says what a lease is):
renewed, taken, released, and found lapsed.

A task's creation takes its lease in the same INSERT and the write that settles or pauses it
clears it (``sql``); what is here is the rest of a lease's life, driven by
``exchange/run_leases.py``.
"""

from __future__ import annotations

import typing as t

import sqlalchemy as sa

from . import leases
from .leases import LEASED_STATES, LapsedRun
from .sql_dialect import chunks

if t.TYPE_CHECKING:
    from .sql_statements import Statements

_LEASED_STATES: t.Final = sorted(s.value for s in LEASED_STATES)


class LeaseRows:
    """The leases held in ``tasks``' rows."""

    def __init__(self, statements: Statements, tasks: sa.Table) -> None:
        self.statements = statements
        self.tasks = tasks

    def renew(self, task_ids: list[str], until: int) -> None:
        """Push the leases of ``task_ids`` to ``until`` (micros), but of tasks no longer
        running."""
        c = self.tasks.c
        with self.statements.one() as conn:
            for chunk in chunks(task_ids):
                conn.execute(
                    self.tasks.update()
                    .where(c.id.in_(chunk), c.state.in_(_LEASED_STATES))
                    .values(lease_until=until, run_by=leases.holder())
                )

    def take(self, task_id: str, until: int, deadline: int | None) -> None:
        """Take the lease of ``task_id`` if it is running."""
        c = self.tasks.c
        with self.statements.one() as conn:
            conn.execute(
                self.tasks.update()
                .where(c.id == task_id, c.state.in_(_LEASED_STATES))
                .values(lease_until=until, run_deadline=deadline, run_by=leases.holder())
            )

    def release(self, task_ids: list[str]) -> None:
        """End the leases of ``task_ids``, whatever their state."""
        c = self.tasks.c
        with self.statements.one() as conn:
            for chunk in chunks(task_ids):
                conn.execute(
                    self.tasks.update()
                    .where(c.id.in_(chunk))
                    .values(lease_until=None, run_deadline=None)
                )

    def lapsed(self, now: int, limit: int) -> list[LapsedRun]:
        """Up to ``limit`` leases that ended before ``now`` (micros), oldest first."""
        c = self.tasks.c
        query = (
            sa.select(c.id, c.run_by, c.run_deadline)
            .where(c.lease_until < now)
            .order_by(c.lease_until)
            .limit(limit)
        )
        with self.statements.one() as conn:
            return [LapsedRun(row[0], row[1], row[2]) for row in conn.execute(query)]
