"""What the extension builds from an agent's settings, beside the Flask side of it: the mounted
settings, push delivery (signed, through a queue), the shared bus and store of several agents,
and the exit hooks that shut every exchange of the process down.

``extension`` (``A2A.init_app``) calls these in order; none of them needs a request or an app
context, so a host that assembles an exchange by hand can too.
"""

from __future__ import annotations

import atexit
import dataclasses
import typing as t
import weakref

from .config import ConfigRuntimeError, Settings
from .exchange.bus import Bus, BusHooks
from .exchange.methods import Exchange
from .exchange.runner import Runner, RunSlots
from .exchange.streams import Seats
from .ops.metrics import recorder
from .protocol.model import Principal
from .push.secrets import PushSecrets
from .push.webhooks import PushSender
from .store.base import Store

if t.TYPE_CHECKING:
    import requests

    from .card.document import CardPublisher
    from .card.signing import SigningKey
    from .push.queue import PushQueue
    from .push.tokens import NotificationSigner


def mounted(settings: Settings, prefix: str, agent: str) -> Settings:
    """The settings of an agent mounted under ``prefix`` (every path of its own under it)."""
    if not prefix:
        return dataclasses.replace(settings, agent=agent)
    rest = settings.rest_path
    return dataclasses.replace(
        settings,
        agent=agent,
        path=prefix + settings.path,
        rest_path=prefix + rest if rest else rest,
        jwks_path=prefix + settings.jwks_path,
        metrics_path=prefix + settings.metrics_path if settings.metrics_path else None,
    )


def share_bus(exchanges: list[Exchange]) -> None:
    """Agents sharing a bus: a shared (Redis) bus asks each of them."""
    if len(exchanges) < 2:
        return
    bus = exchanges[0].bus
    hooks = [e.bus_hooks for e in exchanges]

    def settled_elsewhere(task_id: str, version: int) -> None:
        for each in hooks:
            each.settled_elsewhere(task_id, version)

    bus.bind(BusHooks(
        spawn=hooks[0].spawn,
        running=lambda task_id: any(h.running(task_id) for h in hooks),
        settled_elsewhere=settled_elsewhere,
        snapshot=hooks[0].snapshot,
    ))  # fmt: skip


class LastOut:
    """Closes what agents share (their bus, their store) once every one of them is shutting
    down: each exchange is built with it as its ``close_bus`` or ``close_store`` and joins it."""

    def __init__(self, close: t.Callable[[], None]) -> None:
        self._close = close
        self._exchanges: list[Exchange] = []

    def join(self, exchange: Exchange) -> None:
        self._exchanges.append(exchange)

    def __call__(self) -> None:
        if all(e.closing for e in self._exchanges):
            self._close()


def last_out(
    shared: t.Iterable[tuple[object, LastOut | None]], thing: object, close: t.Callable[[], None]
) -> LastOut:
    """The closer of ``thing`` the app's agents already share (``(thing, closer)`` each), or
    a new one."""
    found = next((closer for used, closer in shared if used is thing and closer), None)
    return found or LastOut(close)


def fleet_caps(
    settings: Settings, bus: Bus, runner: Runner
) -> tuple[RunSlots | None, Seats | None]:
    """``A2A_FLEET_LIMITS``: the run slots and stream seats counted across the fleet; else
    (None, None), the exchange's own."""
    if not settings.fleet_limits:
        return None, None
    from .fleet.limits import fleet_limits

    return fleet_limits(settings, bus, runner.spawn, recorder(settings.metrics, settings.agent))


def extended_card(
    hook: t.Callable[[Principal], t.Any] | None,
    host: t.Callable[[Principal], Principal],
    cards: t.Callable[[], CardPublisher],
) -> t.Callable[[Principal], t.Any] | None:
    """The host's ``extended_card`` as the exchange serves it (None without one): the hook
    sees the caller's own tenant (``host``), and an AgentCard it returns is rendered by the
    agent's card publisher (``cards``: built with the exchange, after it)."""
    if hook is None:
        return None

    def extended(principal: Principal) -> t.Any:
        return cards().extended(hook(host(principal)))

    return extended


def default_bus(settings: Settings) -> Bus | None:
    """No ``bus=``: a Redis bus on ``A2A_REDIS_URL`` (the ``redis`` extra), else None (the
    exchange's own in-process bus)."""
    if not settings.redis_url:
        return None
    try:
        from .fleet.redis_bus import RedisBus
    except ImportError as exc:
        raise ConfigRuntimeError(
            "A2A_REDIS_URL needs the redis extra: pip install 'flask-a2a[redis]'"
        ) from exc
    return RedisBus.from_settings(settings)


#: Every exchange of this process, for the exit hooks (weak: apps may come and go in tests).
_LIVE: weakref.WeakSet[Exchange] = weakref.WeakSet()


def shutdown_all(timeout: float | None = None) -> None:
    """Shut down every exchange of this process (``atexit`` and gunicorn's ``worker_exit``)."""
    for exchange in list(_LIVE):
        if not exchange.closing:
            exchange.shutdown(timeout)


def live_exchanges() -> list[Exchange]:
    """The exchanges of this process that have not shut down (``shutdown_all``'s list)."""
    return [exchange for exchange in _LIVE if not exchange.closing]


def register_exit(exchange: Exchange) -> None:
    if not _LIVE:
        atexit.register(shutdown_all)
    _LIVE.add(exchange)


def push_sender(
    settings: Settings,
    store: Store,
    runner: Runner,
    secrets: PushSecrets,
    signing_keys: t.Sequence[SigningKey],
    *,
    client: requests.Session | None = None,
    resolver: t.Callable[[str], t.Sequence[str]] | None = None,
) -> PushSender | None:
    """The agent's push delivery, or None when push notifications are off."""
    if settings.disable_push_notifications:
        return None
    return PushSender(
        store,
        runner.spawn,
        allow_private=settings.allow_private_push,
        timeout=settings.push_timeout,
        max_configs_per_task=settings.max_push_configs_per_task,
        client=client,
        resolver=resolver,
        refresh=settings.replica_poll_interval,
        secrets=secrets,
        metrics=recorder(settings.metrics, settings.agent),
        signer=_notification_signer(signing_keys, settings),
        queue=_push_queue(settings, secrets),
    )


def _notification_signer(
    keys: t.Sequence[SigningKey], settings: Settings
) -> NotificationSigner | None:
    """With signing keys, every push notification is signed with the newest (push/tokens.py)."""
    if not keys or settings.disable_push_notifications:
        return None
    from .push.tokens import NotificationSigner

    return NotificationSigner(keys, settings.public_base_url)


def _push_queue(settings: Settings, secrets: PushSecrets) -> PushQueue | None:
    """``A2A_PUSH_QUEUE``: notifications go through RQ lanes on Redis (push/queue.py)."""
    if not settings.push_queue or settings.disable_push_notifications:
        return None
    from .push.queue import PushQueue, RetryPolicy

    url = settings.push_queue_url or settings.redis_url
    assert url
    policy = RetryPolicy(
        attempts=settings.push_retry_attempts,
        backoff=settings.push_retry_backoff,
        max_delay=settings.push_retry_max_delay,
        pause_after=settings.push_pause_after,
        pause_seconds=settings.push_pause_seconds,
    )
    return PushQueue.connect(
        url,
        settings.redis_timeout,
        name=settings.push_queue,
        prefix=settings.redis_prefix,
        policy=policy,
        timeout=settings.push_timeout,
        secrets=secrets,
        metrics=recorder(settings.metrics, settings.agent),
        max_bytes_per_owner=settings.push_queue_max_bytes_per_owner,
    )
