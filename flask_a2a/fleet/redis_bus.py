"""A bus shared by replicas, on Redis: every event of a task reaches its streams on every replica.

The in-process :class:`~flask_a2a.exchange.bus.Bus` still delivers each event to this process's
streams at once; :class:`RedisBus` also hands it to the replicas that watch the task, through Redis
Streams (not pub/sub: a stream is read from a position, so a reader that lost its connection
for a moment reads on from its last id and misses nothing Redis still holds; pub/sub drops
whatever is published while a subscriber reconnects). Keys, all under ``A2A_REDIS_PREFIX``
and all expiring, so nothing grows with the number of tasks ever run:

- ``w:<task>``: a sorted set of the replicas streaming the task, scored by lease expiry
  (Redis time, ms), refreshed by each replica's heartbeat and dropped when its stream ends;
- ``in:<replica>``: the replica's inbox, a stream of the events of the tasks it watches
  (``XADD MAXLEN ~``): one reader per process reads one key however many streams it serves;
- ``ctl``: settles written by a process that does not run the task (a cancel, a
  ``TaskUpdater``): every replica reads it and cuts its run of the task at once.

A publish is one round trip (a script that fans the event out to the watchers' inboxes, none
when nobody watches), skipped for a task's first write (nobody elsewhere can know the task
before it is stored). While Redis does not answer, nothing waits on it: one log line, runs go
on, streams and cancels fall back to polling the store, and per-event delivery resumes once the
reader reconnects (it re-registers its watches; streams keep polling a little longer, until
every replica has had time to reconnect too).

Needs the ``redis`` extra (``pip install flask-a2a[redis]``) and one Redis (not Redis Cluster:
the fan-out script writes the inboxes it reads from the watch set).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import typing as t
import uuid

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..config import ConfigError
from ..exchange.bus import Bus, BusEvent, BusHooks, Subscription
from ..protocol.scrub import scrub

if t.TYPE_CHECKING:
    from ..config import Settings

log = logging.getLogger("flask_a2a")

#: Seconds between reconnect attempts while Redis does not answer (``A2A_REDIS_RETRY``).
RETRY: t.Final = 0.5
#: Entries an inbox keeps (a reader further behind than this loses the oldest).
INBOX_LEN: t.Final = 10_000
CTL_LEN: t.Final = 1_000
#: Tasks whose events could not be fanned out during an outage, re-sent as snapshots after it.
DROPPED_LIMIT: t.Final = 1024

_NOW_MS = (
    "local now = redis.call('TIME') "
    "local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) "
)

#: KEYS: watch set, ctl. ARGV: origin, task, version, final, gone, json, key ttl ms,
#: notify, prefix, inbox length, ctl length. Returns the number of inboxes written.
_PUBLISH: t.Final = (
    _NOW_MS
    + """
local sent = 0
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if member ~= ARGV[1] then
    local inbox = ARGV[9] .. 'in:' .. member
    redis.call('XADD', inbox, 'MAXLEN', '~', ARGV[10], '*',
      't', ARGV[2], 'v', ARGV[3], 'f', ARGV[4], 'g', ARGV[5], 'j', ARGV[6])
    redis.call('PEXPIRE', inbox, ARGV[7])
    sent = sent + 1
  end
end
if ARGV[8] == '1' then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[11], '*',
    't', ARGV[2], 'v', ARGV[3], 'o', ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[7])
end
return sent
"""
)

#: KEYS: watch sets. ARGV: replica id, lease ttl ms. Returns Redis time in ms, then the
#: (1-based) index of each key that did not hold the replica: a watch lapsed or lost (a
#: Redis restarted empty), so the task's events of that while never reached the replica.
_WATCH: t.Final = (
    _NOW_MS
    + """
local out = {ms}
for i, key in ipairs(KEYS) do
  if redis.call('ZADD', key, ms + tonumber(ARGV[2]), ARGV[1]) == 1 then
    out[#out + 1] = i
  end
  redis.call('PEXPIRE', key, ARGV[2])
end
return out
"""
)


def connect(url: str, timeout: float) -> redis.Redis:
    """A client whose every call gives up after ``timeout`` (no retries: an outage is noticed
    once and handled by the caller, not waited out request by request)."""
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        decode_responses=True,
    )


class RedisBus(Bus):
    """The in-process bus plus Redis fan-out to the other replicas watching a task.

    :param url: ``redis://host:port/db``.
    :param prefix: every key starts with it (one Redis shared by several apps or tests).
    :param timeout: seconds any Redis call may take.
    :param lease_ttl: seconds a watch lives without this process's heartbeat (ttl / 3).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "a2a:",
        timeout: float = 0.5,
        lease_ttl: float = 10.0,
        queue_limit: int = 1024,
        retry: float = RETRY,
    ) -> None:
        if timeout <= 0:
            raise ConfigError("A2A_REDIS_TIMEOUT must be positive")
        if lease_ttl <= 0:
            raise ConfigError("A2A_REDIS_LEASE_TTL must be positive")
        if retry <= 0:
            raise ConfigError("A2A_REDIS_RETRY must be positive")
        super().__init__(queue_limit)
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        self.lease_ttl = lease_ttl
        #: Seconds between reconnect attempts while Redis does not answer.
        self.retry = retry
        #: This process's name in watch sets and on the ctl stream.
        self.replica_id = uuid.uuid4().hex
        self.redis = connect(url, timeout)
        self._block = min(1.0, lease_ttl / 3)
        self._reader = connect(url, timeout + self._block)
        self._publish = self.redis.register_script(_PUBLISH)
        self._watch = self.redis.register_script(_WATCH)
        self._hooks: BusHooks | None = None
        self._state = threading.Lock()
        self._down = False
        self._retry_at = 0.0
        self._trusted_at = 0.0
        self._reader_pid = 0
        self._reader_live = False
        self._closed = False
        #: task id -> local subscriptions (what this process watches).
        self._watched: dict[str, int] = {}
        self._dropped: set[str] = set()

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisBus:
        assert settings.redis_url
        return cls(
            settings.redis_url,
            prefix=settings.redis_prefix,
            timeout=settings.redis_timeout,
            lease_ttl=settings.redis_lease_ttl,
            retry=settings.redis_retry,
        )

    def key(self, name: str) -> str:
        return self.prefix + name

    @property
    def inbox(self) -> str:
        return self.key("in:" + self.replica_id)

    # ------------------------------------------------------------------ Redis health

    def usable(self) -> bool:
        """Worth calling Redis now: it answered last time, or the retry pause is over."""
        return not self._down or time.monotonic() >= self._retry_at

    def failed(self, exc: BaseException) -> None:
        """A Redis call failed: pause calls for :attr:`retry` s; log the outage once."""
        with self._state:
            self._retry_at = time.monotonic() + self.retry
            if self._down:
                return
            self._down = True
        log.warning(
            "a2a: Redis does not answer (%s): streams and cancels across replicas fall back "
            "to polling the store until it does",
            scrub(repr(exc)),
        )

    def answered(self) -> None:
        """A Redis call succeeded: after an outage, resume per-event delivery."""
        if not self._down:
            return
        with self._state:
            if not self._down:
                return
            self._down = False
            # Other replicas reconnect within their retry pause: until then their events may
            # not reach us, so streams keep polling the store a little longer.
            self._trusted_at = time.monotonic() + 2 * self.retry
            dropped, self._dropped = self._dropped, set()
        log.warning("a2a: Redis answers again: per-event delivery across replicas resumed")
        if dropped and self._hooks is not None:
            self._hooks.spawn(lambda: self._resync(dropped))

    def ping(self) -> None:
        """One round trip (the health route): raises when Redis does not answer."""
        self.redis.ping()

    def live(self) -> bool:
        return self._reader_live and not self._down and time.monotonic() >= self._trusted_at

    # ------------------------------------------------------------------ the Bus protocol

    def bind(self, hooks: BusHooks) -> None:
        self._hooks = hooks

    def listen(self) -> None:
        self._ensure_reader()

    def subscribe(self, task_id: str) -> Subscription:
        sub = super().subscribe(task_id)
        with self._state:
            first = task_id not in self._watched
            self._watched[task_id] = self._watched.get(task_id, 0) + 1
        # Watching before the caller reads its snapshot: a write after that read is fanned
        # out to us; a write before it is in the snapshot.
        if first and self.usable():
            try:
                self._watch(keys=[self.key("w:" + task_id)], args=[self.replica_id, self._ttl_ms])
            except redis.RedisError as exc:
                self.failed(exc)
            else:
                self.answered()
        self._ensure_reader()
        return sub

    def unsubscribe(self, sub: Subscription) -> bool:
        if not super().unsubscribe(sub):
            return False
        with self._state:
            left = self._watched.get(sub.task_id, 0) - 1
            if left > 0:
                self._watched[sub.task_id] = left
                return True
            self._watched.pop(sub.task_id, None)
        if self.usable():
            try:
                self.redis.zrem(self.key("w:" + sub.task_id), self.replica_id)
            except redis.RedisError as exc:
                self.failed(exc)  # the watch expires on its own
        return True

    def publish(self, event: BusEvent) -> None:
        super().publish(event)  # this process's streams first, at once
        if event.version <= 1 or event.local:
            return  # a task's first write (nobody elsewhere can know the task yet), or news
            # for this process only (a settled task retention removed)
        hooks = self._hooks
        notify = event.final and hooks is not None and not hooks.running(event.task_id)
        self._send(event.task_id, event.version, event.result_json, event.final, event.gone,
                   notify)  # fmt: skip

    def close(self) -> None:
        self._closed = True

    # ------------------------------------------------------------------ internals

    @property
    def _ttl_ms(self) -> int:
        return max(1, int(self.lease_ttl * 1000))

    def _send(
        self, task_id: str, version: int, result_json: str, final: bool, gone: bool,
        notify: bool,
    ) -> None:  # fmt: skip
        if not self.usable():
            self._drop(task_id)
            return
        try:
            self._publish(
                keys=[self.key("w:" + task_id), self.key("ctl")],
                args=[
                    self.replica_id,
                    task_id,
                    version,
                    int(final),
                    int(gone),
                    result_json,
                    max(self._ttl_ms * 6, 60_000),
                    int(notify),
                    self.prefix,
                    INBOX_LEN,
                    CTL_LEN,
                ],
            )
        except redis.RedisError as exc:
            self.failed(exc)
            self._drop(task_id)
            return
        self.answered()

    def _drop(self, task_id: str) -> None:
        with self._state:
            if len(self._dropped) < DROPPED_LIMIT:
                self._dropped.add(task_id)

    def _resync(self, task_ids: set[str]) -> None:
        """After an outage: send the stored state of every task whose events were lost."""
        assert self._hooks is not None
        for task_id in task_ids:
            try:
                found = self._hooks.snapshot(task_id)
            except Exception as exc:
                log.warning("a2a: reading a task to resend after a Redis outage failed: %s",
                            scrub(repr(exc)))  # fmt: skip
                continue
            if found is not None:
                result_json, version, final = found
                self._send(task_id, version, result_json, final, False, False)

    def _ensure_reader(self) -> None:
        """One reader per process (started lazily: after a fork the child starts its own)."""
        pid = os.getpid()
        if self._reader_pid == pid or self._closed or self._hooks is None:
            return
        with self._state:
            if self._reader_pid == pid:
                return
            self._reader_pid = pid
        self._hooks.spawn(self._read_loop)

    def _register(self) -> tuple[int, list[str]]:
        """(Re-)watch every task this process streams: Redis time in ms, and the tasks whose
        watch had lapsed (their events of that while were fanned out to nobody here)."""
        with self._state:
            task_ids = list(self._watched)
        found = self._watch(
            keys=[self.key("w:" + task_id) for task_id in task_ids],
            args=[self.replica_id, self._ttl_ms],
        )
        return int(found[0]), [task_ids[int(i) - 1] for i in found[1:]]

    def _catch_up(self, task_ids: t.Iterable[str]) -> None:
        """Events of these tasks may have been lost: their streams here read the stored task
        (registered first, so whatever is written after that read is fanned out to us)."""
        for task_id in task_ids:
            Bus.publish(self, BusEvent.lost(task_id))

    def _read_loop(self) -> None:
        cursor: dict[str, str] = {}
        connected = False
        beat_at = 0.0
        while not self._closed:
            try:
                if not connected or time.monotonic() >= beat_at:
                    now_ms, lapsed = self._register()
                    beat_at = time.monotonic() + self.lease_ttl / 3
                    if not cursor:  # the inbox is ours alone: all of it; ctl: the recent past
                        cursor = {self.inbox: "0-0", self.key("ctl"): f"{now_ms - 2000}-0"}
                    elif not connected:  # back after an outage: what it held may be lost
                        with self._state:
                            lapsed = list(self._watched)
                    connected = self._reader_live = True
                    self.answered()
                    self._catch_up(lapsed)
                found = t.cast(
                    "list[tuple[str, list[tuple[str, dict[str, str]]]]] | None",
                    self._reader.xread(
                        t.cast(t.Any, cursor), count=512, block=int(self._block * 1000)
                    ),
                )
            except redis.RedisError as exc:
                connected = self._reader_live = False
                self.failed(exc)
                time.sleep(self.retry)
                continue
            for key, entries in found or ():
                for entry_id, fields in entries:
                    cursor[key] = entry_id
                    try:
                        self._received(key, fields)
                    except Exception as exc:  # one bad entry must not end the reader
                        log.error("a2a: a Redis bus entry could not be handled: %s",
                                  scrub(repr(exc)))  # fmt: skip
        self._reader_live = False

    def _received(self, key: str, fields: dict[str, str]) -> None:
        if key == self.inbox:
            Bus.publish(self, BusEvent(
                fields["t"], int(fields["v"]), None, fields["j"],
                final=fields["f"] == "1", gone=fields["g"] == "1",
            ))  # fmt: skip
        elif fields.get("o") != self.replica_id and self._hooks is not None:
            self._hooks.settled_elsewhere(fields["t"], int(fields["v"]))
