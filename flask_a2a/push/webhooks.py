"""Push notifications: per-task webhook configs and bounded, best-effort delivery.

Every StreamResponse of a task is POSTed (the bare StreamResponse JSON, no JSON-RPC envelope)
to each of the task's configs. A config registered on a task that is not settled first gets
the task as it stands (a ``task`` StreamResponse; the official SDK's first notification is the
task snapshot too), then every later event. Delivery is best effort by design: one attempt,
no retry, a total deadline on the attempt (``deadline.py``), no more of the answer read than
its status and a few KiB, and a non-2xx or transport error is logged once. Reliable delivery
with backoff is a job queue's work, never the task's.

The order per config and the process-wide bounds are ``dispatcher.py``'s concern; where a
push may go is ``ssrf.py``'s.
"""

from __future__ import annotations

import dataclasses
import logging
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
from . import deadline, ssrf
from .dispatcher import Dispatcher, Spawn
from .notification import Notification
from .secrets import PushSecrets

if t.TYPE_CHECKING:
    from .queue import PushQueue
    from .tokens import NotificationSigner

log = logging.getLogger("flask_a2a")

#: What is read of a receiver's answer past its status line and headers: enough for a short
#: reply's connection to be kept alive and reused; a longer body is cut there, unread.
MAX_REPLY_BYTES: t.Final = 4096


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
        self.spawn = spawn
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
                self._hand_off,
                spawn,
                max_waiting=HANDOFF_WAITING,
                per_owner=HANDOFF_PER_OWNER,
                shared_waiting=HANDOFF_WAITING // 2,
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

    def task_deleted(self, task_id: str) -> None:
        """The task was deleted (retention, erasure): what the queue holds for it goes too,
        beside the task (a Redis call is never the task's wait)."""
        self.forget(task_id)
        queue = self.queue
        if queue is not None:
            self.spawn(lambda: self._unqueue(lambda: queue.lanes.drop_task(task_id)))

    def config_deleted(self, task_id: str, config_id: str) -> None:
        """A config was deleted: what the queue holds for it goes too."""
        self.forget(task_id)
        queue = self.queue
        if queue is not None:
            self.spawn(lambda: self._unqueue(lambda: queue.lanes.drop_config(task_id, config_id)))

    def owner_erased(self, owner: str, task_ids: t.Sequence[str]) -> None:
        """The owner's tasks (``task_ids``) were erased: everything the queue holds for them
        goes, their delivery status too (now: an erasure's caller waits for it)."""
        queue = self.queue
        if queue is not None:
            self._unqueue(lambda: queue.lanes.drop_owner(owner, task_ids))

    def _unqueue(self, drop: t.Callable[[], int]) -> None:
        """A deletion in the queue; while Redis does not answer, what it would delete lapses
        on its own (``PushQueue.lane_seconds``)."""
        queue = self.queue
        assert queue is not None
        if not queue.usable():
            return
        try:
            drop()
        except Exception as exc:  # redis errors: the lanes lapse within their lifetime
            queue.unreachable(exc)

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
        """One POST within ``timeout`` in all (``deadline.py``): connect, send, the status
        line and at most :data:`MAX_REPLY_BYTES` of the answer. Every outcome is logged at
        most once and nothing escapes."""
        with deadline.attempt(self.timeout) as attempt:
            return self._post_within(job, span, attempt)

    def _post_within(
        self, job: Notification, span: telemetry.SpanLike, attempt: deadline.Attempt
    ) -> tuple[bool, str]:
        config = job.config
        extra = fields(config.task_id)
        try:
            headers = _headers(config)
            if self.signer is not None:
                jti = job.jti or new_id()
                self.signer.add_to(headers, config, jti, job.body)
            response = self.client.post(config.url, job.body, headers, self.timeout)
        except requests.RequestException as exc:
            detail = _past_deadline(attempt) if attempt.expired else str(exc)
            log.warning(
                "a2a: push delivery failed: task %s config %s: %s",
                config.task_id,
                scrub(config.id),
                scrub(detail),
                extra=extra,
            )
            span.set_attribute("error.type", type(exc).__name__)
            return False, detail
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
            _finish(response, attempt)


def _past_deadline(attempt: deadline.Attempt) -> str:
    return (
        f"timed out: no answer within the attempt's {attempt.seconds:g} s deadline "
        "(A2A_PUSH_TIMEOUT), the connection closed"
    )


def _finish(response: t.Any, attempt: deadline.Attempt) -> None:
    """Read at most :data:`MAX_REPLY_BYTES` of the answer's body, then close it.

    An answer read to its end leaves its connection to be reused (keep-alive); a longer one
    is cut, whatever it says it holds. The bytes are read undecoded and never used. On a
    connection the deadline cannot reach (a ``push_client=`` with its own adapter) nothing is
    read: the answer is closed at once.
    """
    try:
        raw = getattr(response, "raw", None)
        if attempt.watching and raw is not None and hasattr(raw, "read"):
            read = 0
            while read <= MAX_REPLY_BYTES:
                chunk = raw.read(MAX_REPLY_BYTES + 1 - read, decode_content=False)
                if not chunk:
                    break
                read += len(chunk)
    except Exception:
        pass  # the status line decided; a broken or cut body changes nothing
    close = getattr(response, "close", None)
    if callable(close):
        try:
            close()
        except Exception:
            pass
