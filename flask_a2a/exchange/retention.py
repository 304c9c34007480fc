"""Retention per tier: terminal tasks deleted past a bound, paused tasks canceled past another.

A tier is one owner's tasks made in one tenant under one scope set; one tier's activity never
counts, deletes or cancels another tier's tasks. The terminal bound goes through a store's
``trim_terminal_tasks`` when it has one (both built-in stores do); the paused bound cancels
through the task writer, so it holds on any store.

A store whose trim is a database round trip declares ``deferred_trims = True`` (the SQL store):
the trim after a settle then runs on a background thread (a greenlet under gevent), starting
``GATHER_SECONDS`` (10 ms) after the settle instead of before the run's answer. Settles in one
tier share it: those arriving before it starts, or while it runs, count themselves on the tier,
and one more trim, starting after all of them, covers the latter. What waits is one counter
per tier, for at most ``MAX_DEFERRED_TIERS`` tiers; past that a settle trims its tier itself,
as before. So each settle is still followed by a trim of its tier, at most 10 ms and one trim
after the answer, and ListTasks starts and waits for the trims owed to the caller's answered
settles (:meth:`Retention.settled`), so a caller never lists its tier past the bound. Other
stores (the memory store's trim is O(1) under the bound) trim inline, as part of the settle.
"""

from __future__ import annotations

import logging
import threading
import typing as t

from ..config import Settings
from ..ops.metrics import recorder
from ..protocol.model import INTERRUPTED_STATES, TERMINAL_STATES, TaskState, Tier
from ..store.base import (
    ListQuery,
    StaleTaskError,
    Store,
    TaskRecord,
    holds_nothing_at_rest,
    offers,
    optional,
)
from ..store.rounds import RoundFailed, Rounds
from .writer import TaskWriter, finalize_failed

log = logging.getLogger("flask_a2a")

#: Tiers whose trim may wait for a background thread at once; past it a settle trims inline.
MAX_DEFERRED_TIERS: t.Final = 256
#: A deferred trim starts this long after the settle that asked for it, so the tier's next
#: settles (a sequential caller's next few requests, or a burst) share it; a ListTasks of the
#: owner starts it at once.
GATHER_SECONDS = 0.01


class _Deferred:
    """One tier's background trim: settles that asked for it, and how many a finished trim
    covered (a trim covers every settle counted before it started)."""

    __slots__ = ("asked", "covered", "hurry")

    def __init__(self) -> None:
        self.asked = 1
        self.covered = 0
        #: Set by a caller waiting for the trim (``settled``): it starts now, not after the wait.
        self.hurry = threading.Event()


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
        #: Tiers whose trim runs (or is due) on a background thread (``deferred_trims`` stores).
        self._deferred: dict[Tier, _Deferred] = {}
        self._lock = threading.Lock()
        #: Notified as each background trim finishes (``settled`` waits on it).
        self._trimmed = threading.Condition(self._lock)
        #: The store's trim and whether it is deferred, read at the first settle.
        self._trimmer: tuple[t.Callable[[Tier, int], list[str]] | None, str] | None = None

    def after_final(self, record: TaskRecord) -> None:
        """After a settle or pause in a tier, hold that tier to its bound."""
        if record.state in TERMINAL_STATES:
            self.trim_terminal(record)
        elif record.state in INTERRUPTED_STATES:
            self.trim_paused(record)

    def trim_tier(self, record: TaskRecord) -> None:
        """Hold ``record``'s tier to both bounds now (``flask a2a trim``)."""
        self.trim_paused(record)
        self.trim_terminal(record, now=True)

    def settled(self, owner: str, timeout: float = 10.0) -> bool:
        """Wait until the background trims owed to the settles of ``owner``'s tiers so far in
        this process are done (a caller listing its tasks after an answer sees its tiers
        within their bounds). Later settles are not waited for. False: timed out."""
        if not self._deferred:  # nothing deferred (the usual case): no lock
            return True
        with self._lock:
            owed = [(d, d.asked) for tier, d in self._deferred.items() if tier.owner == owner]
            for deferred, _ in owed:
                deferred.hurry.set()
            return self._trimmed.wait_for(
                lambda: all(d.covered >= asked for d, asked in owed), timeout
            )

    def flush(self, timeout: float) -> bool:
        """Start every waiting background trim now and wait up to ``timeout`` for them
        (shutdown: no trim is left running on a connection after the exchange stops).
        False: timed out."""
        if not self._deferred:
            return True
        with self._lock:
            owed = [(d, d.asked) for d in self._deferred.values()]
            for deferred, _ in owed:
                deferred.hurry.set()
            return self._trimmed.wait_for(
                lambda: all(d.covered >= asked for d, asked in owed), timeout
            )

    def _store_trim(self) -> tuple[t.Callable[[Tier, int], list[str]] | None, str]:
        """The store's trim, and how it runs: ``"deferred"`` (a round trip: after the answer),
        ``"inline"`` (in process memory: O(1) under the bound, called directly) or ``"rounds"``
        (shared by concurrent settles in the tier, before their answers)."""
        if self._trimmer is None:
            store = self.store
            trimmer = (
                optional(store).trim_terminal_tasks
                if offers(store, "trim_terminal_tasks")
                else None
            )
            how = "rounds"
            if getattr(self.store, "deferred_trims", False):
                how = "deferred"
            elif holds_nothing_at_rest(self.store):
                how = "inline"
            self._trimmer = (trimmer, how)
        return self._trimmer

    def trim_terminal(self, record: TaskRecord, now: bool = False) -> None:
        keep = self.settings.terminal_task_retention
        if keep < 0:
            return
        trimmer, how = self._store_trim()
        if trimmer is not None and how == "deferred" and not now and self._defer(record.tier):
            return
        if trimmer is not None and how == "inline":
            deleted = trimmer(record.tier, keep)
        elif trimmer is not None:
            tier = record.tier
            try:  # only the settle that trimmed gets the ids: each is forgotten once
                deleted = self.rounds.run(tier, None, lambda _: trimmer(tier, keep)) or []
            except RoundFailed:
                return  # the settle that ran the trim logs its error
        else:
            query = ListQuery(
                owner=record.owner,
                tenant=record.tenant,
                scopes=record.scopes,
                scoped=True,
                states=TERMINAL_STATES,
                limit=100_000,
            )
            rows = [r for r in self.store.list_tasks(query).records if r.tier == record.tier]
            deleted = [r.task.id for r in rows[keep:]]
            self.store.delete_tasks(deleted)
        self._forget(deleted)

    def _forget(self, deleted: list[str]) -> None:
        self.metrics.trimmed("deleted", len(deleted))
        for task_id in deleted:
            self.forget(task_id)

    def _defer(self, tier: Tier) -> bool:
        """Leave ``tier``'s trim to a background thread; False: too many tiers wait already."""
        with self._lock:
            deferred = self._deferred.get(tier)
            if deferred is not None:  # running: one more trim after it covers this settle
                deferred.asked += 1
                return True
            if len(self._deferred) >= MAX_DEFERRED_TIERS:
                return False
            deferred = self._deferred[tier] = _Deferred()
        try:
            threading.Thread(
                target=self._trim_behind, args=(tier, deferred), name="a2a-retention", daemon=True
            ).start()
        except BaseException:
            self._done(tier, deferred)
            raise
        return True

    def _done(self, tier: Tier, deferred: _Deferred) -> None:
        """The tier has no background trim any more: whoever waits for it stops waiting."""
        with self._lock:
            if self._deferred.get(tier) is deferred:
                del self._deferred[tier]
            deferred.covered = deferred.asked
            self._trimmed.notify_all()

    def _trim_behind(self, tier: Tier, deferred: _Deferred) -> None:
        """Trim ``tier`` until no settle came in while its last trim ran."""
        trimmer = self._store_trim()[0]
        assert trimmer is not None
        try:
            while True:
                deferred.hurry.wait(GATHER_SECONDS)  # the tier's next settles join this trim
                with self._lock:  # this trim covers every settle counted so far
                    asked = deferred.asked
                try:
                    self._forget(trimmer(tier, self.settings.terminal_task_retention))
                except Exception as exc:  # the next settle in the tier tries again
                    finalize_failed(
                        "retention after a settle",
                        "the tier is trimmed at its next settle",
                        exc,
                        {},
                    )
                with self._lock:
                    deferred.covered = asked
                    self._trimmed.notify_all()
                    if deferred.asked == asked:  # no settle came meanwhile: the tier is done
                        del self._deferred[tier]
                        return
        finally:
            self._done(tier, deferred)

    def trim_paused(self, record: TaskRecord) -> None:
        keep = self.settings.paused_task_retention
        if keep < 0:
            return
        query = ListQuery(
            owner=record.owner,
            tenant=record.tenant,
            scopes=record.scopes,
            scoped=True,
            states=INTERRUPTED_STATES,
            limit=keep + 256,
        )
        rows = [r for r in self.store.list_tasks(query).records if r.tier == record.tier]
        for old in rows[keep:]:
            try:
                self.writer.settle(old, TaskState.CANCELED, "canceled: too many paused tasks")
            except StaleTaskError:
                continue
            self.metrics.trimmed("canceled", 1)
