"""How a message becomes a run: start, resume, follow-up, launch.

:meth:`Runs.start` routes a message to its skill, claims an owner slot and a pool slot, and
creates the task record (or resumes a paused task, or hands a follow-up to its running run),
then launches the run. The method table (``methods.py``) reads the params and calls
:meth:`Runs.start`; what the run does once launched (the handler, its settle, its deadline, the
cuts) is :class:`~.run_life.RunLife`'s, which :class:`Runs` holds (``Runs.life``) and hands
each run to.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import typing as t

from ..ops import telemetry
from ..protocol.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError
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
from ..store.base import StaleTaskError, TaskRecord
from .bus import Subscription
from .hooks import same_principal
from .media import MediaCheck
from .reentry import Caller, Dispatcher
from .retention import Retention
from .router import Skill, route
from .run_life import RunLife
from .run_state import Run
from .tasks import TaskContext
from .visibility import visible_record
from .writer import PushDelivery, TaskWriter, WriteBound, is_final

SKILL_METADATA_KEY: t.Final = "flask_a2a.skill"
#: A follow-up's write is tried again this often when another replica's write won.
_APPEND_TRIES: t.Final = 8


class Runs:
    """Launches this process's runs: a message becomes a new task's run, a paused task's resumed
    run, or a follow-up to a running one. What a run does once launched is :attr:`life`'s
    (``run_life.py``).

    ``media``: parts and accepted output modes against the skill's modes (the card's default
    modes); ``handler_principal``: the principal a handler sees (a named agent's handlers see
    the caller's own tenant, not the agent-scoped one its tasks are stored under:
    ``flask_a2a.agents``); ``reenter``: runs a request through the app as a run's caller
    (``TaskContext.call_app``, entity skills), None in an exchange built without one."""

    def __init__(
        self,
        life: RunLife,
        writer: TaskWriter,
        *,
        skills: t.Mapping[str, Skill],
        retention: Retention,
        media: MediaCheck,
        push: PushDelivery | None = None,
        handler_principal: t.Callable[[Principal], Principal] | None = None,
        reenter: Dispatcher | None = None,
    ) -> None:
        self.life = life
        self.settings = life.settings
        self.store = life.store
        self.runner = life.runner
        self.bus = life.bus
        self.slots = life.slots
        self.metrics = life.metrics
        self.writer = writer
        self.skills = skills
        self.retention = retention
        #: Push delivery (``push.webhooks.PushSender``) or None when push notifications are off.
        self.push = push
        self.media = media
        self.handler_principal = handler_principal or same_principal
        self.reenter = reenter
        # What the method table and the rest of the exchange ask of the runs in flight.
        self.get = life.get
        self.live = life.live
        self.cancel = life.cancel
        self.cut = life.cut
        self.shutdown = life.shutdown
        self.run_here = life.run_here
        self.owed = life.owed

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
        caller: Caller | None = None,
        extensions: t.Iterable[str] = (),
        here: bool = False,
    ) -> Started:
        """Create (or resume) the task and start its run.

        Every refusal happens before anything is written. With ``subscribe`` the bus
        subscription is taken before the run starts, so a stream misses no event.
        ``caller`` (the caller's credential headers and origin) goes to the run, never to
        the store; so do ``extensions`` (those the request activated). With ``here`` (a
        blocking send, which waits for its run anyway) a runner that can (gevent) only
        prepares the run: the caller runs it in its own greenlet with :meth:`run_here`.
        """
        self._check_push_config(config)
        if message.task_id:
            return self._resume(
                message,
                principal,
                config,
                subscribe,
                caller,
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
            caller,
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
        caller: Caller | None,
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
            caller,
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
        caller: Caller | None = None,
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
                record, message, principal, config, subscribe, caller, extensions
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
            caller,
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
        caller: Caller | None,
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
                    message, principal, config, subscribe, caller, extensions=extensions
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
            run = self.life.get(record.task.id)
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
        caller: Caller | None = None,
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
        run = Run(record, self.settings.task_timeout, self.runner.lock())
        bound = self.life.write_bound
        run.writes = WriteBound(bound) if bound is not None else None
        run.reveal = reveal
        context = TaskContext(
            self.writer,
            run,
            message,
            self.handler_principal(principal),
            skill,
            caller,
            extensions=extensions,
            reenter=self.reenter,
        )
        self.life.begin(run, context, skill, detached=detached, here=here)
        return run


class Started(t.NamedTuple):
    """A started (or rejected) task: its first stored record, its run, its subscription."""

    record: TaskRecord
    run: Run | None
    subscription: Subscription | None
