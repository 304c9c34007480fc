"""One handler run's state in this process: its flags, deadline, timer, lock and follow-ups.

``runs.Runs`` makes runs and ``run_life.RunLife`` ends them; the handler's
:class:`~.tasks.TaskContext` and the replica watch read and change this state.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import typing as t
from datetime import datetime, timedelta, timezone

from ..ops.log_fields import fields
from ..protocol.errors import A2AError
from ..protocol.model import Message, Role

if t.TYPE_CHECKING:
    from ..store.base import TaskRecord
    from .runner import RunHandle, Timer
    from .writer import WriteBound

log = logging.getLogger("flask_a2a")

#: Follow-ups a run keeps for ``receive()`` before dropping the oldest (they stay in history).
INBOX_LIMIT: t.Final = 256


class Run:
    """One handler run in this process: its cancel flags, deadline, timer and completion."""

    def __init__(self, record: TaskRecord, timeout: float, lock: t.ContextManager[t.Any]) -> None:
        self.task_id = record.task.id
        self.owner = record.owner
        self.record = record
        self.cancelled = False
        self.timed_out = False
        #: Set once the task reached a final state here or the run ended.
        self.done = threading.Event()
        #: Serializes this process's writes to the task, so bus order is version order.
        #: Re-entrant, made by the runner (``Runner.lock()``).
        self.lock = lock
        self.started = False
        self.handed_off = False
        #: The task (version 0, not written yet) must be written at its next change.
        self.write_due = False
        self.handle: RunHandle | None = None
        #: A run prepared to run in its request's greenlet (``RunLife.run_here``), until it does.
        self.body: t.Callable[[], None] | None = None
        #: The run's one timer: a held task's write once ``A2A_BLOCKING_WRITE_DELAY`` has
        #: passed, then (or else) the deadline.
        self.timer: Timer | None = None
        self.deadline_mono = time.monotonic() + timeout if timeout > 0 else float("inf")
        #: A stream's task, held until the handler's first change shows it (``reveal``).
        self.reveal = False
        #: The store's refusal of the run's writes, for the caller (``TaskNotStored.answer``).
        self.refusal: A2AError | None = None
        #: The run's writes share one bound while the store does not answer (set at launch).
        self.writes: WriteBound | None = None
        #: The run ended without its last write stored (owed: ``owed.py``).
        self.unsettled = False
        #: The handler answered with this message instead of the task (``reply()``).
        self.reply: Message | None = None
        #: Follow-ups the caller sent while the run runs, oldest first, for ``receive()``.
        self.inbox: collections.deque[Message] = collections.deque(maxlen=INBOX_LIMIT)
        # Made at the first follow-up or receive(): most runs never get one (a Condition
        # costs more to make than the rest of a run's bookkeeping).
        self._inbox_ready: threading.Condition | None = None
        #: The ids of the messages in the task's history the run knows of (from the first
        #: follow-up on: until then, the history of the run's own record).
        self._known: set[str] | None = None

    @property
    def deadline(self) -> datetime | None:
        """When this run times out (timezone.utc); ``None`` when runs are unbounded."""
        if self.deadline_mono == float("inf"):
            return None
        return datetime.now(timezone.utc) + timedelta(seconds=self.deadline_mono - time.monotonic())

    @property
    def inbox_ready(self) -> threading.Condition:
        """Signalled when a follow-up lands in :attr:`inbox`."""
        ready = self._inbox_ready
        if ready is None:
            with self.lock:
                if self._inbox_ready is None:
                    self._inbox_ready = threading.Condition(threading.Lock())
                ready = self._inbox_ready
        return ready

    def adopt(self, record: TaskRecord) -> None:
        """``record`` is newer than the run's (a follow-up written here or on another
        replica): build on it from now on, and queue the caller's new messages."""
        with self.lock:
            if record.version <= self.record.version or self.done.is_set():
                return
            known = self._known
            if known is None:  # the run's own writes add agent messages only
                known = {m.message_id for m in self.record.task.history}
            self.record = record
            history = record.task.history
            new = [m for m in history if m.role is Role.USER and m.message_id not in known]
            self._known = {m.message_id for m in history}  # bounded by A2A_MAX_HISTORY
        if new:
            with self.inbox_ready:
                if len(self.inbox) + len(new) > INBOX_LIMIT:
                    log.warning(
                        "a2a: a run's unread follow-ups passed %d; oldest dropped",
                        INBOX_LIMIT,
                        extra=fields(self.task_id, record.skill),
                    )
                self.inbox.extend(new)
                self.inbox_ready.notify_all()
