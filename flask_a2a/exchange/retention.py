"""Retention per tier: terminal tasks deleted past a bound, paused tasks canceled past another.

A tier is one owner's tasks made in one tenant under one scope set; one tier's activity never
counts, deletes or cancels another tier's tasks. The terminal bound goes through a store's
``trim_terminal_tasks`` when it has one (both built-in stores do); the paused bound cancels
through the task writer, so it holds on any store.
"""

from __future__ import annotations

import typing as t

from ..config import Settings
from ..ops.metrics import recorder
from ..protocol.model import INTERRUPTED_STATES, TERMINAL_STATES, TaskState, Tier
from ..store.base import ListQuery, StaleTaskError, Store, TaskRecord
from ..store.rounds import RoundFailed, Rounds
from .writer import TaskWriter


class Retention:
    """Holds tiers to ``A2A_TERMINAL_TASK_RETENTION`` and ``A2A_PAUSED_TASK_RETENTION``.

    :param forget: called with each deleted task's id (its local run and streams must end).
    """

    def __init__(
        self,
        settings: Settings,
        store: Store,
        writer: TaskWriter,
        forget: t.Callable[[str], None],
    ) -> None:
        self.settings = settings
        self.store = store
        self.writer = writer
        self.forget = forget
        #: Counts what the bounds removed (``a2a_retention_trimmed_tasks_total``).
        self.metrics = recorder(settings.metrics)
        #: Concurrent settles in one tier share a trim that starts after all of them.
        self.rounds: Rounds[Tier, None] = Rounds()

    def after_final(self, record: TaskRecord) -> None:
        """After a settle or pause in a tier, hold that tier to its bound."""
        if record.state in TERMINAL_STATES:
            self.trim_terminal(record)
        elif record.state in INTERRUPTED_STATES:
            self.trim_paused(record)

    def trim_tier(self, record: TaskRecord) -> None:
        """Hold ``record``'s tier to both bounds now (``flask a2a trim``)."""
        self.trim_paused(record)
        self.trim_terminal(record)

    def trim_terminal(self, record: TaskRecord) -> None:
        keep = self.settings.terminal_task_retention
        if keep < 0:
            return
        trimmer = getattr(self.store, "trim_terminal_tasks", None)
        if trimmer is not None:
            tier = record.tier
            try:  # only the settle that trimmed gets the ids: each is forgotten once
                deleted = self.rounds.run(tier, None, lambda _: trimmer(tier, keep)) or []
            except RoundFailed:
                return  # the settle that ran the trim logs its error
        else:
            query = ListQuery(
                owner=record.owner, tenant=record.tenant, scopes=record.scopes,
                scoped=True, states=TERMINAL_STATES, limit=100_000,
            )
            rows = [r for r in self.store.list_tasks(query).records if r.tier == record.tier]
            deleted = [r.task.id for r in rows[keep:]]
            self.store.delete_tasks(deleted)
        self.metrics.trimmed("deleted", len(deleted))
        for task_id in deleted:
            self.forget(task_id)

    def trim_paused(self, record: TaskRecord) -> None:
        keep = self.settings.paused_task_retention
        if keep < 0:
            return
        query = ListQuery(
            owner=record.owner, tenant=record.tenant, scopes=record.scopes, scoped=True,
            states=INTERRUPTED_STATES, limit=keep + 256,
        )
        rows = [r for r in self.store.list_tasks(query).records if r.tier == record.tier]
        for old in rows[keep:]:
            try:
                self.writer.settle(old, TaskState.CANCELED, "canceled: too many paused tasks")
            except StaleTaskError:
                continue
            self.metrics.trimmed("canceled", 1)
