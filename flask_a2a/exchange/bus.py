"""The in-process event bus: every stored change of a task, in version order, to its streams.

Each event carries the version its write produced, so a subscriber that starts from a snapshot
skips what the snapshot already reflects. A subscriber that falls behind is closed rather than
allowed to block the run that publishes.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import typing as t

from ..protocol.jsonrpc import encode
from ..protocol.model import StreamEvent
from ..protocol.wire import dump_event


class BusEvent:
    """One stored change of a task, as its streams and webhooks get it."""

    __slots__ = ("task_id", "version", "event", "_json", "final", "gone", "local")

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

    @property
    def result_json(self) -> str:
        """The StreamResponse, JSON-encoded once for every stream and webhook: when the
        writer did not need it (an event holding nothing a handler gave, so nothing JSON
        could refuse), at the first stream or webhook that asks."""
        if self._json is None:
            self._json = encode(dump_event(t.cast(StreamEvent, self.event)))
        return self._json

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
    """One stream's view of one task: a bounded queue it drains at its own pace."""

    def __init__(self, bus: Bus, task_id: str, limit: int) -> None:
        self.bus = bus
        self.task_id = task_id
        self.limit = limit
        self.closed = False
        #: Why the subscription was closed from outside ("overflow", "evicted", ...).
        self.reason = ""
        self._events: collections.deque[BusEvent] = collections.deque()
        self._cond = threading.Condition(threading.Lock())

    def push(self, event: BusEvent) -> None:
        with self._cond:
            if self.closed:
                return
            if len(self._events) >= self.limit:
                self.closed, self.reason = True, "overflow"
            else:
                self._events.append(event)
            self._cond.notify()

    def get(self, timeout: float | None) -> BusEvent | None:
        """The next event; None on timeout or once closed (check :attr:`closed`)."""
        with self._cond:
            if not self._events and not self.closed:
                self._cond.wait(timeout)
            if self.closed:
                return None
            return self._events.popleft() if self._events else None

    def close(self, reason: str = "closed") -> None:
        with self._cond:
            if not self.closed:
                self.closed, self.reason = True, reason
            self._cond.notify_all()
        self.bus.unsubscribe(self)


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
