"""What a handler holds: :class:`TaskContext` (in a run) and :class:`TaskUpdater` (outside one).

Each change they make goes through the one writer of tasks, :class:`~.writer.TaskWriter`
(``exchange/writer.py``): stored with its version, then published, then pushed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import typing as t
from datetime import datetime

from ..ops.log_fields import fields
from ..protocol.errors import (
    HandlerUsageError,
    TaskCanceled,
    TaskSettled,
    TaskTimedOut,
    TaskVisibleError,
    UnencodableDataError,
)
from ..protocol.jsonrpc import encode
from ..protocol.model import (
    Artifact,
    Message,
    Part,
    Principal,
    Role,
    StreamEvent,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    new_id,
    utcnow,
)
from ..protocol.wire import dump_event
from ..store.base import StaleTaskError
from .bus import BusEvent
from .parts import artifact_parts, returned_parts
from .reentry import AppAnswer, Caller, Dispatcher, Reentry, ReentryUnavailable
from .run_state import Run
from .writer import SETTLE_TRIES, TaskWriter, is_final, storing

log = logging.getLogger("flask_a2a")


class SkillInfo(t.Protocol):
    """The skill a task runs, as its handler sees it (``router.Skill``; the router names this
    module for its handler type, so this one describes the skill instead of importing it)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def examples(self) -> tuple[str, ...]: ...
    @property
    def input_modes(self) -> tuple[str, ...]: ...
    @property
    def output_modes(self) -> tuple[str, ...]: ...


#: How often ``receive()`` re-checks the run while it waits (a thread run's cancel latency).
_RECEIVE_SLICE: t.Final = 0.05
#: A run's write that lost to follow-ups written first is built again over them this often.
_MERGES: t.Final = 8


class TaskMutations:
    """The ways to change a task, shared by a run's TaskContext and a handed-off TaskUpdater.

    Subclasses say how a change is committed (:meth:`_commit`) and where the task is read.
    """

    @property
    def id(self) -> str:
        return self.task.id

    @property
    def context_id(self) -> str:
        return self.task.context_id

    @property
    def task(self) -> Task:
        raise NotImplementedError

    @property
    def history(self) -> tuple[Message, ...]:
        """Every message exchanged on this task so far, the current one last."""
        return self.task.history

    @property
    def state(self) -> TaskState:
        return self.task.status.state

    def _commit(self, build: t.Callable[[Task], tuple[Task, StreamEvent | None]]) -> None:
        raise NotImplementedError

    def _set_status(self, state: TaskState, message: Message | None) -> None:
        def build(task: Task) -> tuple[Task, StreamEvent | None]:
            status = TaskStatus(state, utcnow(), message)
            history = task.history + (message,) if message is not None else task.history
            new = task.evolve(status=status, history=history)
            return new, TaskStatusUpdateEvent(task.id, task.context_id, status)

        self._commit(build)

    def _agent_message(self, content: str | Message | None) -> Message | None:
        if content is None:
            return None
        if isinstance(content, Message):
            return dataclasses.replace(content, context_id=self.context_id, task_id=self.id)
        return Message.agent(str(content), context_id=self.context_id, task_id=self.id)

    def working(self, text: str | None = None) -> None:
        """Mark the task WORKING. Idempotent: once working, nothing is written or published."""
        if self.state is TaskState.WORKING and text is None:
            self._commit(lambda task: (task, None))  # checks the run, writes nothing
            return
        self._set_status(TaskState.WORKING, self._agent_message(text))

    def artifact(
        self,
        parts: Part | t.Iterable[Part] | None,
        name: str | None = None,
        artifact_id: str | None = None,
        append: bool = False,
        last_chunk: bool = False,
        *,
        description: str | None = None,
        metadata: dict[str, t.Any] | None = None,
    ) -> str:
        """Add an artifact, or with ``append=True`` add parts to one already sent.

        Returns the artifact id (pass it back with ``append=True`` to stream chunks).
        """
        chunk = artifact_parts(parts)
        if append and artifact_id is None:
            raise ValueError("append=True needs the artifact_id of the artifact to extend")
        artifact_id = artifact_id or new_id()

        def build(task: Task) -> tuple[Task, StreamEvent | None]:
            delta = Artifact(artifact_id, chunk, name, description, metadata)
            artifacts = list(task.artifacts)
            for i, existing in enumerate(artifacts):
                if existing.artifact_id == artifact_id:
                    if append:
                        artifacts[i] = dataclasses.replace(existing, parts=existing.parts + chunk)
                    else:
                        artifacts[i] = delta
                    break
            else:
                artifacts.append(delta)
            new = task.evolve(artifacts=tuple(artifacts))
            event = TaskArtifactUpdateEvent(
                task.id, task.context_id, delta, append=append, last_chunk=last_chunk
            )
            return new, event

        self._commit(build)
        return artifact_id

    def complete(self, text_or_message: str | Message | None = None) -> None:
        """Settle COMPLETED, with an optional agent message."""
        self._set_status(TaskState.COMPLETED, self._agent_message(text_or_message))

    def fail(self, text: str | Message) -> None:
        """Settle FAILED: the work was attempted and did not succeed."""
        self._set_status(TaskState.FAILED, self._agent_message(text))

    def reject(self, text: str | Message) -> None:
        """Settle REJECTED: the agent declines to do the work."""
        self._set_status(TaskState.REJECTED, self._agent_message(text))

    def require_input(self, text: str | Message) -> None:
        """Pause for input; the next message carrying this task id resumes the handler."""
        self._set_status(TaskState.INPUT_REQUIRED, self._agent_message(text))

    def require_auth(self, text: str | Message) -> None:
        """Pause for authentication; resumed like :meth:`require_input`."""
        self._set_status(TaskState.AUTH_REQUIRED, self._agent_message(text))


class TaskContext(TaskMutations):
    """What a skill handler gets: the task, the caller, and the only ways to change the task.

    Every mutation checks the run first: once it is canceled, past its deadline or settled,
    mutations raise (:class:`TaskCanceled`, :class:`TaskTimedOut`, :class:`TaskSettled`) and
    nothing is written. Returning from the handler without settling completes the task.
    """

    def __init__(
        self,
        writer: TaskWriter,
        run: Run,
        message: Message,
        principal: Principal,
        skill: SkillInfo,
        caller: Caller | None = None,
        *,
        extensions: t.Iterable[str] = (),
        reenter: Dispatcher | None = None,
    ) -> None:
        self._writer = writer
        self._run = run
        #: The card's extensions the request that started (or resumed) this run activated
        #: with its ``A2A-Extensions`` header (``message.extensions`` is what the message
        #: itself says it uses).
        self.extensions: frozenset[str] = frozenset(extensions)
        #: What this run re-enters the app with (:meth:`call_app`): the caller's credential
        #: headers and origin of the request that started or resumed it; never stored.
        self.caller: Caller = caller or Caller()
        self._reenter = reenter
        #: The message that started (or resumed) this run.
        self.message = message
        #: Who asked.
        self.principal = principal
        #: The skill being run.
        self.skill: SkillInfo = skill
        self._settled = False
        #: The handler changed the task (so it may no longer ``reply()``).
        self._acted = False

    @property
    def task(self) -> Task:
        """The task as last stored by this run."""
        return self._run.record.task

    @property
    def cancelled(self) -> bool:
        return self._run.cancelled

    @property
    def deadline(self) -> datetime | None:
        """When this run times out (UTC); ``None`` when runs are unbounded."""
        return self._run.deadline

    @property
    def settled(self) -> bool:
        """The task reached a terminal or interrupted state (or was handed off) in this run."""
        return self._settled

    @property
    def credentials(self) -> t.Mapping[str, str]:
        """The caller's ``Cookie``, ``Authorization`` and ``X-API-Key`` headers."""
        return self.caller.headers

    def call_app(
        self,
        method: str,
        path: str,
        *,
        json: t.Any = None,
        query: t.Mapping[str, t.Any] | None = None,
        headers: t.Mapping[str, str] | None = None,
    ) -> AppAnswer:
        """Run ``method path`` through the app's whole WSGI stack as the caller, as an entity
        skill does: the caller's credentials and address, ``Accept`` and ``Content-Type``
        ``application/json``, ``json`` as the body, ``query`` as the query string, plus
        ``headers`` and what the agent's re-entry hook adds. Its own request context (``g``,
        session) is torn down after it. The answer is read up to 4 MiB."""
        self.check()
        if self._reenter is None:
            raise ReentryUnavailable("this exchange serves no app to re-enter (no A2A extension)")
        return self._reenter(
            Reentry.of(self, method, path, query=query, json=json, headers=headers), None
        )

    def check(self) -> None:
        """Raise if this run may no longer change its task; call it in long loops."""
        run = self._run
        if run.cancelled:
            raise TaskCanceled("task was canceled")
        if run.timed_out or time.monotonic() > run.deadline_mono:
            raise TaskTimedOut("task timed out")
        if self._settled:
            if run.reply is not None:
                raise TaskSettled("the handler replied with a message: there is no task")
            raise TaskSettled(f"task is already {self.state.value}")

    def _commit(self, build: t.Callable[[Task], tuple[Task, StreamEvent | None]]) -> None:
        run = self._run
        with run.lock:
            self.check()
            for attempt in range(_MERGES + 1):
                task, event = build(run.record.task)
                if run.record.version == 0 and run.reveal:  # a stream's first change shows it
                    with storing(run.record, run.writes):
                        run.record = self._writer.reveal(run.record)
                if event is None:
                    if run.record.version == 0 and run.write_due:  # e.g. hand_off() once WORKING
                        with storing(run.record, run.writes):
                            run.record = self._writer.store.create_task(run.record)
                    break
                final = is_final(task.status.state)
                held = run.record.version == 0 and not run.write_due
                if held and not final:
                    run.record = self._writer.hold(run.record, task, event)
                    break
                try:
                    # The run's last write is tried again (the same write) if the store fails it.
                    tries = SETTLE_TRIES if final else 1
                    with storing(run.record, run.writes):
                        run.record = self._writer.commit(run.record, task, event, tries=tries)
                    break
                except StaleTaskError as exc:
                    current = exc.current
                    if current is not None and not is_final(current.state) and attempt < _MERGES:
                        run.adopt(current)  # a follow-up was written first: build over it
                        continue
                    # Someone else wrote the row: a cancel here or on another replica.
                    if current is not None:
                        run.record = current
                    run.cancelled = True
                    raise TaskCanceled("task was canceled") from None
            self._acted = True
            if is_final(run.record.state):
                self._settled = True

    def reply(
        self, content: str | bytes | dict[str, t.Any] | list[t.Any] | Part | Message
    ) -> Message:
        """Answer the caller with a message instead of a task (a quick, stateless answer).

        A blocking SendMessage answers ``{"message": ...}``, a stream sends that one message
        and ends, and no task remains: it was never written, listed or pushed. ``content`` is
        what a handler may return (a str, bytes, a dict, a list, a Part or Parts) or a Message
        (its parts and metadata are kept). Returns the message sent.

        Only as the handler's first action, while nobody has seen the task: raises
        :class:`TaskVisibleError` once the handler changed it or the caller holds it
        (``returnImmediately``, a resumed task, an inline push config, a run past
        ``A2A_BLOCKING_WRITE_DELAY``); uncaught, that fails the task like any exception.
        """
        run = self._run
        if isinstance(content, Message):
            parts, metadata = content.parts, content.metadata
        else:
            try:
                parts, metadata = returned_parts(content), None
            except HandlerUsageError:
                raise HandlerUsageError(
                    f"reply() takes a str, bytes, a dict, a list of JSON values, a "
                    f"flask_a2a.Part, a list of Parts or a Message, got {type(content).__name__}"
                ) from None
        with run.lock:
            self.check()
            if run.record.version != 0 or self._acted:
                raise TaskVisibleError(
                    "reply() must be the handler's first action, before the caller has the "
                    "task: this one was already changed or sent (returnImmediately, a resumed "
                    "task, an inline push config, or a run past A2A_BLOCKING_WRITE_DELAY); "
                    "settle it with task.complete(text) instead"
                )
            message = Message(new_id(), Role.AGENT, parts, self.context_id, metadata=metadata)
            try:
                result_json = encode(dump_event(message))
            except (TypeError, ValueError, RecursionError) as exc:
                raise UnencodableDataError(f"reply data cannot be JSON-encoded: {exc}") from None
            run.reply = message
            self._settled = True
            if run.reveal:  # the stream waiting for its first event gets this one, and ends
                self._writer.bus.publish(BusEvent(self.id, 1, message, result_json, True))
        return message

    def receive(self, timeout: float | None = None) -> Message | None:
        """The next follow-up the caller sent to this task while it runs (a message naming its
        ``taskId``), oldest first; ``None`` if none came within ``timeout`` seconds (``None``
        waits for one). Raises like :meth:`check`, so a cancel or the deadline ends the wait.
        The follow-ups are in :attr:`history` too."""
        run = self._run
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.check()
            with run.inbox_ready:
                if run.inbox:
                    return run.inbox.popleft()
                left = _RECEIVE_SLICE
                if deadline is not None:
                    left = min(left, deadline - time.monotonic())
                    if left <= 0:
                        return None
                run.inbox_ready.wait(left)  # sliced: a thread run learns of a cancel here

    def returned(self, value: object) -> None:
        """The handler returned ``value`` (not None): add it as an artifact named after the
        skill; the run then completes the task. A task the handler settled (or handed off)
        itself keeps what it has: the value is dropped, with a warning. The id ``artifact()``
        returned (``lambda task: task.artifact(...)``) adds nothing."""
        if isinstance(value, str) and any(a.artifact_id == value for a in self.task.artifacts):
            return
        if self._settled:
            became = "a reply" if self._run.reply is not None else self.state.value
            log.warning(
                "a2a: skill %s returned a %s after its task became %s; the value is dropped",
                self.skill.id,
                type(value).__name__,
                became,
                extra=fields(self._run.task_id, self.skill.id),
            )
            return
        self.artifact(returned_parts(value), name=self.skill.id)

    def hand_off(self, text: str | None = None) -> None:
        """Mark the task WORKING and hand it to work outside this run (a job queue, a thread).

        The run ends without settling the task; the blocking SendMessage answers the WORKING
        task. Code elsewhere continues it with ``A2A.task_updater(task_id)``: the task is
        stored by the time this returns, so enqueue its job after calling this.
        """
        self._run.write_due = True
        self.working(text)
        self._settled = True
        self._run.handed_off = True


class TaskUpdater(TaskMutations):
    """Continues a handed-off task from outside its run (a thread, a job-queue worker).

    Each change re-reads the task, so a cancel (here or on another replica) is seen: once the
    task is terminal, every change raises :class:`TaskCanceled` and nothing is written.
    """

    def __init__(
        self,
        writer: TaskWriter,
        task_id: str,
        context: t.Callable[[], t.ContextManager[object]] = contextlib.nullcontext,
    ) -> None:
        self._writer = writer
        self._task_id = task_id
        #: Entered around each read and write (the Flask wiring: the app's context, pushed
        #: only when the worker has none of that app active).
        self._context = context
        with context():
            record = writer.store.get_task(task_id)
        if record is None:
            raise LookupError(f"no task {task_id!r}")
        self._record = record

    @property
    def task(self) -> Task:
        return self._record.task

    def refresh(self) -> Task:
        """Re-read the task from the store."""
        with self._context():
            record = self._writer.store.get_task(self._task_id)
        if record is None:
            raise TaskCanceled("task is gone")
        self._record = record
        return record.task

    @property
    def cancelled(self) -> bool:
        return self.refresh().status.state is TaskState.CANCELED

    def _commit(self, build: t.Callable[[Task], tuple[Task, StreamEvent | None]]) -> None:
        with self._context():
            for _ in range(16):
                self.refresh()
                if self._record.state.terminal:
                    raise TaskCanceled(f"task is already {self._record.state.value}")
                task, event = build(self._record.task)
                if event is None:
                    return
                try:
                    self._record = self._writer.commit(self._record, task, event)
                    return
                except StaleTaskError:
                    continue
        raise TaskCanceled("task kept changing under the updater")
