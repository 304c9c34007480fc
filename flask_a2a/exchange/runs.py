"""The runs of this process: the whole life of a run, from the message to its last write.

:meth:`Runs.start` routes a message to its skill, claims an owner slot and a pool slot, and
creates the task record (or resumes a paused task, or hands a follow-up to its running run);
the run then executes the skill's handler, settles what the handler left open (COMPLETED, or
FAILED with the error), fails at its deadline, writes a held task when it outlives
``A2A_BLOCKING_WRITE_DELAY``, and is cut by a cancel, a deletion or shutdown. The method table
(``methods.py``) reads the params and calls :meth:`Runs.start`; this module does the rest.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
    InvalidParamsError,
    TaskCanceled,
    TaskInterrupted,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskNotStored,
    TaskTimedOut,
    UnencodableDataError,
    UnsupportedOperationError,
)
from ..protocol.model import (
    Message,
    Principal,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    new_id,
    utcnow,
)
from ..protocol.scrub import scrub, scrub_exception
from ..store.base import StaleTaskError, Store, TaskRecord
from .bus import Bus, BusEvent, Subscription
from .media import MediaCheck
from .owed import INTERNAL_ERROR, OwedSettles
from .retention import Retention
from .router import Skill, route
from .run_state import Run
from .runner import Runner, RunSlots
from .tasks import TaskContext
from .writer import TaskWriter, finalize_failed, is_final

log = logging.getLogger("flask_a2a")


class ReplicaHooks(t.Protocol):
    """What a run tells the replica watch (``replicas.ReplicaWatch``, set by the exchange: this
    module does not name it)."""

    def watch(self) -> None: ...
    def finished(self, run: Run) -> None: ...


class LeaseHooks(t.Protocol):
    """What a run tells the run leases (``run_leases.RunLeases``, set by the exchange: this
    module does not name it)."""

    def started(self, run: Run) -> None: ...
    def finished(self, run: Run) -> None: ...


#: The status text of a task whose handler raised (``task.fail(text)`` says more, on purpose).
HANDLER_FAILED: t.Final = "skill handler failed"

#: Tries of a run's settle, and the waits between them: a write that met a dropped connection
#: gets a fresh one (SQLAlchemy discards the pool's connections on a disconnect).
SETTLE_TRIES: t.Final = 3
SETTLE_BACKOFF: t.Final = (0.05, 0.25)

SKILL_METADATA_KEY: t.Final = "flask_a2a.skill"
#: A follow-up's write is tried again this often when another replica's write won.
_APPEND_TRIES: t.Final = 8


class Runs:
    """Launches, tracks, cuts and shuts down this process's runs."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        runner: Runner,
        bus: Bus,
        writer: TaskWriter,
        *,
        skills: t.Mapping[str, Skill],
        retention: Retention,
        push: t.Any = None,
    ) -> None:
        self.settings = settings
        self.skills = skills
        self.retention = retention
        #: Push delivery (``push.webhooks.PushSender``) or None when push notifications are off.
        self.push = push
        self.store = store
        self.runner = runner
        self.bus = bus
        self.writer = writer
        self.slots = RunSlots(settings.max_concurrent_runs_per_owner)
        #: Parts and accepted output modes against the skill's modes (set by the exchange
        #: with the card's default modes).
        self.media = MediaCheck(settings.check_media_types)
        #: Prometheus metrics (a no-op without the prometheus extra or with A2A_METRICS off).
        self.metrics = recorder(settings.metrics, settings.agent)
        #: The principal a handler sees (a named agent's handlers see the caller's own tenant,
        #: not the agent-scoped one its tasks are stored under: ``flask_a2a.agents``).
        self.handler_principal: t.Callable[[Principal], Principal] = _same_principal
        #: Polls a shared store for foreign writes to our runs (set by the exchange).
        self.replicas: ReplicaHooks | None = None
        #: Keeps this process's runs leased in a shared store (set by the exchange).
        self.leases: LeaseHooks | None = None
        self._runs: dict[str, Run] = {}
        self._lock = threading.Lock()
        #: Entered around each handler call, on the run's own thread or greenlet: the Flask
        #: wiring sets it to the serving app's ``app_context``, whose teardown ends the run's
        #: database session. The core knows no Flask.
        self.run_context: t.Callable[[], t.ContextManager[object]] = contextlib.nullcontext
        #: Tasks whose run could not store its settle: settled once the store answers again.
        self.owed = OwedSettles(
            writer, runner, settings.replica_poll_interval, lambda task_id: task_id in self._runs
        )
        writer.after_store = self.owed.kick

    def _check_push_config(self, config: dict[str, t.Any]) -> None:
        inline = config.get("task_push_notification_config")
        if inline is not None and self.push is not None:
            if inline.get("task_id"):
                raise InvalidParamsError(
                    "Invalid parameters: configuration.taskPushNotificationConfig.taskId "
                    "must be empty in SendMessage",
                    field_violations=[
                        ("configuration.taskPushNotificationConfig.taskId", "must be empty")
                    ],
                )
            self.push.check_url(inline["url"])

    def _register_inline_push(self, record: TaskRecord, config: dict[str, t.Any]) -> None:
        inline = config.get("task_push_notification_config")
        if inline is not None and self.push is not None:
            self.push.register(record, {**inline, "task_id": record.task.id})

    def start(
        self,
        message: Message,
        principal: Principal,
        config: dict[str, t.Any],
        *,
        subscribe: bool = False,
        credentials: t.Mapping[str, str] | None = None,
        extensions: t.Iterable[str] = (),
        here: bool = False,
    ) -> Started:
        """Create (or resume) the task and start its run.

        Every refusal happens before anything is written. With ``subscribe`` the bus
        subscription is taken before the run starts, so a stream misses no event.
        ``credentials`` (the caller's credential headers) go to the run, never to the store;
        so do ``extensions`` (those the request activated). With ``here`` (a blocking send,
        which waits for its run anyway) a runner that can (gevent) only prepares the run: the
        caller runs it in its own greenlet with :meth:`run_here`.
        """
        self._check_push_config(config)
        if message.task_id:
            return self._resume(
                message,
                principal,
                config,
                subscribe,
                credentials,
                extensions=extensions,
                here=here,
            )
        routed = route(message, self.skills)
        if routed.skill is not None:  # -32005 here: before anything is written
            self.media.check(routed.skill, message, config.get("accepted_output_modes") or ())
        task_id, context_id = new_id(), message.context_id or new_id()
        telemetry.annotate(task_id, routed.skill.id if routed.skill is not None else None)
        message = message.placed(task_id, context_id)
        now = utcnow()
        if routed.skill is None:
            refusal = Message.agent(routed.refusal, context_id=context_id, task_id=task_id)
            task = Task(
                task_id,
                context_id,
                TaskStatus(TaskState.REJECTED, now, refusal),
                history=(message, refusal),
            )
            record = self.store.create_task(
                TaskRecord(task, principal.owner, principal.tenant, principal.scope_key, now)
            )
            self._register_inline_push(record, config)
            self.retention.after_final(record)
            return Started(record, None, self.bus.subscribe(task_id) if subscribe else None)
        skill = routed.skill
        task = Task(
            task_id,
            context_id,
            TaskStatus(TaskState.SUBMITTED, now),
            history=(message,),
            metadata={SKILL_METADATA_KEY: skill.id},
        )
        record = TaskRecord(
            task,
            principal.owner,
            principal.tenant,
            principal.scope_key,
            now,
            version=0,
            skill=skill.id,
        )
        self.claim(principal.owner)
        if not self._unobserved(config):
            try:
                record = self.store.create_task(record)
            except BaseException:
                self.unclaim(principal.owner)
                raise
        try:
            self._register_inline_push(record, config)
        except BaseException:
            # Nothing half-made survives a refusal: no run slot, no task row.
            self.unclaim(principal.owner)
            self.store.delete_tasks([task_id])
            raise
        return self._launch(
            record,
            message,
            principal,
            skill,
            subscribe,
            credentials,
            extensions=extensions,
            detached=bool(config.get("return_immediately")),
            here=here,
        )

    def _launch(
        self,
        record: TaskRecord,
        message: Message,
        principal: Principal,
        skill: Skill,
        subscribe: bool,
        credentials: t.Mapping[str, str] | None,
        *,
        extensions: t.Iterable[str] = (),
        detached: bool = False,
        here: bool = False,
    ) -> Started:
        # Subscribed before the run starts, so a stream misses no event.
        subscription = self.bus.subscribe(record.task.id) if subscribe else None
        run = self.launch(
            record,
            message,
            principal,
            skill,
            credentials,
            extensions=extensions,
            reveal=subscribe and record.version == 0,
            detached=detached,
            here=here and not subscribe and not detached,
        )
        return Started(record, run, subscription)

    def _unobserved(self, config: dict[str, t.Any]) -> bool:
        """Nobody but this run learns the task's id before it answers (a stream: before the
        handler's first change shows the task): no ``returnImmediately``, no inline push
        config. Its first write may wait (``version=0``), and the handler may ``reply()``."""
        return (
            self.settings.blocking_write_delay > 0
            and not config.get("return_immediately")
            and config.get("task_push_notification_config") is None
        )

    def _resume(
        self,
        message: Message,
        principal: Principal,
        config: dict[str, t.Any],
        subscribe: bool,
        credentials: t.Mapping[str, str] | None = None,
        *,
        extensions: t.Iterable[str] = (),
        here: bool = False,
    ) -> Started:
        assert message.task_id is not None
        telemetry.annotate(message.task_id)
        record = visible_record(self.store, message.task_id, principal)
        if record.state.terminal:
            raise UnsupportedOperationError(
                f"task is {record.state.value}; a follow-up needs a new task",
                metadata={"taskId": record.task.id},
            )
        if message.context_id and message.context_id != record.task.context_id:
            raise InvalidParamsError(
                "Invalid parameters: message.contextId does not match the task's context",
                field_violations=[("message.contextId", "does not match the task's context")],
            )
        served = self.skills.get(record.skill or "")
        if served is not None:  # the task's skill takes the follow-up or resume too
            self.media.check(served, message, config.get("accepted_output_modes") or ())
        if not record.state.interrupted:  # submitted or working: a follow-up to its run
            return self._follow_up(
                record, message, principal, config, subscribe, credentials, extensions
            )
        skill = self.skills.get(record.skill or "")
        if skill is None:
            raise UnsupportedOperationError("the task's skill is no longer served")
        self.claim(principal.owner)
        message = message.placed(message.task_id, record.task.context_id)
        status = TaskStatus(TaskState.WORKING, utcnow())
        task = dataclasses.replace(
            record.task, status=status, history=record.task.history + (message,)
        )
        try:
            record = self.writer.commit(
                record, task, TaskStatusUpdateEvent(task.id, task.context_id, status)
            )
        except StaleTaskError:
            self.unclaim(principal.owner)
            raise UnsupportedOperationError(
                "task changed while resuming; read it again", metadata={"taskId": task.id}
            ) from None
        except BaseException:
            self.unclaim(principal.owner)
            raise
        self._register_inline_push(record, config)
        return self._launch(
            record,
            message,
            principal,
            skill,
            subscribe,
            credentials,
            extensions=extensions,
            detached=bool(config.get("return_immediately")),
            here=here,
        )

    def _follow_up(
        self,
        record: TaskRecord,
        message: Message,
        principal: Principal,
        config: dict[str, t.Any],
        subscribe: bool,
        credentials: t.Mapping[str, str] | None,
        extensions: t.Iterable[str],
    ) -> Started:
        """A message to a task still running (spec §3.3.3): appended to its history in one
        versioned write and handed to its run, wherever it runs; no run slot, no new run.
        A blocking send then waits for the run as a blocking send does."""
        message = message.placed(message.task_id, record.task.context_id)
        wait = not subscribe and not config.get("return_immediately")
        # Subscribed before the write, so a stream (or a wait) misses no event after it.
        subscription = self.bus.subscribe(record.task.id) if subscribe or wait else None
        try:
            stored, run = self._append(record, message)
            if stored.state.interrupted:  # it paused first: the message resumes it
                if subscription is not None:
                    subscription.close()
                return self._resume(
                    message, principal, config, subscribe, credentials, extensions=extensions
                )
            if stored.state.terminal:
                raise UnsupportedOperationError(
                    f"task is {stored.state.value}; a follow-up needs a new task",
                    metadata={"taskId": stored.task.id},
                )
            self._register_inline_push(stored, config)
            if wait:
                assert subscription is not None
                stored = self._await_run(stored, run, subscription)
        except BaseException:
            if subscription is not None:
                subscription.close()
            raise
        if wait and subscription is not None:
            subscription.close()
            return Started(stored, None, None)
        return Started(stored, None, subscription)

    def _append(self, record: TaskRecord, message: Message) -> tuple[TaskRecord, Run | None]:
        """Write ``message`` into the task's history over the newest version (the live run's
        own when it runs here) and queue it for that run. Returns the stored record and the
        run; a record that turned final first comes back as it is, with nothing written."""
        for _ in range(_APPEND_TRIES):
            run = self.get(record.task.id)
            if run is not None and run.done.is_set():
                run = None
            with run.lock if run is not None else contextlib.nullcontext():
                base = record
                if run is not None and run.record.version >= record.version:
                    base = run.record
                if is_final(base.state):
                    return base, run
                try:
                    stored = self.writer.append(base, message)
                except StaleTaskError as exc:  # another replica wrote: read it, try again
                    if exc.current is None:
                        raise TaskNotFoundError(metadata={"taskId": record.task.id}) from None
                    record = exc.current
                    if run is not None:
                        run.adopt(record)
                    continue
                if run is not None:
                    run.adopt(stored)
                return stored, run
        raise UnsupportedOperationError(
            "task changed while resuming; read it again", metadata={"taskId": record.task.id}
        )

    def _await_run(
        self, record: TaskRecord, run: Run | None, subscription: Subscription
    ) -> TaskRecord:
        """The task once its run ended (here), or once it is terminal or interrupted (a run
        elsewhere, or a handed-off task), at most ``A2A_TASK_TIMEOUT`` from now."""
        task_id = record.task.id
        if run is not None:
            run.done.wait()
        else:
            timeout = self.settings.task_timeout
            deadline = time.monotonic() + timeout if timeout > 0 else float("inf")
            interval = self.settings.replica_poll_interval
            while not is_final(record.state) and time.monotonic() < deadline:
                wait = max(0.0, min(interval, deadline - time.monotonic()))
                event = subscription.get(wait)
                if event is not None and not event.final and not event.gone:
                    continue
                if event is None and subscription.closed:  # dropped (overflow): poll alone
                    time.sleep(wait)
                current = self.store.get_task(task_id)
                if current is None:
                    raise TaskNotFoundError(metadata={"taskId": task_id})
                record = current
        current = self.store.get_task(task_id)
        if current is None:  # trimmed by retention already: the run's last word stands
            return run.record if run is not None else record
        return current

    def claim(self, owner: str) -> None:
        """Take an owner slot and a pool slot, or refuse with -32004 (nothing written)."""
        if not self.slots.acquire(owner):
            self.metrics.run_refused("owner")
            raise UnsupportedOperationError("maximum concurrent task runs reached")
        if not self.runner.reserve():
            self.slots.release(owner)
            self.metrics.run_refused("server")
            raise UnsupportedOperationError("maximum concurrent task runs reached (server)")

    def unclaim(self, owner: str) -> None:
        self.runner.unreserve()
        self.slots.release(owner)

    def launch(
        self,
        record: TaskRecord,
        message: Message,
        principal: Principal,
        skill: Skill,
        credentials: t.Mapping[str, str] | None = None,
        *,
        extensions: t.Iterable[str] = (),
        reveal: bool = False,
        detached: bool = False,
        here: bool = False,
    ) -> Run:
        """Start the handler on ``record`` (its slots claimed). A record of version 0 is held:
        written when the run settles, or after ``A2A_BLOCKING_WRITE_DELAY``; with ``reveal``
        (a stream's) at the handler's first change already, and published whole.
        ``detached``: the request answers before the run ends (its span then starts a trace
        of its own, linked to the request's). ``here``: prepared to run in the caller's
        greenlet (:meth:`run_here`) when the runner can, else started as usual."""
        run = Run(record, self.settings.task_timeout)
        run.reveal = reveal
        context = TaskContext(
            self.writer,
            run,
            message,
            self.handler_principal(principal),
            skill,
            credentials,
            extensions=extensions,
        )
        with self._lock:
            self._runs[run.task_id] = run
        if self.replicas is not None:
            self.replicas.watch()
        if self.leases is not None:
            self.leases.started(run)
        # One timer per run: a held task's write is due first (then the deadline is armed),
        # else the deadline. A run that ends first cancels it, as nearly every run does.
        timeout, delay = self.settings.task_timeout, self.settings.blocking_write_delay
        if record.version == 0 and (timeout <= 0 or delay < timeout):
            run.timer = self.runner.call_later(delay, lambda: self._on_write_due(run))
        elif timeout > 0:
            run.timer = self.runner.call_later(timeout, lambda: self._on_deadline(run))
        parent = telemetry.capture()  # the request's trace context, for the run's span

        def body() -> None:
            self._execute(run, context, skill, parent, detached)

        where = getattr(self.runner, "here", None) if here else None
        if where is not None:
            handle = where()
            run.handle = handle
            run.body = lambda: handle.run(body)
        else:
            run.handle = self.runner.start(body)
        return run

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
        the store refused is tried again (a fresh connection); past ``SETTLE_TRIES`` the task
        is owed FAILED "internal error" (``owed.py``), never left WORKING with no run."""
        for attempt in range(SETTLE_TRIES):
            if attempt:
                time.sleep(SETTLE_BACKOFF[min(attempt, len(SETTLE_BACKOFF)) - 1])
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
                    finalize_failed(
                        "a run's settle",
                        "tried again",
                        exc,
                        fields(run.task_id, run.record.skill),
                    )
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
        """The task was deleted: cancel its local run, if any (its streams end elsewhere)."""
        run = self._runs.get(task_id)
        if run is not None:
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


def _same_principal(principal: Principal) -> Principal:
    return principal


def visible_record(store: Store, task_id: str, principal: Principal) -> TaskRecord:
    """The caller's task, or -32001 for unknown and foreign alike."""
    record = store.get_task(task_id, principal.owner)
    if record is None or not record.visible_to(principal):
        raise TaskNotFoundError(metadata={"taskId": task_id})
    return record


class Started(t.NamedTuple):
    """A started (or rejected) task: its first stored record, its run, its subscription."""

    record: TaskRecord
    run: Run | None
    subscription: Subscription | None
