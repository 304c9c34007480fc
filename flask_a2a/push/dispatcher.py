"""The in-process scheduling of push deliveries: one lane per config, bounded slots.

Per config, deliveries go one at a time in event order (an appended artifact chunk carries no
sequence number); an event that reaches a config's queue after a newer one is dropped, so the
terminal state is always the last notification a receiver gets. Process-wide at most
:data:`MAX_IN_FLIGHT` configs have a delivery in flight and :data:`MAX_WAITING` further events
wait behind them; one owner holds at most :data:`MAX_PER_OWNER` of each, and only the first
half of each is shared that way: past it, a slot (a waiting place) goes only to an owner with
none, so a few owners whose receivers hold every delivery for its whole deadline leave the
rest of the process to everyone else. Past the bounds an event is dropped with a warning, so a
hung receiver delays only its own config and never the task. What a delivery does (a POST, or
a hand-off to the queue) is the caller's ``send``.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import threading
import time
import typing as t

from ..ops import telemetry
from ..ops.log_fields import fields
from ..ops.metrics import NOOP, Recorder
from ..protocol.model import PushConfig
from ..protocol.scrub import scrub
from .notification import Notification

log = logging.getLogger("flask_a2a")

MAX_IN_FLIGHT: t.Final = 16
MAX_WAITING: t.Final = 16
MAX_PER_OWNER: t.Final = 4
#: Slots in use past which a slot goes only to an owner with none in flight (and waiting
#: places past which a place goes only to an owner with nothing waiting): half of each.
SHARED_IN_FLIGHT: t.Final = MAX_IN_FLIGHT // 2
SHARED_WAITING: t.Final = MAX_WAITING // 2
#: Lanes of settled tasks whose last version is remembered, so a late event is still dropped.
_CLOSED_MEMORY: t.Final = 4096
#: At most one dropped-event warning per config per this many seconds (it carries the count).
DROP_LOG_INTERVAL: t.Final = 10.0

Spawn = t.Callable[[t.Callable[[], None]], None]
#: A drop's log text -> its ``reason`` label.
DROP_REASONS: t.Final = {
    "push queues are full": "queues_full",
    "replaced by the terminal state": "replaced_by_terminal",
}


@dataclasses.dataclass(eq=False)
class _Lane:
    """One config's queue: the newest version it accepted, what waits, whether one is sent."""

    key: tuple[str, str]
    owner: str
    last_version: int = 0
    running: bool = False
    closing: bool = False
    queue: collections.deque[Notification] = dataclasses.field(default_factory=collections.deque)


@dataclasses.dataclass
class _Drops:
    """One config's drops since its last warning line."""

    owner: str
    why: str
    logged_at: float
    unreported: int = 0


class DropLog:
    """The dropped-event warning, rate-limited: a hung receiver drops events as fast as the task
    writes them, and a line per drop would flood the log (thousands a second).

    A config's first drop is logged at once; later ones within ``interval`` are only counted,
    and the next line (the next drop after the interval, or the lane's retirement when the
    task settles) carries how many were dropped since the previous one. Called under the
    dispatcher's lock.
    """

    def __init__(
        self,
        interval: float = DROP_LOG_INTERVAL,
        clock: t.Callable[[], float] = time.monotonic,
        memory: int = _CLOSED_MEMORY,
    ) -> None:
        self.interval = interval
        #: A test seam: seconds, monotonic.
        self.clock = clock
        self.memory = memory
        self._pending: collections.OrderedDict[tuple[str, str], _Drops] = collections.OrderedDict()

    #: Counts drops by reason (``a2a_push_dropped_total``); set by the PushSender.
    metrics: Recorder = NOOP

    def dropped(self, owner: str, config: PushConfig, why: str) -> None:
        self.metrics.push_dropped(DROP_REASONS.get(why, "other"))
        key = (config.task_id, config.id)
        now = self.clock()
        drops = self._pending.get(key)
        if drops is not None and now - drops.logged_at < self.interval:
            drops.unreported += 1
            drops.why = why
            return
        count = 1 + (drops.unreported if drops is not None else 0)
        self._pending[key] = _Drops(owner, why, now)
        self._pending.move_to_end(key)
        self._warn(key, owner, why, count)
        while len(self._pending) > self.memory:
            self.flush(next(iter(self._pending)))

    def flush(self, key: tuple[str, str]) -> None:
        """Forget a config; report the drops its last line did not count."""
        drops = self._pending.pop(key, None)
        if drops is not None and drops.unreported:
            self._warn(key, drops.owner, drops.why, drops.unreported)

    @staticmethod
    def _warn(key: tuple[str, str], owner: str, why: str, count: int) -> None:
        log.warning(
            "a2a: push notification dropped (%s): task %s config %s owner %s "
            "(%d dropped since the last warning for this config)",
            why,
            key[0],
            scrub(key[1]),
            scrub(owner),
            count,
            extra=fields(key[0]),
        )


class Dispatcher:
    """The bounded queues: lanes per config, slots per process and per owner.

    ``shared_in_flight`` / ``shared_waiting``: how many slots / waiting places any owner may
    take (up to ``per_owner``); the rest go one per owner.
    """

    def __init__(
        self,
        send: t.Callable[[Notification], None],
        spawn: Spawn,
        *,
        max_in_flight: int = MAX_IN_FLIGHT,
        max_waiting: int = MAX_WAITING,
        per_owner: int = MAX_PER_OWNER,
        shared_in_flight: int = SHARED_IN_FLIGHT,
        shared_waiting: int = SHARED_WAITING,
    ) -> None:
        self._send = send
        self._spawn = spawn
        self.max_in_flight = max_in_flight
        self.max_waiting = max_waiting
        self.per_owner = per_owner
        self.shared_in_flight = shared_in_flight
        self.shared_waiting = shared_waiting
        self._lock = threading.Lock()
        self._lanes: dict[tuple[str, str], _Lane] = {}
        self._closed: collections.OrderedDict[tuple[str, str], int] = collections.OrderedDict()
        #: Lanes with waiting events and no delivery in flight (their slot was not free).
        self._ready: collections.deque[_Lane] = collections.deque()
        self.in_flight = 0
        self.waiting = 0
        self._owner_in_flight: collections.Counter[str] = collections.Counter()
        self._owner_waiting: collections.Counter[str] = collections.Counter()
        self.drops = DropLog()

    def offer(
        self, owner: str, config: PushConfig, version: int, body: bytes, terminal: bool
    ) -> None:
        """Queue one event for one config, start it, or drop it (stale or over a bound)."""
        key = (config.task_id, config.id)
        job = Notification(config, version, body, telemetry.capture(), owner=owner)
        with self._lock:
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = _Lane(key, owner, self._closed.pop(key, 0))
            if version <= lane.last_version:
                log.debug(
                    "a2a: push event v%d for config %s is stale; dropped", version, scrub(key[1])
                )
                return
            lane.last_version = version
            lane.closing = lane.closing or terminal
            if not lane.running and not lane.queue and self._may_run(owner):
                self._take_slot(lane)
            elif self._may_wait(owner):
                lane.queue.append(job)
                self.waiting += 1
                self._owner_waiting[owner] += 1
                if not lane.running and lane not in self._ready:
                    self._ready.append(lane)
                return
            elif terminal and lane.queue:
                # Keep the terminal state last: it replaces the newest waiting event.
                dropped = lane.queue.pop()
                lane.queue.append(job)
                self.drops.dropped(owner, dropped.config, "replaced by the terminal state")
                return
            else:
                self.drops.dropped(owner, config, "push queues are full")
                if not lane.running and not lane.queue:
                    self._retire(lane)
                return
        self._spawn(functools.partial(self._work, lane, job))

    def _may_run(self, owner: str) -> bool:
        held = self._owner_in_flight[owner]
        if self.in_flight >= self.max_in_flight or held >= self.per_owner:
            return False
        return not held or self.in_flight < self.shared_in_flight

    def _may_wait(self, owner: str) -> bool:
        held = self._owner_waiting[owner]
        if self.waiting >= self.max_waiting or held >= self.per_owner:
            return False
        return not held or self.waiting < self.shared_waiting

    def _take_slot(self, lane: _Lane) -> None:
        lane.running = True
        self.in_flight += 1
        self._owner_in_flight[lane.owner] += 1

    def _pop(self, lane: _Lane) -> Notification:
        self.waiting -= 1
        self._owner_waiting[lane.owner] -= 1
        if not self._owner_waiting[lane.owner]:
            del self._owner_waiting[lane.owner]
        return lane.queue.popleft()

    def _retire(self, lane: _Lane) -> None:
        """Forget an idle settled lane, remembering its last version a while (under the lock).

        A paused or running task's lane stays: its last version still filters late events.
        """
        if not lane.closing or self._lanes.get(lane.key) is not lane:
            return
        del self._lanes[lane.key]
        self.drops.flush(lane.key)
        self._closed[lane.key] = lane.last_version
        while len(self._closed) > _CLOSED_MEMORY:
            self._closed.popitem(last=False)

    def _work(self, lane: _Lane, job: Notification | None) -> None:
        """Send the lane's events in order, then hand the slot to a lane waiting for one."""
        handoff: list[tuple[_Lane, Notification]] = []
        while job is not None:
            self._send(job)
            with self._lock:
                if lane.queue:
                    job = self._pop(lane)
                    continue
                job = None
                lane.running = False
                self.in_flight -= 1
                self._owner_in_flight[lane.owner] -= 1
                if not self._owner_in_flight[lane.owner]:
                    del self._owner_in_flight[lane.owner]
                self._retire(lane)
                handoff = self._schedule()
        for next_lane, next_job in handoff:
            self._spawn(functools.partial(self._work, next_lane, next_job))

    def _schedule(self) -> list[tuple[_Lane, Notification]]:
        """Start waiting lanes whose owner may run, oldest first (call under the lock)."""
        started: list[tuple[_Lane, Notification]] = []
        for lane in list(self._ready):
            if self.in_flight >= self.max_in_flight:
                break
            if lane.running or not lane.queue:
                self._ready.remove(lane)
                continue
            if self._may_run(lane.owner):
                self._ready.remove(lane)
                self._take_slot(lane)
                started.append((lane, self._pop(lane)))
        return started
