"""The agent role's health route: the store and the Redis bus, reachable or not, answered
within about a second either way."""

from __future__ import annotations

import threading
import typing as t

import pytest
from flask import Flask

from flask_a2a.fleet.redis_bus import RedisBus
from flask_a2a.store import MemoryStore
from tests.live_server import free_port
from tests.redis_support import REDIS_URL, redis_prefix  # noqa: F401 - a fixture

AGENT = {"A2A_ROLE": "agent"}


class DownStore(MemoryStore):
    """A store whose database does not answer: every read fails."""

    def get_task(self, task_id: str, owner: str | None = None) -> t.Any:
        raise ConnectionRefusedError("connection to postgres://user:pw@db failed")


class HungStore(MemoryStore):
    """A store whose database hangs: reads wait until the test lets them go."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def get_task(self, task_id: str, owner: str | None = None) -> t.Any:
        self.release.wait(30)
        return None


def health(app: Flask) -> tuple[int, t.Any]:
    answer = app.test_client().get("/healthz")
    return answer.status_code, answer.get_json()


def test_a_reachable_store_is_ok(make_app: t.Callable[..., Flask]) -> None:
    assert health(make_app(config=AGENT)) == (200, {"status": "ok", "checks": {"store": "ok"}})


def test_a_store_that_fails_is_named_and_answers_503(make_app: t.Callable[..., Flask]) -> None:
    status, body = health(make_app(config=AGENT, store=DownStore()))
    assert status == 503
    assert body == {
        "status": "unavailable",
        "checks": {"store": "unreachable: ConnectionRefusedError"},
    }
    assert "pw@db" not in str(body)  # the failure's text (a URL, a password) stays out


def test_a_store_that_hangs_times_out(make_app: t.Callable[..., Flask]) -> None:
    store = HungStore()
    app = make_app(config=AGENT, store=store)
    try:
        assert health(app) == (503, {"status": "unavailable", "checks": {"store": "timed out"}})
    finally:
        store.release.set()


def test_the_redis_bus_is_checked(
    make_app: t.Callable[..., Flask],
    redis_prefix: str,  # noqa: F811
) -> None:
    bus = RedisBus(REDIS_URL, prefix=redis_prefix)
    app = make_app(config=AGENT, bus=bus)
    assert health(app) == (200, {"status": "ok", "checks": {"store": "ok", "bus": "ok"}})


def test_a_redis_that_does_not_answer_is_named(make_app: t.Callable[..., Flask]) -> None:
    pytest.importorskip("redis")
    bus = RedisBus(f"redis://127.0.0.1:{free_port()}/0", prefix="a2a-health-test:")
    app = make_app(config=AGENT, bus=bus)
    status, body = health(app)
    assert status == 503
    assert body["checks"]["store"] == "ok"
    assert body["checks"]["bus"].startswith("unreachable: ")
