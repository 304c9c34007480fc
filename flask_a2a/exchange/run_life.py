"""A run once launched, to its end: the handler, its settle, its held write, its deadline,
and the cuts (a cancel, a deletion, shutdown).

:class:`RunLife` holds this process's runs and what ends them; :class:`~.runs.Runs` (how a
message becomes a run) builds on it. The handler runs, then the run settles what the handler
left open (COMPLETED, or FAILED with the error; a settle the store refused is tried again, then
owed), writes a held task when it outlives ``A2A_BLOCKING_WRITE_DELAY``, fails at its deadline.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import typing as t

from ..config import Settings
from ..ops import telemetry
from ..ops.log_fields import fields
from ..ops.metrics import recorder
from ..protocol.errors import (
    A2AError,
    HandlerUsageError,
    TaskCanceled,
    TaskInterrupted,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskNotStored,
    TaskTimedOut,
    UnencodableDataError,
)
from ..protocol.model import TaskState
from ..protocol.scrub import scrub, scrub_exception
from ..store.base import StaleTaskError, Store, TaskRecord
from ..store.sql_waits import call_bound, read_timeout_for
from .bus import Bus, BusEvent
from .owed import INTERNAL_ERROR, OwedSettles
from .router import Skill
from .run_state import Run
from .runner import Runner, RunSlots
from .tasks import TaskContext
from .writer import TaskWriter, finalize_failed, is_final

log = logging.getLogger("flask_a2a")


class ReplicaHooks(t.Protocol):
    """What a run tells the replica watch (``replicas.ReplicaWatch``, given by the exchange once
    its store is known to be shared: this module does not name it)."""

    def watch(self) -> None: ...
    def finished(self, run: Run) -> None: ...


class LeaseHooks(t.Protocol):
    """What a run tells the run leases (``run_leases.RunLeases``, given by the exchange once
    its store is known to hold leases: this module does not name it)."""

    def started(self, run: Run) -> None: ...
    def finished(self, run: Run) -> None: ...


#: The status text of a task whose handler raised (``task.fail(text)`` says more, on purpose).
HANDLER_FAILED: t.Final = "skill handler failed"


class RunLife:
    """Tracks this process's runs, executes and settles them, cuts and shuts them down.

    ``slots``: the per-owner run slots (``fleet.limits`` counts them across replicas);
    ``run_context``: entered around each handler call, on the run's own thread or greenlet (the
    Flask wiring gives the serving app's ``app_context``, whose teardown ends the run's
    database session; the core knows no Flask)."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        runner: Runner,
        bus: Bus,
        writer: TaskWriter,
        *,
        slots: RunSlots | None = None,
        run_context: t.Callable[[], t.ContextManager[object]] = contextlib.nullcontext,
    ) -> None:
        self.settings = settings
        self.store = store
        self.runner = runner
        self.bus = bus
        self.writer = writer
        if slots is None:
            slots = RunSlots(settings.max_concurrent_runs_per_owner)
        self.slots = slots
        #: Prometheus metrics (a no-op without the prometheus extra or with A2A_METRICS off).
        self.metrics = recorder(settings.metrics, settings.agent)
        #: One bound for a run's writes while the store does not answer (``WriteBound``): a
        #: read on a connection the database stopped answering, then a connect for a new one.
        self.write_bound = call_bound(
            settings.database_connect_timeout,
            read_timeout_for(settings.statement_timeout, settings.database_read_timeout),
        )
        #: Polls a shared store for foreign writes to our runs (:meth:`watched_by`).
        self.replicas: ReplicaHooks | None = None
        #: Keeps this process's runs leased in a shared store (:meth:`leased_by`).
        self.leases: LeaseHooks | None = None
        self._runs: dict[str, Run] = {}
        self._lock = threading.Lock()
        self.run_context = run_context
        #: Tasks whose run could not store its settle: settled once the store answers again
        #: (the writer's ``after_store`` kicks it: the exchange wires the two).
        self.owed = OwedSettles(
            writer, runner, settings.replica_poll_interval, lambda task_id: task_id in self._runs
        )

    def writes_never_hang(self) -> None:
        """The store turned out to live in this process's memory: its runs' writes need no
        bound (:class:`~flask_a2a.exchange.writer.WriteBound`), which costs each write."""
        self.write_bound = None

    def watched_by(self, replicas: ReplicaHooks) -> None:
        """The store turned out shared (it is chosen at first use): runs from now on tell the
        replica watch when they start and end."""
        self.replicas = replicas

    def leased_by(self, leases: LeaseHooks) -> None:
        """The store turned out to hold run leases: runs from now on are leased."""
        self.leases = leases

    def begin(
        self, run: Run, context: TaskContext, skill: Skill, *, detached: bool, here: bool
    ) -> None:
        """Track ``run``, arm its one timer and start its handler (its slots claimed).
        ``here``: prepared to run in the caller's greenlet (:meth:`run_here`) when the runner
        can, else started as usual."""
        with self._lock:
            self._runs[run.task_id] = run
        if self.replicas is not None:
            self.replicas.watch()
        if self.leases is not None:
            self.leases.started(run)
        # One timer per run: a held task's write is due first (then the deadline is armed),
        # else the deadline. A run that ends first cancels it, as nearly every run does.
        timeout, delay = self.settings.task_timeout, self.settings.blocking_write_delay
        if run.record.version == 0 and (timeout <= 0 or delay < timeout):
            run.timer = self.runner.call_later(delay, lambda: self._on_write_due(run))
        elif timeout > 0:
            run.timer = self.runner.call_later(timeout, lambda: self._on_deadline(run))
        parent = telemetry.capture()  # the request's trace context, for the run's span

        def body() -> None:
            self._execute(run, context, skill, parent, detached)

        if here and self.runner.can_run_here():
            handle = self.runner.here()
            run.handle = handle
            run.body = lambda: handle.run(body)
        else:
            run.handle = self.runner.start(body)

    @staticmethod
    def run_here(run: Run) -> None:
        """Run a run prepared with ``here`` in this greenlet, to its end (a no-op
        for a run the runner started elsewhere). A cut (cancel, deadline) lands inside it."""
        body, run.body = run.body, None
        if body is not None:
            try:
                body()
            except TaskInterrupted:
                pass  # a cut that landed between the handler's end and the run's

    def _execute(
        self, run: Run, context: TaskContext, skill: Skill, parent: t.Any, detached: bool
    ) -> None:
        """One run in its span, counted and timed by skill and end state: both are noted
        before the run is marked done, so a request waiting for it finds them."""
        started = time.perf_counter()
        self.metrics.run_started(skill.id)
        try:
            with telemetry.run_span(
                parent, detached=detached, skill=skill.id, task_id=run.task_id
            ) as span:
                try:
                    self._handle(run, context, skill)
                finally:
                    state = run.record.state
                    telemetry.note_state(span, state)
                    self.metrics.run_settled(skill.id, state, time.perf_counter() - started)
        finally:
            self._finish(run)

    def _handle(self, run: Run, context: TaskContext, skill: Skill) -> None:
        """The handler, then settling what it left open."""
        with run.lock:  # a cancel either lands before this or sees the run started
            if run.cancelled:
                return  # canceled before it started: the handler never runs
            run.started = True
        failure: str | None = None
        try:
            with self.run_context():
                result = skill.handler(context)
            if result is not None:
                context.returned(result)
        except TaskTimedOut:
            self._expire(run)  # its own clock ran out before the timer fired
            return
        except TaskInterrupted:
            return  # canceled: whoever cut the run settled the task
        except UnencodableDataError as exc:
            failure = f"skill produced data that cannot be sent: {exc}"
        except HandlerUsageError as exc:  # our own text, naming the fix
            log.error(
                "a2a: skill %s misused its task: %s",
                skill.id,
                scrub(exc),
                extra=fields(run.task_id, skill.id),
            )
            failure = str(exc)
        except TaskNotStored as exc:  # the store's own words are in the log, never in the task
            failure = INTERNAL_ERROR
            run.refusal = exc.answer or run.refusal
        except Exception as exc:
            # Its text can hold SQL, paths or tokens: the log gets it, the caller does not.
            log.error(
                "a2a: skill %s failed\n%s",
                skill.id,
                scrub_exception(exc),
                extra=fields(run.task_id, skill.id),
            )
            failure = HANDLER_FAILED
        if context.settled and failure is None:
            return
        self._settle(run, context, failure)

    def _settle(self, run: Run, context: TaskContext, failure: str | None) -> None:
        """Settle what the handler left open: COMPLETED, or FAILED with ``failure``. A write
        the store refused is tried again, the same write, within the run's write bound
        (``writer.py``); if the store still did not take it the task is owed FAILED "internal
        error" (``owed.py``), never left WORKING with no run, and a blocking caller is answered
        the store's error."""
        try:
            if failure is None:
                context.complete()
            else:
                context.fail(scrub(failure))
            return
        except TaskTimedOut:
            self._expire(run)  # a late finish must not leave the task open
            return
        except TaskInterrupted:
            return
        except Exception as exc:  # TaskNotStored (logged), the store, or a bug
            if isinstance(exc, TaskNotStored):
                run.refusal = exc.answer or run.refusal
            else:
                owed = run.record.version > 0
                finalize_failed(
                    "a run's settle",
                    "owed: settled FAILED once the store answers" if owed else "nothing stored",
                    exc,
                    fields(run.task_id, run.record.skill),
                )
        run.unsettled = True
        if run.record.version > 0:  # a held task never written does not exist to settle
            self.owed.owe(run.task_id)

    def _on_write_due(self, run: Run) -> None:
        """``A2A_BLOCKING_WRITE_DELAY`` passed: write the held task, then wait for the
        deadline (the run's one timer, armed again)."""
        if run.done.is_set():
            return
        self._write_held(run)
        if run.deadline_mono == float("inf") or run.done.is_set():
            return
        left = max(0.0, run.deadline_mono - time.monotonic())
        run.timer = self.runner.call_later(left, lambda: self._on_deadline(run))
        if run.done.is_set():  # the run ended while the timer was armed: _finish missed it
            run.timer.cancel()

    def _write_held(self, run: Run) -> None:
        """The run outlived ``A2A_BLOCKING_WRITE_DELAY`` with its task held: write it now, so
        ListTasks, other replicas and a restart see it (and a stream waiting to show it)."""
        with run.lock:
            if run.record.version != 0 or run.done.is_set() or run.reply is not None:
                return
            try:
                with run.writes.trying() if run.writes is not None else contextlib.nullcontext():
                    run.record = self.writer.reveal(run.record)  # a waiting stream shows it
            except Exception as exc:  # the run's next change tries again
                run.write_due = True
                log.error(
                    "a2a: writing a held task failed: %s",
                    scrub(repr(exc)),
                    extra=fields(run.task_id, run.record.skill),
                )

    def _finish(self, run: Run) -> None:
        try:
            if run.timer is not None:
                run.timer.cancel()
        finally:
            with self._lock:
                if self._runs.get(run.task_id) is run:
                    del self._runs[run.task_id]
            self.slots.release(run.owner)
            run.done.set()
            if run.record.version == 0 and run.reply is None:
                # Its task never reached the store (every write failed, logged): a stream
                # waiting for its first event ends instead of waiting for one that never comes.
                self.bus.publish(BusEvent.removed(run.task_id, local=True))
            if self.replicas is not None:
                self.replicas.finished(run)
            if self.leases is not None:
                self.leases.finished(run)

    def live(self) -> list[Run]:
        """The runs in flight in this process."""
        with self._lock:
            return list(self._runs.values())

    def get(self, task_id: str) -> Run | None:
        return self._runs.get(task_id)

    def _on_deadline(self, run: Run) -> None:
        """The run went past A2A_TASK_TIMEOUT: settle FAILED, then cut it."""
        if run.done.is_set() or not self._expire(run):
            return
        if run.handle is not None:
            run.handle.kill(TaskTimedOut)
        run.done.set()

    def _expire(self, run: Run) -> bool:
        """Settle FAILED "task timed out" once; False when the run had settled its task itself."""
        with run.lock:
            run.timed_out = True
            if run.handed_off or run.reply is not None or is_final(run.record.state):
                return False
            try:
                run.record = self.writer.settle(run.record, TaskState.FAILED, "task timed out")
            except StaleTaskError:
                pass  # the task is gone (retention, erasure): nothing left to settle
            except Exception as exc:
                owed = run.record.version > 0
                finalize_failed(
                    "the settle of a run past its deadline",
                    "owed: settled FAILED once the store answers" if owed else "nothing stored",
                    exc,
                    fields(run.task_id, run.record.skill),
                )
                if owed:
                    self.owed.owe(run.task_id, TaskState.FAILED, "task timed out")
        return True

    def cancel(self, record: TaskRecord, *, text: str | None = None) -> TaskRecord:
        """Settle CANCELED against the store and cut the local run, if any."""
        if record.state.terminal:
            raise TaskNotCancelableError(
                f"Task cannot be canceled: it is {record.state.value}",
                metadata={"taskId": record.task.id},
            )
        run = self._runs.get(record.task.id)
        if run is None:
            return self._settle_canceled(record, text)
        with run.lock:
            if run.reply is not None:  # answered with a message: there is no task
                raise TaskNotFoundError(metadata={"taskId": record.task.id})
            run.cancelled = True
            held = run.record.version == 0  # not written yet: the run holds the task
            try:
                current = run.record if held else self.store.get_task(record.task.id)
                if current is None:
                    raise TaskNotFoundError(metadata={"taskId": record.task.id})
                run.record = self._settle_canceled(current, text)
            except A2AError:
                raise
            except Exception:  # the run stops all the same: the cancel is owed
                if not held:
                    self.owed.owe(run.task_id, TaskState.CANCELED, text or "")
                raise
        if run.handle is not None and run.started:
            run.handle.kill(TaskCanceled)
        run.done.set()
        return run.record

    def _settle_canceled(self, record: TaskRecord, text: str | None) -> TaskRecord:
        try:
            settled = self.writer.settle(record, TaskState.CANCELED, text)
        except StaleTaskError:
            raise TaskNotFoundError(metadata={"taskId": record.task.id}) from None
        if settled.state is not TaskState.CANCELED:
            raise TaskNotCancelableError(
                f"Task cannot be canceled: it is {settled.state.value}",
                metadata={"taskId": record.task.id},
            )
        return settled

    def cut(self, task_id: str) -> None:
        """The task was deleted: cancel its local run, if any (its streams end elsewhere).

        A run that settled its task itself is left to finish: another settle's retention trim
        (or the replica poll after it) may delete the task between its settle and its end, and
        a kill then would land in its last store call and fail the caller's answer."""
        run = self._runs.get(task_id)
        if run is None:
            return
        with run.lock:
            if is_final(run.record.state):
                return
            run.cancelled = True
        if run.handle is not None and run.started:
            run.handle.kill(TaskCanceled)

    def shutdown(self, timeout: float) -> bool:
        """Cut every live run but handed-off ones (settled CANCELED), wait up to ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._lock:
            runs = [r for r in self._runs.values() if not r.handed_off]
        for run in runs:
            try:
                self.cancel(run.record, text="canceled: the server is shutting down")
            except A2AError:
                pass
            except Exception as exc:  # the cancel is owed (``cancel``); at worst the run's
                finalize_failed(  # lease lapses and another process settles it FAILED
                    "a cancel at shutdown",
                    "owed: tried once more before the process exits",
                    exc,
                    fields(run.task_id, run.record.skill),
                )
        if runs:
            log.warning("a2a: shutdown canceled %d live run(s)", len(runs))
        finished = all(run.done.wait(max(0.0, deadline - time.monotonic())) for run in runs)
        self.owed.close()  # a last try: what the store still refuses stays as stored
        return finished
