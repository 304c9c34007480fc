"""An exchange is built once from what it needs (docs/architecture.md, "How the exchange and a
run are built"): the host's hooks go to its constructor, a run is handed to the ``RunLife`` its
``Runs`` holds, the runner itself says whether a run may run in the request's greenlet, and one
module says who sees a task."""

from __future__ import annotations

import contextlib
import typing as t

import pytest
from flask import Flask

from flask_a2a import Principal, Skill, TaskContext
from flask_a2a.config import DEFAULTS, ConfigError, Settings
from flask_a2a.exchange.calls import Call, HTTPRequest
from flask_a2a.exchange.hooks import HostHooks
from flask_a2a.exchange.methods import Exchange
from flask_a2a.exchange.run_life import RunLife
from flask_a2a.exchange.runner import ThreadRunner
from flask_a2a.exchange.runs import Runs
from flask_a2a.exchange.visibility import visible_record
from flask_a2a.protocol.errors import TaskNotFoundError
from flask_a2a.protocol.params import read_send_params
from flask_a2a.store import MemoryStore
from flask_a2a.testing import A2ATestClient
from tests.conftest import echo
from tests.runners import WrappedRunner

MESSAGE = {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}]}}


def call(exchange: Exchange, method: str, params: dict[str, t.Any], owner: str) -> t.Any:
    """One method of a hand-built exchange, called as a binding would (no Flask)."""
    principal = Principal(owner)
    http = HTTPRequest("POST", {}, "127.0.0.1", 0, lambda n: b"", lambda: principal)
    return exchange.methods[method](Call(1, params, principal, http))


def test_a_hand_built_exchange_takes_the_hosts_hooks_at_construction() -> None:
    """No Flask, nothing set afterwards: the handler runs inside the given context and sees
    the principal the host maps to, and the extended card is the one given."""
    seen: list[tuple[str, str | None, bool]] = []
    inside: list[bool] = []

    @contextlib.contextmanager
    def run_context() -> t.Iterator[None]:
        inside.append(True)
        try:
            yield
        finally:
            inside.pop()

    def handler(task: TaskContext) -> None:
        seen.append((task.principal.owner, task.principal.tenant, bool(inside)))
        echo(task)

    settings = Settings.from_config(dict(DEFAULTS))
    skill = Skill(id="echo", name="Echo", description="Echo.", handler=handler)
    exchange = Exchange(
        settings,
        [skill],
        MemoryStore(),
        ThreadRunner(4),
        hooks=HostHooks(
            run_context=run_context,
            handler_principal=lambda p: Principal(p.owner, tenant="as-the-host-sees-it"),
            extended_card=lambda p: {"name": f"extended for {p.owner}"},
        ),
    )
    try:
        answer = call(exchange, "SendMessage", MESSAGE, "alice")
        assert seen == [("alice", "as-the-host-sees-it", True)]
        assert answer is not None
        assert call(exchange, "GetExtendedAgentCard", {}, "alice") == {"name": "extended for alice"}
    finally:
        exchange.shutdown(timeout=5)


def test_runs_hold_their_run_life(app: Flask) -> None:
    """Composition, not inheritance: what a run does once launched is the RunLife's."""
    runs = app.extensions["a2a"].exchange.runs
    assert not issubclass(Runs, RunLife)
    assert isinstance(runs.life, RunLife)


class StartOnly(WrappedRunner):
    """A runner that offers ``here`` but says it cannot run a run there: it must never be
    asked to (once, ``getattr(runner, "here")`` decided instead of the runner)."""

    def __init__(self) -> None:
        super().__init__(ThreadRunner(4))
        self.started = 0

    def start(self, fn: t.Callable[[], None]) -> t.Any:
        self.started += 1
        return self.inner.start(fn)


def test_a_runner_that_cannot_run_here_starts_every_run(make_app: t.Callable[..., Flask]) -> None:
    runner = StartOnly()
    client = A2ATestClient(make_app(runner=runner), "alice")
    reply = client.rpc("SendMessage", MESSAGE)
    assert reply.result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert runner.started == 1


@pytest.mark.parametrize(
    "caller",
    [
        Principal("bob"),
        Principal("alice", tenant="t2"),
        Principal("alice", tenant="t1", scopes=frozenset({"tasks:read"})),
    ],
)
def test_one_rule_says_who_sees_a_task(caller: Principal) -> None:
    """Owner, tenant (and so agent) and scope set: another tier's task is as unknown as none."""
    store = MemoryStore()
    settings = Settings.from_config(dict(DEFAULTS))
    skill = Skill(id="echo", name="Echo", description="Echo.", handler=echo)
    exchange = Exchange(settings, [skill], store, ThreadRunner(4))
    try:
        principal = Principal("alice", tenant="t1")
        message = read_send_params(dict(MESSAGE))["message"]
        task = exchange.runs.start(message, principal, {"return_immediately": True}).record.task
        assert visible_record(store, task.id, principal).task.id == task.id
        with pytest.raises(TaskNotFoundError):
            visible_record(store, task.id, caller)
        with pytest.raises(TaskNotFoundError):
            visible_record(store, "no-such-task", principal)
    finally:
        exchange.shutdown(timeout=5)


class Unsaid(StartOnly):
    """A runner written before ``can_run_here``: it never says."""

    can_run_here = None  # type: ignore[assignment]


def test_a_runner_that_does_not_say_fails_init_app(make_app: t.Callable[..., Flask]) -> None:
    """Not -32603 on every blocking send later: the one error, at startup, naming the fix."""
    with pytest.raises(ConfigError, match="can_run_here"):
        make_app(runner=Unsaid())


class Lockless(StartOnly):
    """A runner written before ``lock``: each run's writes would have no lock to take."""

    lock = None  # type: ignore[assignment]


def test_a_runner_without_a_lock_fails_init_app(make_app: t.Callable[..., Flask]) -> None:
    with pytest.raises(ConfigError, match=r"lock\(\)"):
        make_app(runner=Lockless())
