"""What ends a run, when the database is gone (issue 23 item 3: the log showed "a2a: run
finalize panicked" lines). A store failure there is an outage, logged as the store's error with
what becomes of the write; "panicked" is kept for bugs (tests/exchange/test_lifecycle.py)."""

from __future__ import annotations

import logging
import threading
import typing as t

import pytest
import sqlalchemy as sa
from flask import Flask

from flask_a2a import Skill
from flask_a2a.store import MemoryStore
from flask_a2a.store.base import TaskRecord, store_failed
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, wait_for


def gone() -> sa.exc.OperationalError:
    return sa.exc.OperationalError(
        "UPDATE a2a_tasks ...", {}, Exception("server closed the connection unexpectedly")
    )


class TrimFails(MemoryStore):
    def trim_terminal_tasks(self, tier: t.Any, keep: int) -> list[str]:
        raise gone()


class GoesAway:
    """A store whose writes fail while :attr:`down` is set (the database went away)."""

    def __init__(self, inner: t.Any) -> None:
        self.inner = inner
        self.down = threading.Event()
        self.refused = threading.Event()

    def update_task(self, record: TaskRecord, expected_version: int) -> TaskRecord:
        if self.down.is_set():
            self.refused.set()
            raise gone()
        return t.cast(TaskRecord, self.inner.update_task(record, expected_version))

    def __getattr__(self, name: str) -> t.Any:
        return getattr(self.inner, name)


def test_store_failed_tells_an_outage_from_a_bug() -> None:
    assert store_failed(gone()) and store_failed(ConnectionResetError())
    assert not store_failed(RuntimeError("a bug")) and not store_failed(KeyError("x"))


def test_a_trim_the_store_refuses_after_a_settle_is_a_store_error_not_a_panic(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    client = A2ATestClient(make_app(store=TrimFails()), token="alice")
    with caplog.at_level(logging.ERROR, logger="flask_a2a"):
        task = client.send("hi", skill="echo")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"  # the settle is stored
    assert "retention after a settle failed: the store did not take it" in caplog.text
    assert "the tier is trimmed at its next settle" in caplog.text
    assert "panicked" not in caplog.text


def test_a_deadline_settle_the_store_refuses_is_owed_and_stored_once_it_answers(
    make_app: t.Callable[..., Flask], gate: Gate, caplog: pytest.LogCaptureFixture
) -> None:
    skills = [Skill(id="gate", name="Gate", description="Waits.", handler=gate.handler)]
    app = make_app(skills=skills, config={"A2A_TASK_TIMEOUT": 0.5,
                                          "A2A_REPLICA_POLL_INTERVAL": 0.05})  # fmt: skip
    exchange = app.extensions["a2a"].exchange
    client = A2ATestClient(app, token="alice")
    task = client.send("go", skill="gate", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(10)
    store = GoesAway(exchange.store)
    for holder in (exchange, exchange.writer, exchange.runs):
        holder.store = store
    with caplog.at_level(logging.WARNING, logger="flask_a2a"):
        store.down.set()
        assert store.refused.wait(10)  # the deadline came and its FAILED was refused
        assert wait_for(lambda: "the settle of a run past its deadline failed" in caplog.text)
        store.down.clear()

        def settled() -> bool:
            status = client.rpc("GetTask", {"id": task["id"]}).result["status"]
            return bool(status["state"] == "TASK_STATE_FAILED")

        assert wait_for(settled)
    status = client.rpc("GetTask", {"id": task["id"]}).result["status"]
    assert status["message"]["parts"][0]["text"] == "task timed out"  # owed, then stored
    assert "owed: settled FAILED once the store answers" in caplog.text
    assert "panicked" not in caplog.text
