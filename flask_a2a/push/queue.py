"""Push delivery through a job queue (``A2A_PUSH_QUEUE``): retried, ordered per config, paused.

In process, a notification gets one attempt (``webhooks.py``). With ``A2A_PUSH_QUEUE`` set,
the process's bounded dispatcher hands each notification to Redis instead, and workers (``flask
a2a push-worker``, RQ) deliver it: a failed attempt is retried after an exponential backoff
with jitter, up to a bound, and the task never waits for any of it.

**Lanes.** Each config has a lane: a Redis list of its notifications in the order they were
handed over, drained by one job at a time (a lease key says a job owns it), so a config's
notifications never overtake each other, and a retry holds back the ones behind it. A
notification whose version is not newer than the lane's last is dropped at the door (stale),
so the terminal state is still the last a receiver gets.

**Retries.** Attempt ``n`` failed (a transport error or a non-2xx): the next waits
``min(max_delay, backoff * 2**(n-1))`` seconds times a random factor in [0.5, 1) (equal
jitter), and after ``attempts`` attempts the notification is given up and the lane goes on.
A wait under :data:`INLINE_WAIT_LIMIT` happens inside the job (RQ's scheduler counts whole
seconds); a longer one schedules the lane's job with ``enqueue_in`` and frees the worker.

**Pause.** ``pause_after`` failed attempts in a row (over any of the config's notifications)
pause the config for ``pause_seconds``, logged once: what waits in its lane is given up, and
new notifications are dropped at the door until the pause ends; then the count starts over.

**Room.** An owner's queued notifications hold at most ``A2A_PUSH_QUEUE_MAX_BYTES_PER_OWNER``
bytes (past it one is dropped, logged once per owner per 10 s); a lane lives one retry window
plus a margin after its last change, not days; a deleted task or config takes what waits for it
along (``queue_lanes.py``).

**Outage.** Handing over is one Redis script call bounded by ``A2A_REDIS_TIMEOUT``, made by
the dispatcher's lane worker, never by the task. When Redis does not answer, the notification
is delivered in process (best effort, as without the queue), with one log line per outage.

Every outcome is counted (``a2a_push_deliveries{outcome=sent|failed|retried|given_up}``) and
recorded per task for ``flask a2a push-status TASK`` (:meth:`PushQueue.status`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import threading
import time
import typing as t

from ..config import ConfigRuntimeError
from ..ops.log_fields import fields
from ..ops.metrics import NOOP, Recorder
from ..protocol.scrub import scrub
from ..protocol.wire import dump_push_config, push_config_from_wire
from .notification import Notification
from .queue_lanes import LANE_MARGIN, Lanes, lane_id, owner_id
from .rq_jobs import RQJobs, rq_worker
from .secrets import PushSecrets, UnreadableSecretError

if t.TYPE_CHECKING:
    import redis


log = logging.getLogger("flask_a2a")

#: Queue mode's bounds on notifications waiting in process to be handed over (all, one owner's):
#: a hand-off is one short Redis call, so a burst (an event fanned out to 16 configs) fits.
HANDOFF_WAITING: t.Final = 1024
HANDOFF_PER_OWNER: t.Final = 256
#: Waits shorter than this happen inside the job (RQ's scheduler works in whole seconds).
INLINE_WAIT_LIMIT: t.Final = 1.0
#: Notifications one lane may hold; past it a new one is dropped (logged).
MAX_LANE: t.Final = 256
#: Bytes one owner's queued notifications may hold (``A2A_PUSH_QUEUE_MAX_BYTES_PER_OWNER``).
MAX_BYTES_PER_OWNER: t.Final = 8 * 1024 * 1024
#: Seconds a lane's bookkeeping (its last version, its failures in a row) and a task's delivery
#: status live after their last change; the notifications themselves live far less
#: (:meth:`PushQueue.lane_seconds`).
KEY_TTL: t.Final = 7 * 86400
#: Seconds handing over is skipped after Redis failed to answer (delivered in process).
OUTAGE_RETRY: t.Final = 5.0
#: Notifications one job delivers, and seconds it spends, before it queues the lane again
#: (fair to other lanes, and well inside the job's timeout).
MAX_PER_JOB: t.Final = 64
JOB_BUDGET: t.Final = 60.0
EXTRA_HINT: t.Final = "pip install 'flask-a2a[push-queue]'"

#: KEYS: busy. ARGV: token, lease ms. The job holding ``token`` keeps the lane (1); a job whose
#: lease was taken over by a newer one stops (0).
_HOLD: t.Final = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

#: KEYS: lane, busy. ARGV: token. Releases the lease when the lane is empty: 1 released (or
#: not ours any more), 0 not empty.
_RELEASE: t.Final = """
if redis.call('LLEN', KEYS[1]) ~= 0 then return 0 end
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
return 1
"""


class Attempts(t.Protocol):
    """What a lane's drain needs of the sender (``webhooks.PushSender``, which hands
    notifications to this queue: this module does not name it back)."""

    def attempt(self, job: Notification) -> tuple[bool, str]: ...


class Jobs(t.Protocol):
    """Makes ``PushQueue.drain(lane_job, sender)`` run in a worker, now or after ``delay``
    seconds (RQ, Celery, ...); ``lane_job`` is an opaque string (the lane and its lease)."""

    def submit(self, lane_job: str, delay: float = 0.0) -> None: ...


def run_lane(queue_name: str, lane_job: str) -> None:
    """The RQ job: drain one lane with the current app's push sender (the worker runs in the
    app's context: ``flask a2a push-worker``).

    It lives here, not in ``rq_jobs.py``: RQ stores each job by this dotted name, so a job
    queued before an upgrade still finds it after one.
    """
    from flask import current_app

    state = current_app.extensions.get("a2a")
    push = state.exchange.push if state is not None else None
    queue = push.queue if push is not None else None
    if queue is None or queue.name != queue_name:
        raise RuntimeError(
            f"push lane job for queue {queue_name!r}: this app's A2A_PUSH_QUEUE is "
            f"{getattr(queue, 'name', None)!r} (run the worker with: flask a2a push-worker)"
        )
    queue.drain(lane_job, push)


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a notification is retried, and when a config is paused."""

    #: Attempts per notification, the first one included.
    attempts: int = 6
    #: Seconds before the first retry; doubled for each next one.
    backoff: float = 1.0
    #: The longest one wait may be.
    max_delay: float = 60.0
    #: Failed attempts in a row that pause a config.
    pause_after: int = 20
    #: Seconds a paused config stays paused.
    pause_seconds: float = 600.0

    def delay(self, attempt: int, rng: t.Callable[[], float] = random.random) -> float:
        """The wait after failed attempt ``attempt`` (1-based): equal jitter on the doubling."""
        ceiling = min(self.max_delay, self.backoff * 2 ** (attempt - 1))
        return float(ceiling * (0.5 + 0.5 * rng()))

    def window(self) -> float:
        """The most time one notification's retries may take (the sum of the ceilings)."""
        return float(
            sum(min(self.max_delay, self.backoff * 2**n) for n in range(self.attempts - 1))
        )


class PushQueue:
    """Hands notifications to Redis lanes (the app) and delivers them (the worker).

    :param connection: a Redis client whose calls give up after ``A2A_REDIS_TIMEOUT``.
    :param name: the RQ queue (``A2A_PUSH_QUEUE``); it also names the keys.
    :param prefix: ``A2A_REDIS_PREFIX``.
    :param timeout: ``A2A_PUSH_TIMEOUT`` (one attempt's bound; leases cover it).
    :param jobs: where lane jobs run; RQ on ``connection`` by default.
    :param max_bytes_per_owner: ``A2A_PUSH_QUEUE_MAX_BYTES_PER_OWNER`` (negative: no cap).
    """

    def __init__(
        self,
        connection: redis.Redis,
        name: str,
        *,
        prefix: str = "a2a:",
        policy: RetryPolicy = RetryPolicy(),
        timeout: float = 10.0,
        secrets: PushSecrets | None = None,
        metrics: Recorder = NOOP,
        jobs: Jobs | None = None,
        url: str | None = None,
        max_bytes_per_owner: int = MAX_BYTES_PER_OWNER,
    ) -> None:
        self.redis = connection
        self.name = name
        self.url = url
        self.base = f"{prefix}push:{name}:"
        self.policy = policy
        self.timeout = timeout
        self.secrets = secrets
        self.metrics = metrics
        self._jobs = jobs
        #: The lanes' contents, their owners' byte counts and their lifetime.
        self.lanes = Lanes(connection, self.base, max_bytes_per_owner, self.lane_seconds())
        self._release = connection.register_script(_RELEASE)
        self._hold = connection.register_script(_HOLD)
        self._state = threading.Lock()
        self._down_until = 0.0
        self._down = False
        #: A test seam (the jitter's random factor).
        self.rng: t.Callable[[], float] = random.random

    @classmethod
    def connect(cls, url: str, redis_timeout: float, **options: t.Any) -> PushQueue:
        """A queue on ``url`` whose Redis calls give up after ``redis_timeout`` seconds."""
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry

            if options.get("jobs") is None:
                import rq  # noqa: F401 -- the default jobs: fail at startup, not at a hand-off
        except ImportError:
            raise ConfigRuntimeError(f"A2A_PUSH_QUEUE needs Redis and RQ: {EXTRA_HINT}") from None
        connection = redis.Redis.from_url(
            url,
            socket_timeout=redis_timeout,
            socket_connect_timeout=redis_timeout,
            retry=Retry(NoBackoff(), 0),
        )
        return cls(connection, url=url, **options)

    @property
    def jobs(self) -> Jobs:
        """Where lane jobs run: RQ on this Redis unless another ``Jobs`` was given."""
        if self._jobs is None:
            # A job stops starting attempts after JOB_BUDGET; the last one and its wait finish.
            timeout = JOB_BUDGET + self.lease_seconds(1.0)
            self._jobs = RQJobs(
                self.redis, self.name, run_lane, timeout, KEY_TTL, ttl=self.lane_seconds()
            )
        return self._jobs

    @jobs.setter
    def jobs(self, jobs: Jobs) -> None:
        self._jobs = jobs

    def key(self, kind: str, name: str) -> str:
        return f"{self.base}{kind}:{name}"

    def lease_seconds(self, wait: float) -> float:
        """How long a job holds its lane: an attempt, the wait after it, and a margin."""
        return self.timeout + wait + 30.0

    def lane_seconds(self) -> float:
        """How long a lane lives after its last change: one notification's retry window (its
        waits and its attempts) and :data:`.queue_lanes.LANE_MARGIN`. Past it what the lane
        holds is deleted (no worker took it)."""
        return self.policy.window() + self.policy.attempts * self.timeout + LANE_MARGIN

    # ------------------------------------------------------------------ the app's side

    def usable(self) -> bool:
        """Worth calling Redis: it answered last time, or the outage pause is over."""
        return time.monotonic() >= self._down_until

    def unreachable(self, exc: BaseException) -> None:
        """Handing over failed: deliver in process for :data:`OUTAGE_RETRY`; log once."""
        with self._state:
            self._down_until = time.monotonic() + OUTAGE_RETRY
            if self._down:
                return
            self._down = True
        log.warning(
            "a2a: push queue %s does not answer (%s): notifications are delivered in process "
            "(one attempt, best effort) until it does",
            scrub(self.name),
            scrub(repr(exc)),
        )

    def _answered(self) -> None:
        if self._down:
            with self._state:
                if not self._down:
                    return
                self._down = False
            log.warning("a2a: push queue %s answers again", scrub(self.name))

    def offer(self, job: Notification) -> None:
        """Append one notification to its config's lane (raises when Redis does not answer)."""
        from ..protocol.model import new_id

        config = job.config
        lane = lane_id(config.task_id, config.id)
        owner_key = owner_id(job.owner)
        stored = config if self.secrets is None else self.secrets.seal_always(config)
        payload = json.dumps(
            {
                "config": dump_push_config(stored),
                "version": job.version,
                "body": job.body.decode(),
                "jti": job.jti or new_id(),
                "attempts": 0,
                "owner": owner_key,
            },
            separators=(",", ":"),
        )
        token = new_id()
        found = self.lanes.offer(
            lane,
            config.task_id,
            owner_key,
            job.version,
            payload,
            max_lane=MAX_LANE,
            lease_ms=int(self.lease_seconds(0) * 1000),
            last_ttl=KEY_TTL,
            token=token,
        )
        self._answered()
        if found.lapsed:
            self.lanes.lapsed(job.owner, found.lapsed)
        if found.code == 1:
            try:
                self.jobs.submit(f"{lane}:{token}")
            except Exception:
                self.redis.delete(self.key("busy", lane))  # the next notification restarts it
                raise
        elif found.code == -1:
            self._record(config.task_id, config.id, config.url, "dropped", "paused")
            self.metrics.push_dropped("paused")
        elif found.code == -3:
            self._record(config.task_id, config.id, config.url, "dropped", "lane full")
            self.metrics.push_dropped("queue_lane_full")
            log.warning(
                "a2a: push notification dropped (its queue lane holds %d): task %s config %s",
                MAX_LANE,
                config.task_id,
                scrub(config.id),
                extra=fields(config.task_id),
            )
        elif found.code == -4:
            self._record(config.task_id, config.id, config.url, "dropped", "owner's bytes")
            self.metrics.push_dropped("queue_owner_bytes")
            self.lanes.over_cap(job.owner, config, found.held)

    # ------------------------------------------------------------------ the worker's side

    def drain(self, lane_job: str, sender: Attempts) -> None:
        """Deliver a lane's notifications in order until it is empty, waits, or pauses.

        ``lane_job`` is ``<lane>:<token>``: the token the lane's lease was given to. A job whose
        lease lapsed (it waited in the queue too long) and was given to a newer job stops, so
        one job at a time delivers a lane.
        """
        lane, _, token = lane_job.partition(":")
        keys = {kind: self.key(kind, lane) for kind in ("lane", "busy", "fails", "paused")}
        stop_at = time.monotonic() + JOB_BUDGET
        for _ in range(MAX_PER_JOB):
            if time.monotonic() >= stop_at:
                break
            if not int(self._hold([keys["busy"]], [token, int(self.lease_seconds(0) * 1000)])):
                return
            raw = self.redis.lindex(keys["lane"], 0)
            if raw is None:
                if int(self._release([keys["lane"], keys["busy"]], [token])):
                    return
                continue
            note = json.loads(raw)
            if self.redis.exists(keys["paused"]):
                self._give_up_lane(lane, keys, token, note)
                return
            wait = self._attempt(lane, keys, token, note, sender)
            if wait is None:
                continue
            self._hold([keys["busy"]], [token, int(self.lease_seconds(wait) * 1000)])
            if wait < INLINE_WAIT_LIMIT:
                threading.Event().wait(wait)
                continue
            self.jobs.submit(lane_job, wait)
            return
        self.jobs.submit(lane_job)  # more to do: other lanes have a turn first, then this one

    def _attempt(
        self,
        lane: str,
        keys: dict[str, str],
        token: str,
        note: dict[str, t.Any],
        sender: Attempts,
    ) -> float | None:
        """One attempt at the lane's head; the wait before the next try, or None to go on."""

        config = push_config_from_wire(note["config"])
        attempt = int(note["attempts"]) + 1
        # A notification queued before owners were counted has no owner: nothing to count.
        owner_key = str(note.get("owner") or "-")
        try:
            opened = config if self.secrets is None else self.secrets.open(config)
        except UnreadableSecretError:
            self.lanes.pop(lane, owner_key, config.task_id)
            self._gave_up(config.task_id, config.id, config.url, attempt, "unreadable secrets")
            return None
        job = Notification(opened, int(note["version"]), note["body"].encode(), None, note["jti"])
        ok, detail = sender.attempt(job)
        task_id, config_id, url = config.task_id, config.id, config.url
        if ok:
            self.lanes.pop(lane, owner_key, task_id)
            self.redis.delete(keys["fails"])
            self._record(task_id, config_id, url, "sent", "", attempt)
            return None
        fails = int(self.redis.incr(keys["fails"]))
        self.redis.expire(keys["fails"], KEY_TTL)
        if fails >= self.policy.pause_after:
            self.redis.set(keys["paused"], "1", px=int(self.policy.pause_seconds * 1000))
            self.redis.delete(keys["fails"])
            log.warning(
                "a2a: push config %s of task %s paused for %gs: its receiver failed %d times in "
                "a row (last: %s); its waiting notifications are given up",
                scrub(config_id),
                task_id,
                self.policy.pause_seconds,
                fails,
                scrub(detail),
                extra=fields(task_id),
            )
            self._record(task_id, config_id, url, "paused", detail, attempt)
            self._give_up_lane(lane, keys, token, note)
            return None
        if attempt >= self.policy.attempts:
            self.lanes.pop(lane, owner_key, task_id)
            self._gave_up(task_id, config_id, url, attempt, detail)
            return None
        note["attempts"] = attempt
        self.lanes.set_head(lane, owner_key, task_id, json.dumps(note, separators=(",", ":")))
        self.metrics.push_outcome("retried")
        self._record(task_id, config_id, url, "retried", detail, attempt)
        return self.policy.delay(attempt, self.rng)

    def _gave_up(self, task_id: str, config_id: str, url: str, attempt: int, detail: str) -> None:
        self.metrics.push_outcome("given_up")
        self._record(task_id, config_id, url, "given_up", detail, attempt)
        log.warning(
            "a2a: push notification given up after %d attempt(s): task %s config %s: %s",
            attempt,
            task_id,
            scrub(config_id),
            scrub(detail),
            extra=fields(task_id),
        )

    def _give_up_lane(
        self, lane: str, keys: dict[str, str], token: str, head: dict[str, t.Any]
    ) -> None:
        """Give up everything a paused config's lane holds (counted), and release it."""
        for raw in self.lanes.take_all(lane, str(head.get("owner") or "-")):
            config = json.loads(raw)["config"]
            self.metrics.push_outcome("given_up")
            self._record(config["taskId"], config["id"], config["url"], "given_up", "paused")
        self._release([keys["lane"], keys["busy"]], [token])

    # ------------------------------------------------------------------ status

    def _record(
        self,
        task_id: str,
        config_id: str,
        url: str,
        outcome: str,
        detail: str,
        attempt: int = 0,
    ) -> None:
        """Count one outcome for ``flask a2a push-status`` (best effort: never fails a job)."""
        key = self.key("status", task_id)
        last = json.dumps(
            {
                "outcome": outcome,
                "detail": detail[:200],
                "attempt": attempt,
                "at": time.time(),
                "url": url,
            }
        )
        try:
            with self.redis.pipeline(transaction=False) as pipe:
                if outcome != "paused":
                    pipe.hincrby(key, f"{config_id}\0{outcome}", 1)
                pipe.hset(key, f"{config_id}\0last", last)
                pipe.expire(key, KEY_TTL)
                pipe.execute()
        except Exception as exc:
            log.debug("a2a: push status not recorded: %s", scrub(repr(exc)))

    def status(self, task_id: str) -> dict[str, dict[str, t.Any]]:
        """Per config id: counts of ``sent``, ``retried``, ``given_up``, ``dropped``, the
        ``last`` outcome (with its time and detail), and ``paused`` (seconds left, or 0)."""
        out: dict[str, dict[str, t.Any]] = {}
        for field, value in self.redis.hgetall(self.key("status", task_id)).items():
            name = field.decode() if isinstance(field, bytes) else str(field)
            config_id, _, kind = name.partition("\0")
            entry = out.setdefault(
                config_id,
                {"sent": 0, "retried": 0, "given_up": 0, "dropped": 0, "last": None, "paused": 0.0},
            )
            entry[kind] = json.loads(value) if kind == "last" else int(value)
        for config_id, entry in out.items():
            left = self.redis.pttl(self.key("paused", lane_id(task_id, config_id)))
            entry["paused"] = max(0, int(left)) / 1000.0
        return out

    def worker(self, **options: t.Any) -> t.Any:
        """An RQ worker on this queue, in this process (jobs need the app's context)."""
        assert self.url is not None
        return rq_worker(self.name, self.url, **options)
