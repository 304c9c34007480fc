"""What the agent role's health route reports: the store and the bus, reachable or not.

Each check runs on its own greenlet or thread and is waited for at most :data:`TIMEOUT`
seconds, so a database or a Redis that hangs makes the route answer 503 in about a second
instead of hanging the load balancer's probe. The store is asked for a task that cannot
exist (one indexed read, under the store's own statement timeout); the Redis bus is pinged
(under ``A2A_REDIS_TIMEOUT``). A check's failure is named by its exception type only: its
text may quote a connection URL.
"""

from __future__ import annotations

import threading
import typing as t

from ..protocol.errors import InternalError

if t.TYPE_CHECKING:
    from ..exchange.methods import Exchange

#: Seconds the route waits for each check.
TIMEOUT: t.Final = 1.0
#: The id the store probe reads: never a real task's (ids are UUIDs).
PROBE_TASK_ID: t.Final = "a2a-health-probe"

OK: t.Final = "ok"


def probe(
    check: t.Callable[[], object],
    spawn: t.Callable[[t.Callable[[], None]], None],
    timeout: float = TIMEOUT,
) -> str:
    """``"ok"``, ``"timed out"`` or ``"unreachable: <ExceptionType>"``."""
    done = threading.Event()
    outcome: list[str] = []

    def run() -> None:
        try:
            check()
            outcome.append(OK)
        except BaseException as exc:  # noqa: BLE001 - any failure is the answer
            # A store not opened yet (its database down since boot) says what the driver
            # raised, as an opened store does.
            cause = exc.__cause__ if isinstance(exc, InternalError) and exc.__cause__ else exc
            outcome.append(f"unreachable: {type(cause).__name__}")
        finally:
            done.set()

    spawn(run)
    if not done.wait(timeout):
        return "timed out"
    return outcome[0]


def check(exchange: Exchange, timeout: float = TIMEOUT) -> dict[str, str]:
    """Each dependency -> ``"ok"`` or why not: ``store`` always, ``bus`` when it is shared
    (the Redis bus)."""
    spawn = exchange.runner.spawn
    checks = {"store": probe(lambda: exchange.store.get_task(PROBE_TASK_ID), spawn, timeout)}
    ping = getattr(exchange.bus, "ping", None)
    if callable(ping):
        checks["bus"] = probe(ping, spawn, timeout)
    return checks


def report(exchange: Exchange, timeout: float = TIMEOUT) -> tuple[int, dict[str, t.Any]]:
    """The route's status and JSON body: 200 when everything answers, else 503."""
    if exchange.closing:
        return 503, {"status": "closing"}
    checks = check(exchange, timeout)
    healthy = all(value == OK for value in checks.values())
    return (200 if healthy else 503), {
        "status": "ok" if healthy else "unavailable",
        "checks": checks,
    }
