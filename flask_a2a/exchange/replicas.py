"""Several replicas on one shared store: noticing what another process wrote to our runs.

The bus is per process, so a cancel served by replica B never reaches the streams on replica A
through it. While A runs handlers it polls the store (every ``A2A_REPLICA_POLL_INTERVAL``): a
terminal state it did not write cuts the run and is sent to A's own subscribers; a row that is
gone (settled elsewhere, then trimmed by retention) cancels the run and ends its streams; a
newer row still running holds follow-ups sent through another replica, handed to the run.
Only stores that declare ``shared = True`` (the SQL store) are watched.
"""

from __future__ import annotations

import logging
import threading
import time
import typing as t

from ..ops.log_fields import fields
from ..protocol import jsonrpc, wire
from ..protocol.errors import TaskCanceled
from ..protocol.model import TaskState, TaskStatusUpdateEvent
from ..protocol.scrub import scrub
from ..store.base import offers, optional
from .bus import Bus, BusEvent
from .run_state import Run
from .writer import is_final

if t.TYPE_CHECKING:
    from ..config import Settings
    from ..store.base import Store, TaskRecord
    from .runner import Runner

log = logging.getLogger("flask_a2a")


def is_shared(store: object) -> bool:
    """The store is shared with other processes (declares ``shared = True``)."""
    return bool(getattr(store, "shared", False))


def announce(bus: Bus, record: TaskRecord) -> None:
    """Publish a stored state to this process's streams as a status update.

    Streams skip events at or below the version they hold, so announcing a state that was
    already published here is harmless.
    """
    task = record.task
    event = TaskStatusUpdateEvent(task.id, task.context_id, task.status)
    result_json = jsonrpc.encode(wire.dump_event(event))
    bus.publish(BusEvent(task.id, record.version, event, result_json, is_final(record.state)))


class ReplicaHost(t.Protocol):
    """What the watch uses of its exchange (``methods.Exchange``, which builds the watch: this
    module does not name it back)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def store(self) -> Store: ...
    @property
    def runner(self) -> Runner: ...
    @property
    def bus(self) -> Bus: ...
    def live_runs(self) -> list[Run]: ...
    def forget(self, task_id: str, *, local: bool = False) -> None: ...


class ReplicaWatch:
    """One background loop per exchange, alive while this process has runs."""

    def __init__(self, exchange: ReplicaHost) -> None:
        self.exchange = exchange
        self.interval = max(0.01, exchange.settings.replica_poll_interval)
        self._lock = threading.Lock()
        self._running = False

    def watch(self) -> None:
        """A run started: make sure the loop is polling (and a shared bus is listening)."""
        self.exchange.bus.listen()
        with self._lock:
            if self._running:
                return
            self._running = True
        self.exchange.runner.spawn(self._loop)

    def _loop(self) -> None:
        while True:
            time.sleep(self.interval)
            with self._lock:
                runs = self.exchange.live_runs()
                if not runs:
                    self._running = False
                    return
            try:
                self.check(runs)
            except Exception as exc:  # a store outage must not end the watch
                log.error("a2a: replica poll failed: %s", scrub(repr(exc)))

    def check_now(self, run: Run) -> None:
        """The bus announced a foreign write to ``run``'s task: check it without waiting."""
        try:
            self.check([run])
        except Exception as exc:  # the poll loop tries again
            log.error(
                "a2a: replica check failed: %s",
                scrub(repr(exc)),
                extra=fields(run.task_id, run.record.skill),
            )

    def check(self, runs: list[Run]) -> None:
        """Compare each run's last write with the stored row; act on what others wrote."""
        runs = [run for run in runs if run.record.version > 0]  # held tasks are ours alone
        if not runs:
            return
        store = self.exchange.store
        versions: t.Callable[[list[str]], dict[str, tuple[int, TaskState]]] | None
        versions = optional(store).task_versions if offers(store, "task_versions") else None
        stored = versions([run.task_id for run in runs]) if versions is not None else None
        for run in runs:
            if run.done.is_set():
                continue
            if stored is not None:
                found = stored.get(run.task_id)
                if found is not None and found[0] <= run.record.version:
                    continue
            record = store.get_task(run.task_id)
            if record is None:
                self._gone(run)
            elif record.version > run.record.version and record.state.terminal:
                self._settled_elsewhere(run, record)
            elif record.version > run.record.version and not is_final(record.state):
                run.adopt(record)  # follow-ups another replica wrote: the run's to receive

    def _settled_elsewhere(self, run: Run, record: TaskRecord) -> None:
        with run.lock:
            if run.done.is_set() or record.version <= run.record.version:
                return  # this process wrote it after all
            run.cancelled = True
            run.record = record
        if run.handle is not None and run.started:
            run.handle.kill(TaskCanceled)
        announce(self.exchange.bus, record)
        run.done.set()

    def _gone(self, run: Run) -> None:
        with run.lock:
            if run.done.is_set():
                return
            run.cancelled = True
        self.exchange.forget(run.task_id)
        run.done.set()

    def finished(self, run: Run) -> None:
        """A run ended: if a foreign write cut it (a stale commit), tell the local streams."""
        if run.cancelled and not run.timed_out and is_final(run.record.state):
            announce(self.exchange.bus, run.record)
