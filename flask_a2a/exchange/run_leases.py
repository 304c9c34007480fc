"""Run leases: a task whose process died mid-run is settled FAILED by the processes left.

A run lives in the process that started it; ``kill -9``, the OOM killer or a lost node end it
with no last write. So every running task carries in the shared store who runs it and until
when (``store/leases.py``). This process renews the leases of all its runs in one statement
every :attr:`RunLeases.period` (a third of the lease: a run that is merely slow keeps it), and
every process sharing the store sweeps, as often (from its first exchange call on), for leases
that lapsed: each such task is
settled FAILED "the run's worker stopped" ("task timed out" past its run's deadline) in one
versioned write through the writer — exactly one process wins it, the event is published
(streams end, webhooks fire) and retention trims its tier as after any settle.

The lease is ``LEASE_PERIODS`` replica poll intervals (10 s by default), ``A2A_MIN_RUN_LEASE``
(2 s) at least; a dead run's task is settled between one lease and one lease plus one period
after its last renewal. A process that could not reach the store acts on no lapse until the
store has answered it for a whole lease again: after an outage every process first renews its
own runs' leases. Paused tasks (input / auth required) hold no lease; neither does a task handed
off to a job. The fleet's Redis leases (``fleet/limits.py``) are another thing: they count run
slots, not runs' lives.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import typing as t
import weakref

from ..config import Settings
from ..ops.log_fields import fields
from ..protocol.model import Message, TaskState
from ..protocol.scrub import scrub
from ..store import processes
from ..store.base import StaleTaskError, offers
from ..store.leases import LEASED_STATES, TIMED_OUT, WORKER_STOPPED, LapsedRun, LeaseTerms
from .replicas import ReplicaHost

if t.TYPE_CHECKING:
    from ..config import Settings
    from .calls import Call
    from .run_state import Run
    from .runner import Timer
    from .runs import Runs
    from .writer import TaskWriter

log = logging.getLogger("flask_a2a")

#: A lease lives this many ``A2A_REPLICA_POLL_INTERVAL`` s, and never less than
#: ``A2A_MIN_RUN_LEASE`` (2 s by default); it is renewed every third of it.
LEASE_PERIODS: t.Final = 10
#: Lapsed runs settled per sweep query, and queries per sweep at most.
SWEEP_BATCH: t.Final = 100
SWEEP_QUERIES: t.Final = 10


def supports_leases(store: object, settings: Settings) -> bool:
    """Run leases are on and the store, shared with other processes, keeps them (SQL)."""
    return (
        settings.run_leases
        and bool(getattr(store, "shared", False))
        and offers(store, "lapsed_runs")
    )


def _micros() -> int:
    return time.time_ns() // 1000


class LeaseHost(ReplicaHost, t.Protocol):
    """What the leases use of their exchange (``methods.Exchange``, which builds them: this
    module does not name it back): what the replica watch uses, and the runs and the writer."""

    @property
    def runs(self) -> Runs: ...
    @property
    def writer(self) -> TaskWriter: ...


class RunLeases:
    """This process's side of the run leases: renew ours, settle the lapsed, release handed-off."""

    def __init__(self, exchange: LeaseHost) -> None:
        self.exchange = exchange
        settings = exchange.settings
        #: Seconds a lease lives without renewal.
        self.ttl = max(settings.min_run_lease, LEASE_PERIODS * settings.replica_poll_interval)
        #: Seconds between renewals, and between sweeps.
        self.period = self.ttl / 3
        # The store itself (not the exchange's lazy handle on it) writes a new run's lease.
        pick = getattr(type(exchange.store), "pick", None)
        store = pick(exchange.store) if pick is not None else exchange.store
        store.lease_terms = LeaseTerms(self.ttl, settings.task_timeout)  # type: ignore[union-attr]
        self._lock = threading.Lock()
        self._timer: Timer | None = None
        self._closed = False
        #: When the store last failed this process (a sweep waits a lease after it).
        self._failed_at = float("-inf")
        self._failing = False
        #: Handed-off tasks whose lease is still to be released.
        self._release: set[str] = set()
        #: Sweeps this process made (each read the lapsed leases once at least).
        self.sweeps = 0
        self._started = False
        #: Set while no tick runs (``close`` waits for it).
        self._idle = threading.Event()
        self._idle.set()
        processes.on_fork(self)

    def forked(self, parent_pid: int, gunicorn: t.Any | None) -> None:
        """In a process forked after the exchange was made (a gunicorn worker of a
        ``--preload`` master): its own sweeps, from its own first call on."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._idle = threading.Event()
        self._idle.set()
        self._timer = None
        self._started = False

    def serving(self) -> None:
        """An exchange method is called: this process serves, so it sweeps (from now, then
        every period; a restarted process settles what it left at its first call). Not at
        construction: a process that forks after building the app (``--preload``) must not
        share the store's connections with a sweep of its own."""
        if self._started:
            return
        with self._lock:
            if self._started or self._closed:
                return
            self._started = True
        self._schedule(0.0)

    def served(self, method: t.Callable[[Call], t.Any]) -> t.Callable[[Call], t.Any]:
        """``method`` of the exchange's table, starting the sweeps at its first call."""

        def call(request: Call) -> t.Any:
            if not self._started:
                self.serving()
            return method(request)

        return functools.update_wrapper(call, method)

    def _schedule(self, delay: float) -> None:
        ref = weakref.ref(self)  # an exchange dropped without shutdown stops its sweeps

        def fire() -> None:
            leases = ref()
            if leases is not None:
                leases.tick()

        with self._lock:
            if not self._closed:
                self._timer = self.exchange.runner.call_later(delay, fire)

    def close(self, timeout: float = 5.0) -> None:
        """No tick after this, and none still running once it returns (up to ``timeout``): a
        shut-down exchange leaves nothing on the store's connections."""
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if not self._idle.wait(timeout):
            log.warning("a2a: run leases: a sweep was still running at shutdown")

    # -- a run's life

    def started(self, run: Run) -> None:
        """A run started. One over a stored task (a resumed one) takes its lease now; a new
        task took it with the write that created it."""
        if run.record.version < 2:
            return
        store, deadline = self.exchange.store, run.deadline
        until = _micros() + int(self.ttl * 1e6)
        at = None if deadline is None else int(deadline.timestamp() * 1e6)

        def take() -> None:
            try:
                store.lease_run(run.task_id, until, at)  # type: ignore[attr-defined]
            except Exception as exc:  # the next renewal takes it
                self._failed(exc)

        self.exchange.runner.spawn(take)

    def finished(self, run: Run) -> None:
        """A run ended; a task it handed off runs on without a lease (its job settles it)."""
        if run.handed_off and run.record.version > 0:
            with self._lock:
                self._release.add(run.task_id)
            self.exchange.runner.spawn(self._release_handed_off)

    # -- the period's work

    def tick(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._idle.clear()
        try:
            self.renew()
            self._release_handed_off()
            self.sweep()
        finally:
            self._idle.set()
            self._schedule(self.period)

    def renew(self) -> None:
        """Every lease this process holds, pushed one lease ahead in one statement; a run
        past its deadline is not renewed (its lease then runs out)."""
        now = time.monotonic()
        ids = [
            run.task_id for run in self.exchange.live_runs()
            if run.record.version > 0 and not run.handed_off and not run.done.is_set()
            and now < run.deadline_mono
        ]  # fmt: skip
        if not ids:
            return
        try:
            self.exchange.store.renew_runs(ids, _micros() + int(self.ttl * 1e6))  # type: ignore[attr-defined]
        except Exception as exc:
            self._failed(exc)
        else:
            self._answered()

    def _release_handed_off(self) -> None:
        with self._lock:
            ids, self._release = sorted(self._release), set()
        if not ids:
            return
        try:
            self.exchange.store.release_runs(ids)  # type: ignore[attr-defined]
        except Exception as exc:  # tried again at the next period, before any sweep
            with self._lock:
                self._release.update(ids)
            self._failed(exc)

    def sweep(self) -> int:
        """Settle FAILED every running task whose lease lapsed; the number this process won."""
        if self._release or time.monotonic() - self._failed_at < self.ttl:
            return 0  # the store failed us lately: leases may have lapsed for that alone
        won = 0
        for query in range(SWEEP_QUERIES):
            try:
                lapsed = self.exchange.store.lapsed_runs(_micros(), SWEEP_BATCH)  # type: ignore[attr-defined]
            except Exception as exc:
                self._failed(exc)
                return won
            self._answered()
            self.sweeps += query == 0
            for run in lapsed:
                won += self._settle(run)
            if len(lapsed) < SWEEP_BATCH:
                break
        return won

    def _settle(self, lapsed: LapsedRun) -> int:
        """One versioned write settles it FAILED, unless it runs here (our renewal is late,
        not our run dead), or it settled or paused meanwhile; 1 when this process won."""
        if self.exchange.runs.get(lapsed.task_id) is not None:
            return 0
        writer = self.exchange.writer
        try:
            record = self.exchange.store.get_task(lapsed.task_id)
            while record is not None and record.state in LEASED_STATES:
                late = lapsed.deadline is not None and lapsed.deadline < _micros()
                task = record.task
                message = Message.agent(
                    TIMED_OUT if late else WORKER_STOPPED,
                    context_id=task.context_id,
                    task_id=task.id,
                )
                try:
                    writer.set_status(record, TaskState.FAILED, message)
                except StaleTaskError as exc:  # another write came first: look again
                    record = exc.current
                    continue
                log.warning(
                    "a2a: task %s settled FAILED: the lease of its run (held by %s) lapsed",
                    task.id,
                    lapsed.run_by or "an unknown process",
                    extra=fields(task.id, record.skill),
                )
                return 1
        except Exception as exc:
            self._failed(exc)
        return 0

    # -- store health

    def _failed(self, exc: BaseException) -> None:
        self._failed_at = time.monotonic()
        if not self._failing:
            self._failing = True
            from ..store.sql import MissingTablesError

            if isinstance(exc, MissingTablesError):
                return  # the store logged it once, naming the fix: no second line
            log.error(
                "a2a: run leases: the store did not answer (%s); renewals and sweeps are tried "
                "again every %.1f s",
                scrub(repr(exc)),
                self.period,
            )

    def _answered(self) -> None:
        if self._failing:
            self._failing = False
            log.warning("a2a: run leases: the store answers again")
