"""An owner's data in the SQL store as a whole: every owner (``flask a2a trim`` walks them),
one owner's tasks and push configs exported, and erased."""

from __future__ import annotations

import json
import typing as t

import sqlalchemy as sa

from .base import record_json
from .sql_rows import read_record

if t.TYPE_CHECKING:
    from .sql_statements import Statements


class OwnerRows:
    """The owners' rows in ``tasks`` and ``push_configs`` (and ``counts``, if kept)."""

    def __init__(
        self,
        statements: Statements,
        tasks: sa.Table,
        push_configs: sa.Table,
        counts: sa.Table | None,
    ) -> None:
        self.statements = statements
        self.tasks = tasks
        self.push_configs = push_configs
        self.counts = counts

    def owners(self) -> list[str]:
        """Every owner holding a task."""
        with self.statements.one() as conn:
            query = sa.select(self.tasks.c.owner).distinct().order_by(self.tasks.c.owner)
            return list(conn.execute(query).scalars())

    def export(self, owner: str) -> dict[str, list[dict[str, t.Any]]]:
        """The owner's tasks (oldest status first) and push configs, read in one transaction."""
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
            "tasks": [record_json(read_record(row)) for row in rows],
            "pushConfigs": [json.loads(body) for body in bodies],
        }

    def erase(self, owner: str) -> int:
        """Delete the owner's push configs, tasks and counts; how many configs and tasks went."""
        with self.statements.tx() as conn:
            configs = conn.execute(
                self.push_configs.delete().where(self.push_configs.c.owner == owner)
            ).rowcount
            tasks = conn.execute(self.tasks.delete().where(self.tasks.c.owner == owner)).rowcount
            if self.counts is not None:  # the owner's (now zero) counts go too
                conn.execute(self.counts.delete().where(self.counts.c.owner == owner))
        return int(configs) + int(tasks)
