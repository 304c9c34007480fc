"""Fleet-wide limits: an owner's run slots and stream seats counted across every replica.

Opt-in (``A2A_FLEET_LIMITS``; needs the Redis bus). Each slot or seat taken is a lease: a
member of a sorted set per owner (``runs:<owner>``, ``seats:<owner>``) scored by its expiry in
Redis time. One script drops the lapsed members, counts, and adds the new lease, so replicas
taking slots at once never both get the last one. The process holding leases pushes their
expiry every ``A2A_REDIS_LEASE_TTL / 3``; a replica that dies stops doing so, and its leases
lapse within ``A2A_REDIS_LEASE_TTL``: a killed replica does not hold seats forever. While
Redis does not answer, each process counts alone (the per-process limit, as without this
option) and the bus logs the outage once.
"""

from __future__ import annotations

import threading
import time
import typing as t
import uuid

import redis

from ..config import ConfigError, Settings
from ..exchange.runner import RunSlots
from ..exchange.streams import Seat, Seats
from ..ops.metrics import NOOP, Recorder
from ..protocol.errors import StreamSeatsExhaustedError
from .redis_bus import RedisBus

#: A slot taken while Redis did not answer: counted by this process alone.
LOCAL: t.Final = ""

_NOW_MS = (
    "local now = redis.call('TIME') "
    "local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) "
)
#: KEYS: the owner's set. ARGV: lease id, cap, ttl ms. 1 = taken, 0 = at the cap.
_TAKE: t.Final = (
    _NOW_MS
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
)
#: KEYS: sets; ARGV: ttl ms, then one lease id per key. A lease lost with a Redis restart is
#: added back: it is a run or a stream that still exists.
_REFRESH: t.Final = (
    _NOW_MS
    + """
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, ms + tonumber(ARGV[1]), ARGV[i + 1])
  redis.call('PEXPIRE', key, ARGV[1])
end
return #KEYS
"""
)


class Leases:
    """This process's leases of one kind (``runs`` or ``seats``), kept alive by a heartbeat."""

    def __init__(
        self, bus: RedisBus, kind: str, spawn: t.Callable[[t.Callable[[], None]], None]
    ) -> None:
        self.bus = bus
        self.kind = kind
        self._spawn = spawn
        self._take = bus.redis.register_script(_TAKE)
        self._refresh = bus.redis.register_script(_REFRESH)
        self._lock = threading.Lock()
        #: lease id -> its set's key.
        self._held: dict[str, str] = {}
        self._beating = False

    @property
    def _ttl_ms(self) -> int:
        return max(1, int(self.bus.lease_ttl * 1000))

    def take(self, owner: str, cap: int) -> str | None:
        """A lease id; None at the cap; :data:`LOCAL` when Redis does not answer."""
        if not self.bus.usable():
            return LOCAL
        lease, key = uuid.uuid4().hex, self.bus.key(f"{self.kind}:{owner}")
        try:
            taken = self._take(keys=[key], args=[lease, cap, self._ttl_ms])
        except redis.RedisError as exc:
            self.bus.failed(exc)
            return LOCAL
        self.bus.answered()
        if not taken:
            return None
        with self._lock:
            self._held[lease] = key
            start, self._beating = not self._beating, True
        if start:
            self._spawn(self._beat)
        return lease

    def drop(self, lease: str) -> None:
        with self._lock:
            key = self._held.pop(lease, None)
        if key is None or not self.bus.usable():
            return  # a lease Redis lost, or cannot hear about now, lapses on its own
        try:
            self.bus.redis.zrem(key, lease)
        except redis.RedisError as exc:
            self.bus.failed(exc)

    def held(self) -> int:
        return len(self._held)

    def _beat(self) -> None:
        while True:
            time.sleep(self.bus.lease_ttl / 3)
            with self._lock:
                if not self._held:
                    self._beating = False
                    return
                items = list(self._held.items())
            if not self.bus.usable():
                continue
            try:
                self._refresh(
                    keys=[key for _, key in items],
                    args=[self._ttl_ms, *(lease for lease, _ in items)],
                )
            except redis.RedisError as exc:
                self.bus.failed(exc)
            else:
                self.bus.answered()


class FleetRunSlots(RunSlots):
    """Per-owner run slots counted across replicas (a lease per run)."""

    def __init__(self, per_owner: int, leases: Leases) -> None:
        super().__init__(per_owner)
        self.leases = leases
        #: owner -> this process's leases (LOCAL: taken while Redis did not answer).
        self._owned: dict[str, list[str]] = {}

    def acquire(self, owner: str) -> bool:
        lease = self.leases.take(owner, self.per_owner)
        if lease is None:
            return False
        with self._lock:
            owned = self._owned.setdefault(owner, [])
            if lease == LOCAL and len(owned) >= self.per_owner:
                if not owned:
                    del self._owned[owner]
                return False
            owned.append(lease)
        return True

    def release(self, owner: str) -> None:
        with self._lock:
            owned = self._owned.get(owner)
            if not owned:
                return
            lease = owned.pop()
            if not owned:
                del self._owned[owner]
        if lease != LOCAL:
            self.leases.drop(lease)

    def held(self, owner: str) -> int:
        return len(self._owned.get(owner, ()))


class FleetSeats(Seats):
    """Per-owner stream seats counted across replicas. At the fleet's cap a new stream is
    refused (``evict-oldest`` still applies to the owner's streams on this replica)."""

    def __init__(
        self, per_owner: int, overflow: str, leases: Leases, metrics: Recorder = NOOP
    ) -> None:
        super().__init__(per_owner, overflow, metrics)
        self.leases = leases
        self._lease_lock = threading.Lock()
        self._leases: dict[Seat, str] = {}

    def take(self, owner: str) -> Seat:
        seat = super().take(owner)  # this replica's cap and overflow policy first
        self._drop_evicted()
        lease = self.leases.take(owner, self.per_owner)
        if lease is None:
            super().release(seat)
            self.metrics.seat_refused()
            raise StreamSeatsExhaustedError()
        if lease != LOCAL:
            with self._lease_lock:
                self._leases[seat] = lease
        return seat

    def release(self, seat: Seat) -> None:
        super().release(seat)
        with self._lease_lock:
            lease = self._leases.pop(seat, None)
        if lease is not None:
            self.leases.drop(lease)

    def _drop_evicted(self) -> None:
        """Seats evicted by ``evict-oldest`` are released without :meth:`release`."""
        with self._lease_lock:
            gone = [seat for seat in self._leases if seat.released]
            leases = [self._leases.pop(seat) for seat in gone]
        for lease in leases:
            self.leases.drop(lease)


class FleetLimits(t.NamedTuple):
    """The exchange's per-owner run slots and stream seats, each counted across the fleet
    (None: that cap is off, the exchange's own serves)."""

    slots: RunSlots | None
    seats: Seats | None


def fleet_limits(
    settings: Settings,
    bus: object,
    spawn: t.Callable[[t.Callable[[], None]], None],
    metrics: Recorder,
) -> FleetLimits:
    """Count the exchange's per-owner run slots and stream seats across the fleet (given to the
    exchange when it is built: ``methods.Exchange(slots=, seats=)``)."""
    if not isinstance(bus, RedisBus):
        raise ConfigError(
            "A2A_FLEET_LIMITS needs the Redis bus: set A2A_REDIS_URL or pass bus=RedisBus(...)"
        )
    # Each agent of an app counts its own (its caps are its own); the default agent's keys
    # are the ones a one-agent fleet always used.
    agent = "" if settings.agent == "default" else f"{settings.agent}:"
    slots = seats = None
    if settings.max_concurrent_runs_per_owner >= 0:
        slots = FleetRunSlots(
            settings.max_concurrent_runs_per_owner, Leases(bus, f"{agent}runs", spawn)
        )
    if settings.max_stream_seats_per_owner >= 0:
        seats = FleetSeats(
            settings.max_stream_seats_per_owner,
            settings.stream_seat_overflow,
            Leases(bus, f"{agent}seats", spawn),
            metrics,
        )
    return FleetLimits(slots, seats)
