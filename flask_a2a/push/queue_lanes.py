"""What the push queue holds in Redis, and for how long: each lane change is one script that
keeps its owner's byte count, the lane's lifetime and its task's index true.

A lane (``push/queue.py``) is a Redis list of one config's notifications, each a JSON string
holding the body. Three bounds keep Redis from growing with what no worker delivers:

- **Bytes per owner.** An owner's queued notifications hold at most
  ``A2A_PUSH_QUEUE_MAX_BYTES_PER_OWNER`` bytes (their JSON as stored); one that would pass it is
  dropped at the door, with one log line per owner per :data:`DROP_LOG_INTERVAL`. The count is
  a field of the owner's hash, changed in the same script as the lane (push, pop, rewrite,
  delete), so concurrent app processes and workers never see it wrong.
- **Lifetime.** A lane lives :meth:`Lanes.ttl_ms` after its last change: the retry window of
  one notification (its waits and attempts) plus :data:`LANE_MARGIN`, not days. Its owner's
  hash remembers when each lane lapses; the owner's next hand-off subtracts the lapsed lanes
  from the count (and logs them: a worker that never came).
- **The task.** A task's index (lane -> owner) lets retention, erasure and
  DeleteTaskPushNotificationConfig delete what waits for the task or the config; a deleted
  task's mark refuses, for a lane's lifetime, what the app hands over for it afterwards (a
  notification that waited in process while the task was deleted).

Keys (under the queue's base): ``owner:<o>`` (hash: ``total``, ``b:<lane>`` bytes,
``t:<lane>`` task id), ``due:<o>`` (sorted set: lane -> ms it lapses), ``task:<task id>``
(hash: lane -> ``<o>``), ``gone:<task id>`` (the mark), where ``<o>`` is :func:`owner_id`.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import threading
import time
import typing as t

from ..ops.log_fields import fields
from ..protocol.model import PushConfig
from ..protocol.scrub import scrub
from .dispatcher import DROP_LOG_INTERVAL

if t.TYPE_CHECKING:
    import redis

log = logging.getLogger("flask_a2a")

#: Seconds a lane outlives one notification's retry window: a lane job waiting for a free worker.
LANE_MARGIN: t.Final = 300.0
#: Lapsed lanes one hand-off clears from its owner's count (the next hand-offs clear the rest).
SWEEP_LIMIT: t.Final = 32
#: A task's own keys: its lanes' index and its delivery status.
KINDS: t.Final = ("task", "status")
#: Owners whose drop count waits for its next log line.
_WARN_MEMORY: t.Final = 4096

#: Shared by the scripts. ``touch`` renews a lane's lifetime with its owner's and task's keys;
#: ``uncount`` takes ``size`` bytes of lane ``id`` off its owner's count (nil: all it held,
#: and it leaves the owner's hash). A lane with no ``b:`` field was queued before the count
#: existed: nothing to take off.
_LIB: t.Final = """
local function touch(lane, owner, due, task, id, ttl, now)
  if redis.call('EXISTS', lane) == 0 then return end
  redis.call('PEXPIRE', lane, ttl)
  redis.call('ZADD', due, now + ttl, id)
  redis.call('PEXPIRE', due, ttl)
  redis.call('PEXPIRE', owner, ttl)
  redis.call('PEXPIRE', task, ttl)
end
local function uncount(owner, due, id, size)
  local held = tonumber(redis.call('HGET', owner, 'b:' .. id) or '-1')
  if held < 0 then return end
  if size == nil or size >= held then
    redis.call('HINCRBY', owner, 'total', -held)
    redis.call('HDEL', owner, 'b:' .. id, 't:' .. id)
    redis.call('ZREM', due, id)
  else
    redis.call('HINCRBY', owner, 'total', -size)
    redis.call('HINCRBY', owner, 'b:' .. id, -size)
  end
end
"""

#: KEYS: lane, last, busy, paused, owner, due, task, gone. ARGV: version, payload, max lane,
#: lease ms, last's ttl s, token, lane id, task id, owner id, cap (< 0: none), ttl ms, now ms,
#: lane key prefix, lapsed lanes to clear at most. Returns {code, lapsed lanes cleared, the
#: owner's bytes}: code 1 (queued; start a job holding ``token``), 0 (queued behind the lane's
#: job), -1 paused, -2 stale, -3 lane full, -4 past the owner's cap, -5 its task was deleted.
_OFFER: t.Final = (
    _LIB
    + """
local now = tonumber(ARGV[12])
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now, 'LIMIT', 0, ARGV[14])
for _, id in ipairs(lapsed) do
  uncount(KEYS[5], KEYS[6], id, nil)
  redis.call('DEL', ARGV[13] .. id)
end
local total = tonumber(redis.call('HGET', KEYS[5], 'total') or '0')
if redis.call('EXISTS', KEYS[8]) == 1 then return {-5, #lapsed, total} end
if redis.call('EXISTS', KEYS[4]) == 1 then return {-1, #lapsed, total} end
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[1]) <= last then return {-2, #lapsed, total} end
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[3]) then return {-3, #lapsed, total} end
local size = string.len(ARGV[2])
local cap = tonumber(ARGV[10])
if cap >= 0 and total + size > cap then return {-4, #lapsed, total} end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[5])
redis.call('RPUSH', KEYS[1], ARGV[2])
redis.call('HINCRBY', KEYS[5], 'total', size)
redis.call('HINCRBY', KEYS[5], 'b:' .. ARGV[7], size)
redis.call('HSET', KEYS[5], 't:' .. ARGV[7], ARGV[8])
redis.call('HSET', KEYS[7], ARGV[7], ARGV[9])
touch(KEYS[1], KEYS[5], KEYS[6], KEYS[7], ARGV[7], tonumber(ARGV[11]), now)
local started = 0
if redis.call('SET', KEYS[3], ARGV[6], 'NX', 'PX', ARGV[4]) then started = 1 end
return {started, #lapsed, total + size}
"""
)

#: KEYS: lane, owner, due, task. ARGV: lane id, ttl ms, now ms. The head delivered or given
#: up: 1 popped, 0 the lane was empty (deleted meanwhile).
_POP: t.Final = (
    _LIB
    + """
local item = redis.call('LPOP', KEYS[1])
if not item then return 0 end
if redis.call('LLEN', KEYS[1]) == 0 then
  uncount(KEYS[2], KEYS[3], ARGV[1], nil)
else
  uncount(KEYS[2], KEYS[3], ARGV[1], string.len(item))
  touch(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))
end
return 1
"""
)

#: KEYS: lane, owner, due, task. ARGV: the head rewritten (its attempts), lane id, ttl ms,
#: now ms. 1 rewritten, 0 the lane was empty.
_SET_HEAD: t.Final = (
    _LIB
    + """
local old = redis.call('LINDEX', KEYS[1], 0)
if not old then return 0 end
redis.call('LSET', KEYS[1], 0, ARGV[1])
local delta = string.len(ARGV[1]) - string.len(old)
if redis.call('HEXISTS', KEYS[2], 'b:' .. ARGV[2]) == 1 then
  redis.call('HINCRBY', KEYS[2], 'total', delta)
  redis.call('HINCRBY', KEYS[2], 'b:' .. ARGV[2], delta)
end
touch(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]))
return 1
"""
)

#: KEYS: lane, owner, due. ARGV: lane id. Empties the lane; returns what it held.
_TAKE_ALL: t.Final = (
    _LIB
    + """
local items = redis.call('LRANGE', KEYS[1], 0, -1)
redis.call('DEL', KEYS[1])
uncount(KEYS[2], KEYS[3], ARGV[1], nil)
return items
"""
)

#: KEYS: lane, owner, due, last, busy, fails, paused. ARGV: lane id. Deletes the lane and its
#: bookkeeping (its task or config is gone); returns how many notifications it held.
_DROP: t.Final = (
    _LIB
    + """
local held = redis.call('LLEN', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
uncount(KEYS[2], KEYS[3], ARGV[1], nil)
return held
"""
)


def lane_id(task_id: str, config_id: str) -> str:
    """A fixed-length Redis-safe name for one config's lane."""
    return hashlib.sha256(f"{task_id}\0{config_id}".encode()).hexdigest()[:32]


def owner_id(owner: str) -> str:
    """A fixed-length Redis-safe name for an owner (the owner itself never reaches Redis)."""
    return hashlib.sha256(owner.encode()).hexdigest()[:32]


class Offered(t.NamedTuple):
    """What one hand-off found: its code (see ``_OFFER``), lapsed lanes cleared, the owner's
    bytes after it."""

    code: int
    lapsed: int
    held: int


class OwnerWarnings:
    """One warning line per owner and kind per ``interval``, the next one carrying the count
    (an owner past its cap drops every event of every task: a line each would flood the log)."""

    def __init__(
        self, interval: float = DROP_LOG_INTERVAL, clock: t.Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        #: A test seam: seconds, monotonic.
        self.clock = clock
        self._lock = threading.Lock()
        #: (owner, kind) -> (when last logged, count not logged yet)
        self._pending: collections.OrderedDict[tuple[str, str], tuple[float, int]] = (
            collections.OrderedDict()
        )

    def due(self, owner: str, kind: str, count: int = 1) -> int:
        """Count ``count`` more; the count to log now (0: it waits for the next line)."""
        key, now = (owner, kind), self.clock()
        with self._lock:
            logged, unreported = self._pending.pop(key, (None, 0))
            unreported += count
            if logged is not None and now - logged < self.interval:
                self._pending[key] = (logged, unreported)
                return 0
            self._pending[key] = (now, 0)
            while len(self._pending) > _WARN_MEMORY:
                self._pending.popitem(last=False)
            return unreported


class Lanes:
    """The queue's lanes in Redis, each change one script (see the module's docstring).

    An ``owner_key`` is :func:`owner_id` of the owner; the log lines take the owner itself.

    :param base: the queue's key prefix (``<A2A_REDIS_PREFIX>push:<queue>:``).
    :param max_bytes: ``A2A_PUSH_QUEUE_MAX_BYTES_PER_OWNER`` (negative: no cap).
    :param ttl: seconds a lane lives after its last change.
    """

    def __init__(self, connection: redis.Redis, base: str, max_bytes: int, ttl: float) -> None:
        self.redis = connection
        self.base = base
        self.max_bytes = max_bytes
        self.ttl = ttl
        self.warnings = OwnerWarnings()
        self._offer = connection.register_script(_OFFER)
        self._pop = connection.register_script(_POP)
        self._set_head = connection.register_script(_SET_HEAD)
        self._take_all = connection.register_script(_TAKE_ALL)
        self._drop = connection.register_script(_DROP)

    def key(self, kind: str, name: str) -> str:
        return f"{self.base}{kind}:{name}"

    def ttl_ms(self) -> int:
        return int(self.ttl * 1000)

    def _keys(self, lane: str, owner_key: str, task_id: str) -> list[str]:
        return [
            self.key("lane", lane),
            self.key("owner", owner_key),
            self.key("due", owner_key),
            self.key("task", task_id),
        ]

    # ------------------------------------------------------------------ the app's side

    def offer(
        self,
        lane: str,
        task_id: str,
        owner_key: str,
        version: int,
        payload: str,
        *,
        max_lane: int,
        lease_ms: int,
        last_ttl: int,
        token: str,
    ) -> Offered:
        """Append ``payload`` to ``lane`` unless paused, stale, full or past the owner's cap."""
        keys = [self.key(kind, lane) for kind in ("lane", "last", "busy", "paused")]
        keys += [self.key("owner", owner_key), self.key("due", owner_key)]
        keys += [self.key("task", task_id), self.key("gone", task_id)]
        args: list[str | int] = [
            version,
            payload,
            max_lane,
            lease_ms,
            last_ttl,
            token,
            lane,
            task_id,
            owner_key,
            self.max_bytes,
            self.ttl_ms(),
            int(time.time() * 1000),
            self.key("lane", ""),
            SWEEP_LIMIT,
        ]
        code, lapsed, held = (int(n) for n in self._offer(keys, args))
        return Offered(code, lapsed, held)

    def over_cap(self, owner: str, config: PushConfig, held: int) -> None:
        """Log a drop past ``owner``'s cap (rate-limited per owner)."""
        count = self.warnings.due(owner, "cap")
        if count:
            log.warning(
                "a2a: push notification dropped (its owner's queued notifications hold %d "
                "bytes, the cap is A2A_PUSH_QUEUE_MAX_BYTES_PER_OWNER=%d): task %s config %s "
                "owner %s (%d dropped since the last warning for this owner)",
                held,
                self.max_bytes,
                config.task_id,
                scrub(config.id),
                scrub(owner),
                count,
                extra=fields(config.task_id),
            )

    def lapsed(self, owner: str, lanes: int) -> None:
        """Log lanes that lapsed undelivered (rate-limited per owner): no worker took them."""
        count = self.warnings.due(owner, "lapsed", lanes)
        if count:
            log.warning(
                "a2a: %d push queue lane(s) of owner %s lapsed undelivered: no worker took "
                "them within %gs of their last change (is `flask a2a push-worker` running?)",
                count,
                scrub(owner),
                self.ttl,
            )

    # ------------------------------------------------------------------ the worker's side

    def pop(self, lane: str, owner_key: str, task_id: str) -> None:
        """The lane's head was delivered or given up."""
        now = int(time.time() * 1000)
        self._pop(self._keys(lane, owner_key, task_id), [lane, self.ttl_ms(), now])

    def set_head(self, lane: str, owner_key: str, task_id: str, raw: str) -> None:
        """The lane's head, rewritten (its attempt count)."""
        now = int(time.time() * 1000)
        self._set_head(self._keys(lane, owner_key, task_id), [raw, lane, self.ttl_ms(), now])

    def take_all(self, lane: str, owner_key: str) -> list[bytes]:
        """Empty the lane (a paused config); what it held."""
        keys = [self.key("lane", lane)] + [self.key(kind, owner_key) for kind in ("owner", "due")]
        return list(self._take_all(keys, [lane]))

    # ------------------------------------------------------------------ deletion

    def drop_task(self, task_id: str) -> int:
        """Delete what waits for a deleted task, its index and its delivery status; how many
        notifications were deleted."""
        self._bury([task_id])
        index = self.redis.hgetall(self.key("task", task_id))
        dropped = self._drop_lanes([(_text(lane), _text(o)) for lane, o in index.items()])
        self.redis.delete(*[self.key(kind, task_id) for kind in KINDS])
        return dropped

    def drop_config(self, task_id: str, config_id: str) -> int:
        """Delete what waits for a deleted config; how many notifications were deleted."""
        lane = lane_id(task_id, config_id)
        owner = self.redis.hget(self.key("task", task_id), lane)
        dropped = self._drop_lanes([(lane, _text(owner) if owner is not None else "-")])
        self.redis.hdel(self.key("task", task_id), lane)
        return dropped

    def drop_owner(self, owner: str, task_ids: t.Iterable[str] = ()) -> int:
        """Delete everything queued for an erased owner, and the indexes and delivery status of
        its tasks (those queued for, and ``task_ids``); how many notifications were deleted."""
        owner_key = owner_id(owner)
        task_ids = list(task_ids)
        self._bury(task_ids)
        held = self.redis.hgetall(self.key("owner", owner_key))
        task_of: dict[str, str] = {}  # lane -> its task
        for field, value in held.items():
            name = _text(field)
            if name.startswith("t:"):
                task_of[name[2:]] = _text(value)
        dropped = self._drop_lanes([(lane, owner_key) for lane in task_of])
        tasks = sorted(set(task_of.values()).union(task_ids))
        self.redis.delete(self.key("owner", owner_key), self.key("due", owner_key))
        for start in range(0, len(tasks), 500):
            chunk = tasks[start : start + 500]
            self.redis.delete(*[self.key(kind, task) for task in chunk for kind in KINDS])
        return dropped

    def _bury(self, task_ids: list[str]) -> None:
        """Mark deleted tasks for a lane's lifetime: a notification the app hands over after
        the deletion (it waited in process meanwhile) is refused, not queued again."""
        for start in range(0, len(task_ids), 500):
            with self.redis.pipeline(transaction=False) as pipe:
                for task_id in task_ids[start : start + 500]:
                    pipe.set(self.key("gone", task_id), 1, px=self.ttl_ms())
                pipe.execute()

    def _drop_lanes(self, lanes: list[tuple[str, str]]) -> int:
        if not lanes:
            return 0
        with self.redis.pipeline(transaction=False) as pipe:
            for lane, owner_key in lanes:
                keys = [self.key("lane", lane)]
                keys += [self.key(kind, owner_key) for kind in ("owner", "due")]
                keys += [self.key(kind, lane) for kind in ("last", "busy", "fails", "paused")]
                self._drop(keys, [lane], client=pipe)
            return sum(int(n) for n in pipe.execute())


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
