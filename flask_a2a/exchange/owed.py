"""Settles owed to tasks whose run ended without storing its last state.

A run's last write can fail even after the run tried it again on a fresh connection
(``run_life.py``): the database is down, or a cancel's write failed after its run was cut. The task
must not stay WORKING with no run behind it, and only this process knows that no run is: so
the task is remembered here and settled (FAILED "internal error", or what was owed) by the next
try that reaches the store — every ``A2A_REPLICA_POLL_INTERVAL``, and at once after any write
that succeeds. A task already terminal (or gone) when the try comes is left as it is. If the
process ends before the store answers again, the task stays as last stored, as after a crash.
"""

from __future__ import annotations

import logging
import threading
import typing as t

from ..ops.log_fields import fields
from ..protocol.model import TaskState
from ..protocol.scrub import scrub
from ..store.base import StaleTaskError
from .writer import TaskWriter

if t.TYPE_CHECKING:
    from .runner import Runner, Timer

log = logging.getLogger("flask_a2a")

#: The status text of a task whose run could not store its result.
INTERNAL_ERROR: t.Final = "internal error"
#: Owed settles kept at most; past it the oldest is given up (logged).
MAX_OWED: t.Final = 10_000
#: States a task may be left in by a run that could not settle it: only those are settled.
_OPEN: t.Final = frozenset({TaskState.SUBMITTED, TaskState.WORKING})


class OwedSettles:
    """Tasks owed a settle, tried again until the store takes it."""

    def __init__(
        self,
        writer: TaskWriter,
        runner: Runner,
        interval: float,
        running: t.Callable[[str], bool],
    ) -> None:
        self.writer = writer
        self.runner = runner
        self.interval = max(0.01, interval)
        #: A live run in this process still owns the task: its own writes come first.
        self.running = running
        self._owed: dict[str, tuple[TaskState, str]] = {}
        self._lock = threading.Lock()
        self._timer: Timer | None = None
        self._busy = False
        self._closed = False

    def owe(self, task_id: str, state: TaskState = TaskState.FAILED,
            text: str = INTERNAL_ERROR) -> None:  # fmt: skip
        with self._lock:
            if len(self._owed) >= MAX_OWED and task_id not in self._owed:
                dropped = next(iter(self._owed))
                del self._owed[dropped]
                log.error(
                    "a2a: too many owed settles; task %s stays as stored",
                    dropped,
                    extra=fields(dropped),
                )
            self._owed[task_id] = (state, text)
        log.warning("a2a: task %s could not be settled; it is settled %s once the store "
                    "answers", task_id, state.value, extra=fields(task_id))  # fmt: skip
        self._schedule()

    def owed(self) -> list[str]:
        with self._lock:
            return list(self._owed)

    def kick(self) -> None:
        """A write succeeded: try what is owed now (in the background; cheap when nothing)."""
        if self._owed and not self._busy:
            self.runner.spawn(self.settle_owed)

    def close(self) -> None:
        """Shutdown: one last try, then no timer any more."""
        self.settle_owed()
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _schedule(self) -> None:
        with self._lock:
            if self._timer is not None or not self._owed or self._closed:
                return
            self._timer = self.runner.call_later(self.interval, self._fire)

    def _fire(self) -> None:
        with self._lock:
            self._timer = None
        try:
            self.settle_owed()
        finally:
            self._schedule()

    def settle_owed(self) -> None:
        """Try each owed settle once; what the store still refuses waits for the next try."""
        with self._lock:
            if self._busy or not self._owed:
                return
            self._busy = True
            owed = list(self._owed.items())
        try:
            for task_id, (state, text) in owed:
                if self.running(task_id):
                    continue
                try:
                    self._settle(task_id, state, text)
                except Exception as exc:  # still down: the next try comes
                    log.error(
                        "a2a: an owed settle failed: %s", scrub(repr(exc)), extra=fields(task_id)
                    )
                    return
                with self._lock:
                    if self._owed.get(task_id) == (state, text):
                        del self._owed[task_id]
        finally:
            with self._lock:
                self._busy = False

    def _settle(self, task_id: str, state: TaskState, text: str) -> None:
        record = self.writer.store.get_task(task_id)
        if record is None or record.state not in _OPEN:
            return  # gone, settled, or paused for input since: nothing is owed any more
        try:
            self.writer.settle(record, state, text)
        except StaleTaskError:
            pass  # deleted meanwhile
