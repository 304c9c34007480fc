"""Deferred retention trims (stores declaring ``deferred_trims``): after the answer, shared by a
tier's settles, bounded, and waited for by the caller's ListTasks."""

from __future__ import annotations

import threading
import typing as t

import pytest
from flask import Flask

from flask_a2a.exchange import retention
from flask_a2a.protocol.model import Tier
from flask_a2a.store import ListQuery, MemoryStore
from flask_a2a.testing import A2ATestClient
from tests.conftest import SQL_KINDS, next_millisecond, wait_for


class SlowTrims(MemoryStore):
    """A memory store whose trim is a (held) round trip, as on a database."""

    deferred_trims = True

    def __init__(self) -> None:
        super().__init__()
        self.open = threading.Event()
        self.open.set()
        self.trims: list[Tier] = []
        self.entered = threading.Event()

    def trim_terminal_tasks(self, tier: Tier, keep: int) -> list[str]:
        self.trims.append(tier)
        self.entered.set()
        assert self.open.wait(10)
        return super().trim_terminal_tasks(tier, keep)


def slow_trims(
    make_app: t.Callable[..., Flask], keep: int
) -> tuple[SlowTrims, Flask, A2ATestClient]:
    """An app on a :class:`SlowTrims` store keeping ``keep`` settled tasks, and alice's client."""
    store = SlowTrims()
    app = make_app(store=store, config={"A2A_TERMINAL_TASK_RETENTION": keep})
    return store, app, A2ATestClient(app, "alice")


def total(client: A2ATestClient, token: str = "alice") -> int:
    return int(client.rpc("ListTasks", {"pageSize": 100}, token=token).result["totalSize"])


def test_the_answer_does_not_wait_for_the_trim_and_the_list_does(
    make_app: t.Callable[..., Flask],
) -> None:
    store, app, client = slow_trims(make_app, keep=2)
    for i in range(2):
        client.send(f"s{i}")
        next_millisecond()
    assert wait_for(lambda: not app.extensions["a2a"].exchange.retention._deferred)
    store.open.clear()
    store.entered.clear()
    client.send("third")  # answered while its tier's trim is held
    assert store.entered.wait(5)
    listed: list[int] = []
    lister = threading.Thread(target=lambda: listed.append(total(client)))
    lister.start()
    lister.join(0.3)
    assert listed == []  # the list waits for the trim owed to the answered settle
    store.open.set()
    lister.join(5)
    assert listed == [2]


def test_settles_while_a_trim_runs_share_one_more_trim(make_app: t.Callable[..., Flask]) -> None:
    store, app, client = slow_trims(make_app, keep=1)
    store.open.clear()
    client.send("first")
    assert store.entered.wait(5)
    for i in range(5):  # all while the first trim is held
        next_millisecond()
        client.send(f"s{i}")
    store.open.set()
    assert total(client) == 1
    assert len(store.trims) == 2  # the held one, then one for the five that came meanwhile


def test_settles_before_the_trim_starts_share_it_and_a_list_starts_it(
    make_app: t.Callable[..., Flask], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "GATHER_SECONDS", 30.0)  # only the list starts it
    store, app, client = slow_trims(make_app, keep=1)
    for i in range(4):
        client.send(f"s{i}")
        next_millisecond()
    assert store.trims == []  # answered, the tier's trim still gathering
    assert total(client) == 1  # the list started it and waited for it
    assert len(store.trims) == 1


def test_past_the_tier_bound_a_settle_trims_its_tier_itself(
    make_app: t.Callable[..., Flask], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "MAX_DEFERRED_TIERS", 1)
    store, app, client = slow_trims(make_app, keep=1)
    store.open.clear()
    client.send("held", token="alice-read")  # its tier's trim holds the one background place
    assert store.entered.wait(5)
    done: list[int] = []
    sender = threading.Thread(target=lambda: done.append(len(client.send("s")["task"]["id"])))
    sender.start()
    sender.join(0.3)
    assert done == []  # no room: the settle trims inline (and waits like the held one)
    store.open.set()
    sender.join(5)
    assert done and total(client, "alice-read") == 1


@pytest.fixture(params=[k for k in SQL_KINDS if k != "sqlite"])
def store_kind(request: pytest.FixtureRequest) -> str:
    """The databases, whose trims are deferred (a round trip each)."""
    return t.cast(str, request.param)


def test_concurrent_settles_in_one_tier_end_within_the_bound(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any]
) -> None:
    """Many settles at once over a database: once answered, ListTasks sees the bound."""
    store = new_store()
    assert store.deferred_trims
    app = make_app(store=store, config={"A2A_TERMINAL_TASK_RETENTION": 3})
    client = A2ATestClient(app, "alice")
    errors: list[BaseException] = []

    def send(n: int) -> None:
        try:
            for i in range(n):
                client.send(f"m{i}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(5,)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert total(client) == 3


def test_shutdown_runs_the_waiting_trims_before_it_returns(
    make_app: t.Callable[..., Flask],
) -> None:
    """No trim is left on a store connection once the exchange has stopped: shutdown starts the
    waiting ones at once (not after their gather delay) and waits for them."""
    store, app, client = slow_trims(make_app, keep=1)
    exchange = app.extensions["a2a"].exchange
    store.open.clear()
    client.send("first")
    next_millisecond()
    client.send("second")  # its tier's trim is due after the answer, and held
    assert store.entered.wait(5)
    assert exchange.retention._deferred
    stopped: list[bool] = []
    stopper = threading.Thread(target=lambda: stopped.append(exchange.shutdown(5)))
    stopper.start()
    stopper.join(0.3)
    assert stopped == []  # shutdown waits for the held trim
    store.open.set()
    stopper.join(10)
    assert stopped == [True]
    assert not exchange.retention._deferred
    assert len(store.list_tasks(ListQuery(owner="alice")).records) == 1  # trimmed to its bound
