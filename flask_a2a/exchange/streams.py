"""Server-Sent Events: frames, keep-alives, per-owner stream seats, and the relay generator.

A stream pins a bus subscription for its whole life, so an owner's concurrent streams are
seated. At the cap an owner's next stream is refused (HTTP 429) or, with ``evict-oldest``,
their oldest stream is closed and the new one seated.
"""

from __future__ import annotations

import threading
import time
import typing as t

from ..ops.metrics import NOOP, Recorder
from ..protocol.errors import StreamSeatsExhaustedError
from ..protocol.model import Message, Task
from . import peer
from .bus import BusEvent, Subscription
from .runner import gevent_patched

T = t.TypeVar("T")

KEEPALIVE: t.Final = ": keep-alive\n\n"
_KEEPALIVE: t.Final = KEEPALIVE.encode()
HEADERS: t.Final = (
    ("Content-Type", "text/event-stream; charset=utf-8"),
    ("Cache-Control", "no-store"),
    ("X-Accel-Buffering", "no"),
)


class Feed(t.Protocol):
    """What a stream asks of its exchange (``stream_replies.TaskFeed``)."""

    def wrap(self, result_json: str) -> str:
        """A StreamResponse's JSON as the event sent (a whole JSON-RPC response, or as is)."""

    def still_allowed(self) -> bool:
        """Re-resolves the caller (at each keep-alive); False ends the stream."""

    def refused(self) -> str:
        """The last event of a stream whose caller no longer resolves (a -31401 error)."""

    def poll(self, version: int) -> tuple[str, int, bool] | None:
        """The stored task when newer than ``version`` (result JSON, version, final)."""

    def catch_up(self, version: int) -> tuple[str, int, bool] | None:
        """The stored task when newer than ``version``, read whoever runs it: the stream
        missed events (a gap in their versions, or the bus came back after an outage)."""


def frame(response_json: str) -> str:
    """One SSE event holding one complete JSON-RPC response."""
    return "data: " + response_json + "\n\n"


def off_stack(fn: t.Callable[[], T], undo: t.Callable[[T], None]) -> T:
    """``fn()``, under gevent on a short-lived greenlet (in a copy of the caller's context).

    A greenlet's Python frames live in its own data stack, and every page a deep call touches
    there stays in the process's memory for as long as the greenlet lives: for a stream's
    greenlet, as long as the stream is open. Opening a stream goes deepest (the params readers,
    store reads), so it runs here, and the stream's greenlet keeps one page.

    The helper is a plain greenlet the caller switches to and that returns to it (no trip
    through the hub, and no gevent spawn record, which would keep the caller's frames).

    :param undo: takes back what ``fn`` returned when the caller was interrupted (killed, timed
        out) while ``fn`` waited for I/O: nobody else will.
    """
    if not gevent_patched():
        return fn()
    import contextvars

    from greenlet import greenlet

    helper = _Helper(contextvars.copy_context(), fn, undo)
    child = greenlet(helper.run)  # its parent: this greenlet, which it returns to
    try:
        done, value = child.switch()
    except BaseException:
        if not child.dead:  # parked on I/O: it finishes on its own, into the hub, and undoes
            from gevent import get_hub

            helper.abandoned = True
            child.parent = get_hub()
        raise
    if not done:
        raise value
    return t.cast(T, value)


class _Helper:
    __slots__ = ("context", "fn", "undo", "abandoned")

    def __init__(self, context: t.Any, fn: t.Callable[[], t.Any], undo: t.Callable[[t.Any], None]):
        self.context = context
        self.fn = fn
        self.undo = undo
        self.abandoned = False

    def run(self) -> tuple[bool, t.Any]:
        """The outcome as a value (an exception is the caller's to raise, in its greenlet)."""
        try:
            value = self.context.run(self.fn)
        except BaseException as exc:  # noqa: BLE001 (handed back to the caller, who raises it)
            return False, exc
        if self.abandoned:
            self.undo(value)
        return True, value


class Seat:
    """One open stream of one owner; evicting it closes the stream's subscription."""

    __slots__ = ("seats", "owner", "subscription", "evicted", "released")

    def __init__(self, seats: Seats, owner: str) -> None:
        self.seats = seats
        self.owner = owner
        self.subscription: Subscription | None = None
        self.evicted = False
        self.released = False

    def evict(self) -> None:
        self.evicted = True
        if self.subscription is not None:
            self.subscription.close("evicted")

    def release(self) -> None:
        self.seats.release(self)

    def client_left(self) -> None:
        """The client closed its connection: free the seat now, and end the stream (its next
        write would only fail)."""
        self.release()
        if self.subscription is not None:
            self.subscription.close("client left")


class Seats:
    #: Counts seats in use and refusals (``a2a_stream_seats_in_use``); set by the exchange.
    metrics: Recorder = NOOP

    def __init__(self, per_owner: int, overflow: str, metrics: Recorder = NOOP) -> None:
        self.metrics = metrics
        self.per_owner = per_owner
        self.overflow = overflow
        self._lock = threading.Lock()
        self._held: dict[str, list[Seat]] = {}

    def take(self, owner: str) -> Seat:
        """Seat a new stream, or raise :class:`StreamSeatsExhaustedError` (nothing changes)."""
        seat = Seat(self, owner)
        evicted: Seat | None = None
        with self._lock:
            held = self._held.setdefault(owner, [])
            if 0 <= self.per_owner <= len(held):
                if self.overflow != "evict-oldest" or not held:
                    if not held:
                        del self._held[owner]
                    self.metrics.seat_refused()
                    raise StreamSeatsExhaustedError()
                evicted = held.pop(0)
                evicted.released = True
            held.append(seat)
        self.metrics.seat_taken()
        if evicted is not None:
            self.metrics.seat_released()
            evicted.evict()
        return seat

    def release(self, seat: Seat) -> None:
        with self._lock:
            if seat.released:
                return
            seat.released = True
            self.metrics.seat_released()
            held = self._held.get(seat.owner, [])
            if seat in held:
                held.remove(seat)
            if not held:
                self._held.pop(seat.owner, None)

    def count(self, owner: str) -> int:
        return len(self._held.get(owner, ()))

    def in_use(self) -> int:
        """Seats held by every owner (the console's operators panel)."""
        with self._lock:
            return sum(len(held) for held in self._held.values())


class Relay:
    """A stream body: iterates the relay generator, whose events come encoded (UTF-8 bytes:
    the server can write them as they are); ``close()`` frees the seat even when the client
    left before the generator ever started (closing an unstarted generator runs no
    ``finally``)."""

    __slots__ = ("_events", "_subscription", "_seat")

    def __init__(self, events: t.Iterator[bytes], subscription: Subscription, seat: Seat) -> None:
        self._events = events
        self._subscription = subscription
        self._seat = seat

    def __iter__(self) -> t.Iterator[bytes]:
        return self._events

    def __next__(self) -> bytes:
        return next(self._events)

    def client_left(self) -> None:
        """The caller is gone (a gRPC call cancelled): free the seat now and end the stream
        where it waits, from any thread (the generator itself may be running in another)."""
        self._seat.release()
        self._subscription.close("client left")

    def close(self) -> None:
        close = getattr(self._events, "close", None)
        if close is not None:
            close()
        self._subscription.close()
        self._seat.release()


def relay(
    *,
    first: str | None,
    first_version: int,
    first_final: bool,
    subscription: Subscription,
    seat: Seat,
    keepalive: float,
    feed: Feed,
    poll_interval: float | None = None,
    client_socket: t.Any = None,
    snapshot: t.Callable[[], tuple[str, int, bool] | None] | None = None,
    ends: t.Callable[[BusEvent], bool] | None = None,
) -> Relay:
    """The body of one stream: yields the snapshot, then every newer event, until a final
    one; keep-alive when idle.

    :param first: the snapshot's StreamResponse JSON; ``None`` for a task its run still
        holds: the first event then comes from the bus (:func:`_opening`).
    :param first_version: the snapshot's version (an event skipping past it reads the store).
    :param first_final: the snapshot ends the stream.
    :param subscription: the task's bus subscription, and ``seat`` the stream's seat: both
        released when the stream ends or is closed unread.
    :param keepalive: seconds between keep-alives when idle.
    :param snapshot: reads the stored task (result JSON, version, final) for a held task.
    :param feed: the exchange's side (one object: an idle stream holds little): ``wrap`` turns
        a StreamResponse's JSON into the event sent; ``still_allowed`` re-resolves the caller
        at each keep-alive (False ends the stream); ``poll`` reads the store for a newer
        version than the one given (replicas, or a run that ended without settling).
    :param poll_interval: poll this often when idle (a store shared by replicas); by default
        the store is polled only at keep-alives.
    :param client_socket: the connection's socket, when the server exposes it: a client that
        leaves frees its seat at once instead of at the next keep-alive (``peer.py``).
    :param ends: whether a bus event ends the stream (by default its ``final`` flag).
    """
    events = _relay(
        first,
        first_version,
        first_final,
        subscription,
        seat,
        keepalive,
        feed,
        poll_interval,
        client_socket,
        snapshot,
        ends,
    )
    return Relay(events, subscription, seat)


def _opening(
    subscription: Subscription,
    keepalive: float,
    feed: Feed,
    snapshot: t.Callable[[], tuple[str, int, bool] | None] | None,
    left: t.Callable[[], bool] | None = None,
) -> t.Generator[bytes, None, tuple[str, int, bool] | None]:
    """Wait for a held task's first event (keep-alives meanwhile): the Task the run shows at
    its handler's first change, or the one Message it replies with instead (final). A first
    event of another kind (a shutdown's cancel) is answered with the stored task.

    :param left: under threads, says whether the client left (looked at while idle)."""
    beat_at = time.monotonic() + keepalive
    while True:
        wait = max(0.0, beat_at - time.monotonic())
        event = subscription.get(wait if left is None else min(wait, peer.CHECK_INTERVAL))
        if event is None:
            if subscription.closed or (left is not None and left()):
                return None
            if time.monotonic() < beat_at:
                continue
            if not feed.still_allowed():
                yield frame(feed.refused()).encode()
                return None
            yield _KEEPALIVE
            beat_at = time.monotonic() + keepalive
            continue
        if event.gone:
            return None
        if event.stale or event.quiet:
            continue  # a held task is this run's alone: nothing can have been lost
        if isinstance(event.event, (Task, Message)):
            return event.result_json, event.version, event.final
        return snapshot() if snapshot is not None else None


def _relay(
    first: str | None,
    first_version: int,
    first_final: bool,
    subscription: Subscription,
    seat: Seat,
    keepalive: float,
    feed: Feed,
    poll_interval: float | None,
    client_socket: t.Any,
    snapshot: t.Callable[[], tuple[str, int, bool] | None] | None,
    ends: t.Callable[[BusEvent], bool] | None,
) -> t.Iterator[bytes]:
    """The events of :func:`relay` (its parameters, in order)."""
    seat.subscription = subscription
    watching: peer.Watch | None = None
    check_left = False
    try:
        if seat.evicted:
            return
        if peer.watchable(client_socket):
            watching = peer.watch(client_socket, seat.client_left)
            check_left = watching is None  # no watcher waits for it: look when idle
        if first is None:
            left = (lambda: peer.left(client_socket)) if check_left else None
            opened = yield from _opening(subscription, keepalive, feed, snapshot, left)
            if opened is None:
                return
            first, first_version, first_final = opened
        yield frame(feed.wrap(first)).encode()
        if first_final:
            return
        first = None  # shown: an idle stream need not hold the snapshot's JSON
        version = first_version
        every = keepalive if poll_interval is None else min(keepalive, poll_interval)
        wait = min(every, peer.CHECK_INTERVAL) if check_left else every
        beat_at = time.monotonic() + keepalive
        due = time.monotonic() + every
        while True:
            event = subscription.get(wait)
            if event is None:
                if subscription.closed:
                    return
                if check_left and peer.left(client_socket):
                    return
                if wait < every:
                    if time.monotonic() < due:
                        continue  # woke only to look at the client's socket
                    due = time.monotonic() + every
                beat = poll_interval is None or time.monotonic() >= beat_at
                if beat and not feed.still_allowed():
                    yield frame(feed.refused()).encode()
                    return
                polled = feed.poll(version)
                if polled is not None:
                    result_json, version, final = polled
                    yield frame(feed.wrap(result_json)).encode()
                    if final:
                        return
                    beat_at = time.monotonic() + keepalive
                    continue
                if beat:
                    yield _KEEPALIVE
                    beat_at = time.monotonic() + keepalive
                continue
            if event.gone:
                return
            if event.stale or event.version > version + 1:
                # Events between the last shown and this one were lost (a bus outage) or
                # never sent: the stored task holds them, so send it instead.
                caught = feed.catch_up(version)
                if caught is not None and (event.stale or caught[1] >= event.version):
                    result_json, version, final = caught
                    yield frame(feed.wrap(result_json)).encode()
                    if final:
                        return
                    continue
                if event.stale:
                    continue
            if event.version <= version:
                continue  # already reflected by the snapshot (or a poll)
            version = event.version
            if event.quiet:
                continue  # a write with nothing to show (a follow-up in history)
            yield frame(feed.wrap(event.result_json)).encode()
            if event.final if ends is None else ends(event):
                return
    finally:
        if watching is not None:
            watching.stop()
        subscription.close()
        seat.release()
