"""The SQL store's push configs: one row per (task, config id), in the order they were set.

A config's row holds its stored JSON (``dump_stored_push_config``) and a ``seq`` that orders a
task's configs: microseconds of the wall clock, or one past the task's last, whichever is
larger, so a config set again goes last.
"""

from __future__ import annotations

import json
import time
import typing as t

import sqlalchemy as sa

from ..protocol.model import PushConfig
from ..protocol.wire import dump_stored_push_config, push_config_from_wire

if t.TYPE_CHECKING:
    from .sql_statements import Statements


class PushConfigRows:
    """The configs held in ``push_configs``."""

    def __init__(self, statements: Statements, push_configs: sa.Table) -> None:
        self.statements = statements
        self.push_configs = push_configs

    def put(self, owner: str, config: PushConfig, keep: int) -> PushConfig:
        """Store ``config`` (replacing one with its id) and keep the task's newest ``keep``."""
        pc = self.push_configs.c
        body = json.dumps(dump_stored_push_config(config), separators=(",", ":"))
        with self.statements.tx() as conn:
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

    def get(self, task_id: str, config_id: str) -> PushConfig | None:
        pc = self.push_configs.c
        with self.statements.one() as conn:
            body = conn.execute(
                sa.select(pc.body).where(pc.task_id == task_id, pc.id == config_id)
            ).scalar()
        return None if body is None else push_config_from_wire(json.loads(body))

    def of_task(self, task_id: str) -> list[PushConfig]:
        """The task's configs, in the order they were set."""
        pc = self.push_configs.c
        with self.statements.one() as conn:
            bodies = conn.execute(
                sa.select(pc.body).where(pc.task_id == task_id).order_by(pc.seq)
            ).scalars()
            return [push_config_from_wire(json.loads(body)) for body in bodies]

    def delete(self, task_id: str, config_id: str) -> bool:
        pc = self.push_configs.c
        with self.statements.one() as conn:
            result = conn.execute(
                self.push_configs.delete().where(pc.task_id == task_id, pc.id == config_id)
            )
        return bool(result.rowcount)
