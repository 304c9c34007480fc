"""The one place that changes a task: save, then publish, then push.

Every change of a task, whoever makes it (a run, a cancel, retention, a handed-off worker),
goes through :meth:`TaskWriter.commit`: it encodes the event (refusing data JSON cannot hold,
before anything is written), stores the new task naming the version it read, publishes the event
with the version the write produced, and queues push deliveries.

A run's last write is tried again when the store fails it (a dropped connection gets a fresh
one), with the same content, so a try that finds its own first try stored (the database took
it, its answer was lost) is that write. A run's writes share one bound while the store does not
answer (:class:`WriteBound`): its caller is answered the store-unavailable error once it passes.
"""

from __future__ import annotations

import logging
import time
import typing as t

from ..ops.log_fields import fields
from ..protocol.errors import (
    A2AError,
    TaskNotStored,
    UnencodableDataError,
)
from ..protocol.jsonrpc import encode
from ..protocol.model import (
    UNSET,
    Message,
    Part,
    PushConfig,
    StreamEvent,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    utcnow,
)
from ..protocol.scrub import scrub
from ..protocol.wire import dump_event, task_event_json
from ..store.base import (
    StaleTaskError,
    Store,
    TaskRecord,
    store_failed,
    unavailable_error,
    unreachable,
)
from ..store.sql_waits import Until, time_left, waits_until
from .bus import Bus, BusEvent

log = logging.getLogger("flask_a2a")

#: Tries of a run's last write, and the waits between them: a write that met a dropped
#: connection gets a fresh one (SQLAlchemy discards the pool's connections on a disconnect).
SETTLE_TRIES: t.Final = 3
SETTLE_BACKOFF: t.Final = (0.05, 0.25)


class WriteBound:
    """One bound for a run's writes while its store does not answer.

    Each write waits ``seconds`` at most, all its tries together (``sql_waits.waits_until``).
    A write the store failed starts the bound: the run's next writes (its settle, a held
    task's write) share what is left of it, and one that would start past it fails at once
    with the store-unavailable error, so a blocking caller hears within ``seconds`` of the
    write that met the outage, not a bound per try. A write the store answers ends it.
    """

    __slots__ = ("seconds", "deadline")

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        #: When the writes after a failed one must have ended (``time.monotonic()``).
        self.deadline: float | None = None

    def trying(self) -> _Trying:
        """One write within the bound (a context manager)."""
        return _Trying(self)


class _Trying:
    """One write within a :class:`WriteBound`. A class, not a generator: every write of every
    run enters one, and a generator's context manager costs several calls more."""

    __slots__ = ("bound", "seconds", "started", "deadline", "until")

    def __init__(self, bound: WriteBound) -> None:
        self.bound = bound
        self.seconds = bound.seconds
        self.started = 0.0
        self.deadline: float | None = None
        self.until: Until | None = None

    def __enter__(self) -> None:
        seconds = self.seconds
        if seconds is None:
            return
        started = self.started = time.monotonic()
        deadline = self.deadline = self.bound.deadline
        if deadline is not None and started >= deadline:
            raise TaskNotStored("the store did not answer", unavailable_error())
        until = self.until = waits_until(started + seconds if deadline is None else deadline)
        until.__enter__()

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        until = self.until
        if until is None:
            return
        until.__exit__(kind, exc, tb)
        bound = self.bound
        if exc is None:
            bound.deadline = None
        elif isinstance(exc, Exception):
            if not store_failed(exc):
                bound.deadline = None  # the store answered (a conflict, a refusal)
            elif self.deadline is None and self.seconds is not None:
                bound.deadline = self.started + self.seconds


def storing(record: TaskRecord | None = None, bound: WriteBound | None = None) -> _Storing:
    """A run's write: a store failure reaches the handler as :class:`TaskNotStored`, so the
    driver's text (SQL, hosts) goes to the log only, never into a status message; a database
    that did not answer is the store-unavailable error for the caller. Within ``bound``."""
    return _Storing(record, bound)


class _Storing:
    """What :func:`storing` returns (a class: it is entered on every write of every run)."""

    __slots__ = ("record", "trying")

    def __init__(self, record: TaskRecord | None, bound: WriteBound | None) -> None:
        self.record = record
        self.trying = _Trying(bound) if bound is not None else None

    def __enter__(self) -> None:
        if self.trying is not None:
            try:
                self.trying.__enter__()
            except Exception as exc:
                self._failed(exc)

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if self.trying is not None:
            self.trying.__exit__(kind, exc, tb)
        if exc is None or not isinstance(exc, Exception):
            return
        if isinstance(exc, (StaleTaskError, UnencodableDataError)):
            return
        self._failed(exc)

    def _failed(self, exc: Exception) -> t.NoReturn:
        answer = getattr(exc, "answer", None)
        if isinstance(answer, A2AError):  # the store's refusal for the caller; it logged why
            raise TaskNotStored("the task could not be stored", answer) from None
        record = self.record
        extra = fields(record.task.id, record.skill) if record is not None else {}
        log.error("a2a: writing a task failed: %s", scrub(repr(exc)), extra=extra)
        outage = unavailable_error() if unreachable(exc) else None
        raise TaskNotStored("the task could not be stored", outage) from None


def finalize_failed(what: str, then: str, exc: BaseException, extra: t.Mapping[str, t.Any]) -> None:
    """What ends a run (its settle, the trim after it) failed. The store failing (its database
    gone, a timeout) is an outage, logged as one with what becomes of the write (``then``:
    owed, or left to the next settle); anything else is a bug ("run finalize panicked")."""
    if store_failed(exc):
        log.error("a2a: %s failed: the store did not take it (%s); %s", what, scrub(repr(exc)),
                  then, extra=extra)  # fmt: skip
    else:
        log.error("a2a: run finalize panicked: %s", scrub(repr(exc)), extra=extra)


def is_final(state: TaskState) -> bool:
    """Terminal or interrupted: a run ends there, and so does a stream."""
    return state.terminal or state.interrupted


def _plain_part(part: Part) -> bool:
    return (
        type(part.text) is str
        and part.data is UNSET
        and part.metadata is None
        and part.filename is None
        and part.media_type is None
    )


def _plain_parts(parts: t.Iterable[Part]) -> bool:
    """Every part is :func:`_plain_part` (a loop: ``all()`` over a generator costs each write
    a call per part more)."""
    for part in parts:
        if not _plain_part(part):
            return False
    return True


def _nothing_to_refuse(event: StreamEvent) -> bool:
    """The event holds no JSON value a handler gave (data, metadata) and only ``str`` text
    parts: JSON cannot refuse it, so it need not be encoded to be checked. Anything else is
    checked by encoding it."""
    if type(event) is TaskStatusUpdateEvent:
        message = event.status.message
        return event.metadata is None and (
            message is None
            or (
                type(message.message_id) is str
                and message.metadata is None
                and not message.extensions
                and not message.reference_task_ids
                and _plain_parts(message.parts)
            )
        )
    if type(event) is TaskArtifactUpdateEvent:
        artifact = event.artifact
        return (
            event.metadata is None
            and type(artifact.artifact_id) is str
            and artifact.metadata is None
            and not artifact.extensions
            and (artifact.name is None or type(artifact.name) is str)
            and (artifact.description is None or type(artifact.description) is str)
            and _plain_parts(artifact.parts)
        )
    return False


class PushDelivery(t.Protocol):
    """What the exchange asks of push delivery (``push.webhooks.PushSender``, a layer above:
    described here): check and register a task's configs, read them back as their owner is
    answered, deliver each change, and drop what a deleted task or config left queued."""

    def check_url(self, url: str) -> None: ...
    def register(self, record: TaskRecord, params: dict[str, t.Any]) -> PushConfig: ...
    def get_config(self, task_id: str, config_id: str) -> PushConfig | None: ...
    def list_configs(self, task_id: str) -> list[PushConfig]: ...
    def deliver(self, record: TaskRecord, event: BusEvent) -> None: ...
    def task_deleted(self, task_id: str) -> None: ...
    def config_deleted(self, task_id: str, config_id: str) -> None: ...


class TaskWriter:
    """Stores a change, publishes it with its version, and hands it to push delivery."""

    def __init__(
        self,
        store: Store,
        bus: Bus,
        *,
        max_history: int,
        on_final: t.Callable[[TaskRecord], None] | None = None,
        on_event: t.Callable[[TaskRecord, BusEvent], None] | None = None,
        after_store: t.Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.bus = bus
        self.max_history = max_history
        self.on_final = on_final
        self.on_event = on_event
        #: Called after every stored write: the store answers again (``owed.py`` retries).
        self.after_store = after_store

    def _prepare(self, task: Task, event: StreamEvent) -> tuple[Task, str | None]:
        """The event's JSON and the task with its history bounded; refuses unencodable data.

        An event holding only strings where strings go (:func:`_nothing_to_refuse`) is one JSON
        cannot refuse: its JSON is left to the first stream or webhook that needs it
        (``BusEvent.result_json``), which a blocking send usually has none of.
        """
        if _nothing_to_refuse(event):
            result_json = None
        else:
            try:
                result_json = encode(dump_event(event))
            except (TypeError, ValueError, RecursionError) as exc:
                raise UnencodableDataError(f"task data cannot be JSON-encoded: {exc}") from None
        if len(task.history) > self.max_history > 0:
            task = task.evolve(history=task.history[-self.max_history :])
        return task, result_json

    def hold(self, record: TaskRecord, task: Task, event: StreamEvent) -> TaskRecord:
        """Keep a change to a task not written yet in memory; its first :meth:`commit`
        writes it. Nobody outside the run knows the task, so nobody misses the event."""
        task, _ = self._prepare(task, event)
        return record.evolve(task, 0)

    def reveal(self, record: TaskRecord) -> TaskRecord:
        """Write a held task as it stands and publish it whole: a deferred stream's first
        event (the spec's task lifecycle stream begins with the Task)."""
        stored = self.store.create_task(record)
        if self.after_store is not None:
            self.after_store()
        result_json = task_event_json(stored.task)  # the store's own encoding
        self.bus.publish(BusEvent(stored.task.id, stored.version, stored.task, result_json, False))
        return stored

    def append(self, record: TaskRecord, message: Message) -> TaskRecord:
        """Add a caller's follow-up to a running task's history: one write over ``record``'s
        version (:class:`StaleTaskError` if it moved). No stream event and no push: the
        spec's events are status and artifact updates; the message is in the task's history."""
        task = record.task.evolve(history=record.task.history + (message,))
        if len(task.history) > self.max_history > 0:
            task = task.evolve(history=task.history[-self.max_history :])
        stored = self.store.update_task(record.evolve(task, record.version), record.version)
        if self.after_store is not None:
            self.after_store()
        self.bus.publish(BusEvent.noted(stored.task.id, stored.version))  # no gap for streams
        return stored

    def commit(
        self, record: TaskRecord, task: Task, event: StreamEvent, *, tries: int = 1
    ) -> TaskRecord:
        """Store ``task`` over ``record`` (optimistically) and publish ``event``.

        A record of version 0 (not written yet) is created with ``task``. Raises
        :class:`UnencodableDataError` before writing when the event cannot be encoded, and
        :class:`StaleTaskError` when the row moved since ``record`` was read. A write the
        store failed is made ``tries`` times at most (:meth:`_store`).
        """
        task, result_json = self._prepare(task, event)
        first = record.version == 0
        new = self._store(record, task, tries)
        if self.after_store is not None:
            self.after_store()
        final = is_final(task.status.state) and task.status.state is not record.state
        bus_event = BusEvent(task.id, new.version, event, result_json, final)
        self.bus.publish(bus_event)
        # What follows a stored write must not undo it: push and retention are contained.
        if self.on_event is not None and not first:
            try:
                self.on_event(new, bus_event)
            except Exception as exc:
                log.error(
                    "a2a: push delivery panicked: %s",
                    scrub(repr(exc)),
                    extra=fields(task.id, new.skill),
                )
        if final and self.on_final is not None:
            try:
                self.on_final(new)
            except Exception as exc:  # the settle is stored: only the tier's trim waits
                finalize_failed(
                    "retention after a settle",
                    "the tier is trimmed at its next settle",
                    exc,
                    fields(task.id, new.skill),
                )
        return new

    def _store(self, record: TaskRecord, task: Task, tries: int) -> TaskRecord:
        """Write ``task`` over ``record`` (created when nobody knew it: version 0). A try the
        store failed (its database or driver) is made again, the same write, after
        :data:`SETTLE_BACKOFF`, while ``tries`` and the call's bound (``sql_waits``) leave
        room: a try that meets its own earlier one, stored though its answer was lost, is
        that write (the store reads it back), never a conflict."""
        for attempt in range(tries):
            try:
                if record.version == 0:  # nobody knew the task: no subscriber, no push config
                    return self.store.create_task(record.evolve(task, 0))
                return self.store.update_task(record.evolve(task, record.version), record.version)
            except Exception as exc:
                pause = SETTLE_BACKOFF[min(attempt, len(SETTLE_BACKOFF) - 1)]
                left = time_left()
                if (
                    attempt + 1 >= tries
                    or not store_failed(exc)
                    or (left is not None and left <= pause)
                ):
                    raise
                log.warning(
                    "a2a: the store failed a task's write (%s); it is tried again",
                    scrub(repr(exc)),
                    extra=fields(task.id, record.skill),
                )
                time.sleep(pause)
        raise AssertionError("unreachable: the last try returns or raises")

    def set_status(
        self, record: TaskRecord, state: TaskState, message: Message | None = None
    ) -> TaskRecord:
        """Move the task to ``state`` (with an optional agent message kept in history)."""
        task = record.task
        status = TaskStatus(state, utcnow(), message)
        history = task.history + (message,) if message is not None else task.history
        new_task = task.evolve(status=status, history=history)
        event = TaskStatusUpdateEvent(task.id, task.context_id, status)
        return self.commit(record, new_task, event)

    def settle(self, record: TaskRecord, state: TaskState, text: str | None = None) -> TaskRecord:
        """Move to ``state`` against the store, re-reading on conflicts; a terminal row wins.

        Returns the stored record, which is terminal already if someone else settled first.
        Raises :class:`StaleTaskError` (with ``current=None``) if the task is gone.
        """
        while not record.state.terminal:
            message = (
                Message.agent(text, context_id=record.task.context_id, task_id=record.task.id)
                if text
                else None
            )
            try:
                return self.set_status(record, state, message)
            except StaleTaskError as exc:
                if exc.current is None:
                    raise
                record = exc.current
        return record
