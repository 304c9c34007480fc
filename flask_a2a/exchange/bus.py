"""The in-process event bus: every stored change of a task, in version order, to its streams.

Each event carries the version its write produced, so a subscriber that starts from a snapshot
skips what the snapshot already reflects. A subscriber that falls behind is closed rather than
allowed to block the run that publishes.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import threading
import typing as t

from ..protocol.jsonrpc import encode
from ..protocol.model import StreamEvent
from ..protocol.wire import dump_event
from .runner import gevent_patched


class BusEvent:
    """One stored change of a task, as its streams and webhooks get it."""

    __slots__ = ("task_id", "version", "event", "_json", "final", "gone", "local", "stale")

    def __init__(
        self,
        task_id: str,
        version: int,
        event: StreamEvent | None,
        result_json: str | None,
        final: bool,
        gone: bool = False,
        local: bool = False,
    ) -> None:
        self.task_id = task_id
        #: The task version this event's write produced.
        self.version = version
        self.event = event
        self._json = result_json
        #: Terminal or interrupted: streams close after sending it.
        self.final = final
        #: The task was removed (retention): streams end without an event.
        self.gone = gone
        #: Only this process's streams need it (a settled task trimmed by retention: no run
        #: and no stream elsewhere waits on it), so a bus shared by replicas sends it nowhere.
        self.local = local
        #: Events of the task may have been lost on the way here (a shared bus came back
        #: after an outage): its streams read the stored task (:meth:`lost`).
        self.stale = False

    @property
    def result_json(self) -> str:
        """The StreamResponse, JSON-encoded once for every stream and webhook: when the
        writer did not need it (an event holding nothing a handler gave, so nothing JSON
        could refuse), at the first stream or webhook that asks."""
        if self._json is None:
            self._json = encode(dump_event(t.cast(StreamEvent, self.event)))
        return self._json

    @classmethod
    def removed(cls, task_id: str, *, local: bool = False) -> BusEvent:
        """The task was deleted: its streams end with no event (a version past any write)."""
        return cls(task_id, 2**62, None, "", final=True, gone=True, local=local)

    @classmethod
    def noted(cls, task_id: str, version: int) -> BusEvent:
        """A write with nothing to show (a follow-up kept in the task's history): streams only
        note its version, so the next event's does not look like a gap (:attr:`quiet`)."""
        return cls(task_id, version, None, "", final=False)

    @property
    def quiet(self) -> bool:
        """Made by :meth:`noted` (here or, through a shared bus, in another process)."""
        return self._json == "" and not self.gone and not self.stale

    @classmethod
    def lost(cls, task_id: str) -> BusEvent:
        """Events of the task may not have reached this process (a bus shared by replicas
        reconnected): its streams read the stored task and send what they missed."""
        event = cls(task_id, 0, None, "", final=False, local=True)
        event.stale = True
        return event

    def __repr__(self) -> str:
        return f"BusEvent({self.task_id!r}, version={self.version}, final={self.final})"


@dataclasses.dataclass(frozen=True)
class BusHooks:
    """What a bus shared by several processes needs from its exchange (``fleet/redis_bus.py``)."""

    #: Runs background work (a greenlet under gevent, a daemon thread otherwise).
    spawn: t.Callable[[t.Callable[[], None]], None]
    #: The task's run lives in this process.
    running: t.Callable[[str], bool]
    #: Another process settled the task at this version: cut our run of it, if any.
    settled_elsewhere: t.Callable[[str, int], None]
    #: The stored task as a stream event (result JSON, version, final), or None when gone.
    snapshot: t.Callable[[str], tuple[str, int, bool] | None]


class Subscription:
    """One stream's view of one task: a bounded queue it drains at its own pace (one reader).

    Under gevent an idle reader parks on the hub (with a timer) and the queue is
    made at the first event: an idle stream's subscription is a few hundred bytes, and its
    greenlet parks at a shallow depth of C stack (a parked greenlet keeps that on the heap).
    Under threads it waits on a condition.
    """

    __slots__ = (
        "bus",
        "task_id",
        "limit",
        "closed",
        "reason",
        "_events",
        "_cond",
        "_hub",
        "_waiter",
        "_wakeup",
        "_thread",
    )

    def __init__(self, bus: Bus, task_id: str, limit: int) -> None:
        self.bus = bus
        self.task_id = task_id
        self.limit = limit
        self.closed = False
        #: Why the subscription was closed from outside ("overflow", "evicted", ...).
        self.reason = ""
        self._events: collections.deque[BusEvent] | None = None
        #: Under gevent, while parked: the parked greenlet's switch, and the wake-up scheduled.
        self._waiter: t.Any = None
        self._wakeup: t.Any = None
        self._hub, self._thread = _gevent_hub()
        self._cond = threading.Condition(threading.Lock()) if self._hub is None else None

    def push(self, event: BusEvent) -> None:
        if self._cond is None:
            self._queue(event)
            self._wake()
            return
        with self._cond:
            self._queue(event)
            self._cond.notify()

    def _queue(self, event: BusEvent) -> None:
        if self.closed:
            return
        if self._events is None:
            self._events = collections.deque()
        if len(self._events) >= self.limit:
            self.closed, self.reason = True, "overflow"
        else:
            self._events.append(event)

    def get(self, timeout: float | None) -> BusEvent | None:
        """The next event; None on timeout or once closed (check :attr:`closed`)."""
        if self._cond is None:
            if not self._events and not self.closed and (timeout is None or timeout > 0):
                self._park(timeout)
            return self._next()
        with self._cond:
            if not self._events and not self.closed:
                self._cond.wait(timeout)
            return self._next()

    def _next(self) -> BusEvent | None:
        if self.closed:
            return None
        return self._events.popleft() if self._events else None

    def _park(self, timeout: float | None) -> None:
        """Under gevent: wait on the hub until woken by :meth:`_wake` or ``timeout``.

        The greenlet parks on the hub itself: the timer and the wake-up switch straight to it,
        and whichever did not wake it is cancelled before it runs on, so neither can switch
        to it later (a stray switch would land in some other wait of this greenlet)."""
        from greenlet import getcurrent

        hub = self._hub
        switch = getcurrent().switch
        timer = None
        if timeout is not None:
            timer = hub.loop.timer(timeout)
            timer.start(switch)
        self._waiter = switch
        try:
            hub.switch()
        finally:
            self._waiter = None
            if timer is not None:
                timer.close()
            wakeup, self._wakeup = self._wakeup, None
            if wakeup is not None:
                wakeup.stop()

    def _wake(self) -> None:
        switch, self._waiter = self._waiter, None
        if switch is None:
            return
        # Switched to from the hub's callbacks; from another OS thread, through its wake-up.
        if _thread_id() == self._thread:
            self._wakeup = self._hub.loop.run_callback(switch)
        else:
            self._wakeup = self._hub.loop.run_callback_threadsafe(switch)

    def close(self, reason: str = "closed") -> None:
        if self._cond is None:
            if not self.closed:
                self.closed, self.reason = True, reason
            self._wake()
        else:
            with self._cond:
                if not self.closed:
                    self.closed, self.reason = True, reason
                self._cond.notify_all()
        self.bus.unsubscribe(self)


def _gevent_hub() -> tuple[t.Any, int]:
    """(the hub, its OS thread) under gevent; (None, 0) under threads."""
    if not gevent_patched():
        return None, 0
    from gevent import get_hub

    return get_hub(), _thread_id()


@functools.cache
def _os_get_ident() -> t.Callable[[], int]:
    from gevent.monkey import get_original

    return t.cast(t.Callable[[], int], get_original("_thread", "get_ident"))


def _thread_id() -> int:
    """The OS thread's id (under gevent, ``threading.get_ident`` names the greenlet)."""
    return _os_get_ident()()


class Bus:
    """Task id -> subscriptions. Publishing never blocks on a subscriber."""

    def __init__(self, queue_limit: int = 1024) -> None:
        self.queue_limit = queue_limit
        self._lock = threading.Lock()
        self._subs: dict[str, list[Subscription]] = {}

    def subscribe(self, task_id: str) -> Subscription:
        sub = Subscription(self, task_id, self.queue_limit)
        with self._lock:
            self._subs.setdefault(task_id, []).append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> bool:
        """Drop ``sub``; False when it was dropped already."""
        with self._lock:
            subs = self._subs.get(sub.task_id)
            if not subs or sub not in subs:
                return False
            subs.remove(sub)
            if not subs:
                del self._subs[sub.task_id]
            return True

    def publish(self, event: BusEvent) -> None:
        if event.task_id not in self._subs:  # nobody listens (a blocking send): no lock taken
            return  # (a dict lookup is atomic; a subscriber arriving now missed it either way)
        with self._lock:
            subs = list(self._subs.get(event.task_id, ()))
        for sub in subs:
            sub.push(event)

    def subscriber_count(self, task_id: str) -> int:
        with self._lock:
            return len(self._subs.get(task_id, ()))

    # -- what a bus shared by replicas adds; the in-process bus has nothing to do

    def bind(self, hooks: BusHooks) -> None:
        """Wire the bus to its exchange (called once by the exchange)."""

    def listen(self) -> None:
        """A run started here: a shared bus makes sure it hears foreign settles."""

    def live(self) -> bool:
        """Events written by other processes arrive through this bus, one by one, right now.

        False here: another process's writes are seen only by polling the store.
        """
        return False

    def close(self) -> None:
        """Stop background work (a shared bus's reader)."""
