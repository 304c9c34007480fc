"""Push notifications: per-task webhook configs and bounded, best-effort delivery.

Every StreamResponse of a task is POSTed (the bare StreamResponse JSON, no JSON-RPC envelope)
to each of the task's configs. A config registered on a task that is not settled first gets
the task as it stands (a ``task`` StreamResponse; the official SDK's first notification is the
task snapshot too), then every later event. Delivery is best effort by design: one attempt,
no retry, a short timeout, and a non-2xx or transport error is logged once. Reliable delivery
with backoff is a job queue's work, never the task's.

Per config, deliveries go one at a time in event order (an appended artifact chunk carries no
sequence number); an event that reaches a config's queue after a newer one is dropped, so the
terminal state is always the last notification a receiver gets. Process-wide at most
:data:`MAX_IN_FLIGHT` configs have a delivery in flight and :data:`MAX_WAITING` further events
wait behind them; one owner holds at most :data:`MAX_PER_OWNER` of each. Past that an event is
dropped with a warning, so a hung receiver delays only its own config and never the task.
Where a push may go is ``ssrf.py``'s concern.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import threading
import time
import typing as t
from urllib.parse import urlsplit

import requests

from ..exchange.bus import BusEvent
from ..ops import telemetry
from ..ops.log_fields import fields
from ..ops.metrics import NOOP, Recorder
from ..protocol import v03
from ..protocol.errors import InvalidParamsError
from ..protocol.model import PushConfig, new_id
from ..protocol.scrub import scrub
from ..protocol.wire import task_event_json
from ..store.base import Store, TaskRecord
from . import ssrf
from .notification import Notification
from .secrets import PushSecrets

if t.TYPE_CHECKING:
    from .queue import PushQueue
    from .tokens import NotificationSigner

log = logging.getLogger("flask_a2a")

MAX_IN_FLIGHT: t.Final = 16
MAX_WAITING: t.Final = 16
MAX_PER_OWNER: t.Final = 4
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


@dataclasses.dataclass(eq=False, slots=True)
class _Lane:
    """One config's queue: the newest version it accepted, what waits, whether one is sent."""

    key: tuple[str, str]
    owner: str
    last_version: int = 0
    running: bool = False
    closing: bool = False
    queue: collections.deque[Notification] = dataclasses.field(default_factory=collections.deque)


@dataclasses.dataclass(slots=True)
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
    """The bounded queues: lanes per config, slots per process and per owner."""

    def __init__(
        self,
        send: t.Callable[[Notification], None],
        spawn: Spawn,
        *,
        max_in_flight: int = MAX_IN_FLIGHT,
        max_waiting: int = MAX_WAITING,
        per_owner: int = MAX_PER_OWNER,
    ) -> None:
        self._send = send
        self._spawn = spawn
        self.max_in_flight = max_in_flight
        self.max_waiting = max_waiting
        self.per_owner = per_owner
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
        job = Notification(config, version, body, telemetry.capture())
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
        return self.in_flight < self.max_in_flight and self._owner_in_flight[owner] < self.per_owner

    def _may_wait(self, owner: str) -> bool:
        return self.waiting < self.max_waiting and self._owner_waiting[owner] < self.per_owner

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
            if self._owner_in_flight[lane.owner] < self.per_owner:
                self._ready.remove(lane)
                self._take_slot(lane)
                started.append((lane, self._pop(lane)))
        return started


def _headers(config: PushConfig) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if config.token:
        headers["A2A-Notification-Token"] = config.token
        headers["X-A2A-Notification-Token"] = config.token
    auth = config.authentication
    if auth is not None:
        credentials = f" {auth.credentials}" if auth.credentials else ""
        headers["Authorization"] = f"{auth.scheme}{credentials}"
    return headers


def _v03_body(record: TaskRecord) -> bytes:
    """A v0.3 webhook's body: the task as it is now, a v0.3 Task (spec v0.3 §9.5)."""
    return v03.task_json(record.task).encode()


class PushSender:
    """What the exchange calls: ``check_url``, ``register`` and ``deliver`` (after each write).

    :param client: a ``requests.Session`` to post with; guarded as ``ssrf.build_client`` says.
    :param resolver: ``resolver(host) -> [address, ...]`` for both checks (a test seam).
    :param secrets: seals a config's token and credentials before each store write and opens
        them after each read (``push_secrets``); None: the store keeps them as given.
    :param signer: signs each notification (``push/tokens.py``); None: unsigned.
    :param queue: hands each notification to a job queue (``push/queue.py``) instead of
        posting it here; None: one attempt, in process.
    """

    def __init__(
        self,
        store: Store,
        spawn: Spawn,
        *,
        allow_private: bool = False,
        timeout: float = 10.0,
        max_configs_per_task: int = 8,
        client: requests.Session | None = None,
        resolver: ssrf.Resolver | None = None,
        refresh: float = 1.0,
        secrets: PushSecrets | None = None,
        metrics: Recorder = NOOP,
        signer: NotificationSigner | None = None,
        queue: PushQueue | None = None,
    ) -> None:
        self.store = store
        self.signer = signer
        self.queue = queue
        self.metrics = metrics
        self.secrets = secrets
        #: How long a task's config list read for one event serves the next ones.
        self.refresh = refresh
        #: task id -> (monotonic read time, configs). A change made in this process drops the
        #: entry; one made on another replica is seen within ``refresh`` (the replica poll
        #: interval, the same delay every cross-replica change has).
        self._known: dict[str, tuple[float, list[PushConfig]]] = {}
        self.timeout = timeout
        self.max_configs_per_task = max_configs_per_task
        self.policy = ssrf.AddressPolicy(resolver, allow_private)
        self.client = ssrf.build_client(client, self.policy)
        if queue is None:
            self.dispatcher = Dispatcher(self._send, spawn)
        else:  # a hand-off is one short Redis call: the bounds are wider (push/queue.py)
            from .queue import HANDOFF_PER_OWNER, HANDOFF_WAITING

            self.dispatcher = Dispatcher(
                self._hand_off, spawn, max_waiting=HANDOFF_WAITING, per_owner=HANDOFF_PER_OWNER
            )
        self.dispatcher.drops.metrics = metrics

    # -- configs

    def check_url(self, url: str) -> None:
        """Refuse a URL the address policy forbids with -32602 (before anything is written)."""
        try:
            ssrf.check_url(url, self.policy)
        except ssrf.RefusedURLError as exc:
            raise InvalidParamsError(
                f"Invalid parameters: url: {exc}", field_violations=[("url", str(exc))]
            ) from None

    def register(self, record: TaskRecord, params: dict[str, t.Any]) -> PushConfig:
        """Store a config for ``record``'s task (URL already checked); send it the task."""
        config = PushConfig(
            id=params.get("id") or new_id(),
            task_id=record.task.id,
            url=params["url"],
            token=params.get("token") or None,
            authentication=params.get("authentication"),
            tenant=params.get("tenant") or None,
            protocol_version=params.get("protocol_version") or "1.0",
        )
        stored = config if self.secrets is None else self.secrets.seal(config)
        self.store.put_push_config(record.owner, stored, self.max_configs_per_task)
        self.forget(record.task.id)
        # Read after storing: any write this read misses lists the new config in deliver().
        current = self.store.get_task(record.task.id) or record
        if not current.state.terminal:  # a settled task will not change: nothing to tell
            body = (
                _v03_body(current)
                if config.protocol_version == "0.3"
                else (task_event_json(current.task).encode())
            )
            self.dispatcher.offer(record.owner, config, current.version, body, False)
        return config

    def get_config(self, task_id: str, config_id: str) -> PushConfig | None:
        """A stored config as its owner is answered (secrets opened where they can be)."""
        config = self.store.get_push_config(task_id, config_id)
        if config is None or self.secrets is None:
            return config
        return self.secrets.answer(config)

    def list_configs(self, task_id: str) -> list[PushConfig]:
        """The task's stored configs as its owner is answered, oldest first."""
        configs = self.store.list_push_configs(task_id)
        if self.secrets is None:
            return configs
        return [self.secrets.answer(config) for config in configs]

    # -- delivery

    def deliver(self, record: TaskRecord, event: BusEvent) -> None:
        """Queue ``event`` for every config of its task; never blocks on a receiver."""
        if event.gone or not event.result_json:
            self.forget(event.task_id)
            return
        configs = self._configs(event.task_id, final=event.final)
        if not configs:
            return
        body = event.result_json.encode()
        v03_body: bytes | None = None
        terminal = record.state.terminal
        for config in configs:
            if config.protocol_version == "0.3":  # v0.3 webhooks carry the whole Task
                v03_body = v03_body or _v03_body(record)
                self.dispatcher.offer(record.owner, config, event.version, v03_body, terminal)
                continue
            self.dispatcher.offer(record.owner, config, event.version, body, terminal)

    def forget(self, task_id: str) -> None:
        """The task's configs changed (or it is gone): the next event reads them again."""
        self._known.pop(task_id, None)

    def _configs(self, task_id: str, *, final: bool) -> list[PushConfig]:
        """The task's configs: one store read per ``refresh`` instead of one per event."""
        now = time.monotonic()
        known = self._known.get(task_id)
        if known is None or now - known[0] > self.refresh:
            known = (now, self._readable(self.store.list_push_configs(task_id)))
            self._known[task_id] = known
        if final:
            self._known.pop(task_id, None)
        return known[1]

    def _readable(self, configs: list[PushConfig]) -> list[PushConfig]:
        """Opened configs; one whose secrets do not open gets no delivery (logged once)."""
        if self.secrets is None:
            return configs
        opened = (self.secrets.readable(config) for config in configs)
        return [config for config in opened if config is not None]

    def _hand_off(self, job: Notification) -> None:
        """Queue mode: append to the config's queue lane; in process while Redis is down."""
        queue = self.queue
        assert queue is not None
        # One id for the notification, whichever way it goes (a receiver dedupes on it).
        job = dataclasses.replace(job, jti=job.jti or new_id())
        if queue.usable():
            try:
                queue.offer(job)
                return
            except Exception as exc:  # redis errors, a broken RQ: never the task's problem
                queue.unreachable(exc)
        self._send(job)

    def _send(self, job: Notification) -> None:
        """One attempt, in process."""
        self.attempt(job)

    def attempt(self, job: Notification) -> tuple[bool, str]:
        """One POST in its span (the receiver's host, the status); counted sent or failed.

        Returns whether the receiver took it, and what went wrong when not (a queue worker
        calls it too: the same guard, headers and signature as in process).
        """
        config = job.config
        try:
            host = urlsplit(config.url).hostname or ""
        except ValueError:
            host = ""
        with telemetry.push_span(job.trace, host, config.task_id) as span:
            ok, detail = self._post(job, span)
        self.metrics.push_sent(ok)
        return ok, detail

    def _post(self, job: Notification, span: telemetry.SpanLike) -> tuple[bool, str]:
        """One POST; every outcome is logged at most once and nothing escapes."""
        config = job.config
        extra = fields(config.task_id)
        try:
            headers = _headers(config)
            if self.signer is not None:
                jti = job.jti or new_id()
                self.signer.add_to(headers, config.url, config.task_id, jti, job.body)
            response = self.client.post(config.url, job.body, headers, self.timeout)
        except requests.RequestException as exc:
            log.warning(
                "a2a: push delivery failed: task %s config %s: %s",
                config.task_id,
                scrub(config.id),
                scrub(exc),
                extra=extra,
            )
            span.set_attribute("error.type", type(exc).__name__)
            return False, str(exc)
        except Exception as exc:
            log.error("a2a: push delivery panicked: %s", scrub(repr(exc)), extra=extra)
            return False, repr(exc)
        try:
            status = int(response.status_code)
            span.set_attribute("http.response.status_code", status)
            if not 200 <= status < 300:
                log.warning(
                    "a2a: push delivery got HTTP %d: task %s config %s",
                    status,
                    config.task_id,
                    scrub(config.id),
                    extra=extra,
                )
                return False, f"HTTP {status}"
            return True, ""
        except Exception as exc:
            log.error("a2a: push delivery panicked: %s", scrub(repr(exc)), extra=extra)
            return False, repr(exc)
        finally:
            close = getattr(response, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    pass
