"""Shared fixtures: a fresh app per test, demo principals, runners and stores.

Set ``A2A_TEST_GEVENT=1`` to run the suite in a gevent-patched process (the ``runner`` fixture's
gevent case runs only there; ``test_gevent_session.py`` does that from the default run).
"""

from __future__ import annotations

import os

if os.environ.get("A2A_TEST_GEVENT"):
    from gevent import monkey

    monkey.patch_all()

import threading  # noqa: E402
import typing as t  # noqa: E402

import pytest  # noqa: E402
from flask import Flask, request  # noqa: E402

from flask_a2a import A2A, Part, Principal, Skill, TaskContext  # noqa: E402
from flask_a2a.runner import GeventRunner, ThreadRunner, gevent_patched  # noqa: E402
from flask_a2a.store import MemoryStore  # noqa: E402
from flask_a2a.testing import A2ATestClient  # noqa: E402

#: token -> principal, shared by every test app.
TOKENS: dict[str, Principal] = {
    "alice": Principal("alice"),
    "bob": Principal("bob"),
    "alice-read": Principal("alice", scopes=frozenset({"tasks:read"})),
    "alice-write": Principal("alice", scopes=frozenset({"tasks:write"})),
    "alice-t2": Principal("alice", tenant="t2"),
}


def token_principal() -> Principal | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return TOKENS.get(token) if scheme == "Bearer" else None


def echo(task: TaskContext) -> None:
    task.artifact([Part(text=task.message.text)], name="echo")


class Gate:
    """A handler that blocks until the test opens it (no sleeps: tests await events)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def handler(self, task: TaskContext) -> None:
        self.calls += 1
        task.working()
        self.entered.set()
        while not self.release.wait(0.01):
            task.check()
        task.artifact([Part(text="done")], name="gate")


@pytest.fixture(params=["threads", "gevent"])
def runner_kind(request: pytest.FixtureRequest) -> str:
    kind = t.cast(str, request.param)
    if kind == "gevent" and not gevent_patched():
        pytest.skip("gevent runner cases run in the patched session (tests/test_gevent_session.py)")
    if kind == "threads" and gevent_patched():
        pytest.skip("thread runner cases run in the unpatched session")
    return kind


@pytest.fixture
def make_runner(runner_kind: str) -> t.Callable[..., t.Any]:
    def build(size: int | None = None) -> t.Any:
        if runner_kind == "gevent":
            return GeventRunner(size or 100)
        return ThreadRunner(size or 32)

    return build


@pytest.fixture
def make_store() -> t.Callable[[], t.Any]:
    """The store backend (the SQL suite parametrizes its own)."""
    return MemoryStore


@pytest.fixture
def make_app(make_runner: t.Callable[..., t.Any], make_store: t.Callable[[], t.Any]) -> t.Callable[
    ..., Flask
]:
    """Build a fresh TESTING app: ``make_app(skills=[...], config={...}, **A2A options)``."""
    exchanges: list[t.Any] = []

    def build(
        skills: t.Sequence[Skill] | None = None,
        config: dict[str, t.Any] | None = None,
        runner_size: int | None = None,
        **options: t.Any,
    ) -> Flask:
        app = Flask("test_app")
        app.config["TESTING"] = True
        app.config["A2A_KEEPALIVE_INTERVAL"] = 0.2
        app.config.update(config or {})
        options.setdefault("store", make_store())
        options.setdefault("runner", make_runner(runner_size))
        options.setdefault("principal", token_principal)
        skills = skills or [Skill(id="echo", name="Echo", description="Echo.", handler=echo)]
        a2a = A2A(app, skills=skills, **options)
        exchanges.append(a2a.exchange(app))
        return app

    yield build
    for exchange in exchanges:
        exchange.shutdown(timeout=5)


@pytest.fixture
def app(make_app: t.Callable[..., Flask]) -> Flask:
    return make_app()


@pytest.fixture
def client(app: Flask) -> A2ATestClient:
    return A2ATestClient(app, token="alice")
