"""Every handler run, and every write of a TaskUpdater, runs in the serving app's app context.

A skill of a real Flask-SQLAlchemy app queries ``db.session`` (an owner-scoped sum) blocking,
with ``returnImmediately``, streamed, resumed and handed off; ``current_app`` is the serving
app, no request context is visible, ``g`` is fresh per run, and the app's teardown (where
Flask-SQLAlchemy removes its session) runs once per run, so no connection is left checked out.
"""

from __future__ import annotations

import threading
import typing as t
from pathlib import Path

import pytest
import sqlalchemy as sa
from flask import Flask, current_app, g, has_app_context, has_request_context
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import func, select

from flask_a2a import Part, Skill, TaskContext
from flask_a2a.store import MemoryStore
from flask_a2a.store.base import TaskRecord
from flask_a2a.testing import A2ATestClient
from tests.conftest import wait_for

pytestmark = pytest.mark.usefixtures("binding")

db = SQLAlchemy()


class Invoice(db.Model):  # type: ignore[name-defined]
    __tablename__ = "ctx_invoices"
    id = db.Column(db.Integer, primary_key=True)
    owner = db.Column(db.String(64), nullable=False, index=True)
    amount = db.Column(db.Integer, nullable=False)


def callers_total(task: TaskContext) -> int:
    """The caller's rows only, through the app's own session."""
    query = select(func.coalesce(func.sum(Invoice.amount), 0)).where(
        Invoice.owner == task.principal.owner
    )
    return int(db.session.execute(query).scalar_one())


class Seen:
    """What each run saw of Flask: its app, its g, the request context, the pool."""

    def __init__(self) -> None:
        self.apps: list[Flask] = []
        self.requests: list[bool] = []
        self.stale_g: list[bool] = []
        self.checked_out: list[int] = []
        #: One entry per app-context teardown that ended a run (the task id the run put in g).
        self.teardowns: list[str] = []

    def enter(self, task: TaskContext) -> None:
        self.apps.append(current_app._get_current_object())  # type: ignore[attr-defined]
        self.requests.append(has_request_context())
        self.stale_g.append("run_task" in g)
        g.run_task = task.id

    def summary(self, task: TaskContext) -> None:
        self.enter(task)
        total = callers_total(task)
        self.checked_out.append(t.cast(t.Any, db.engine.pool).checkedout())
        task.artifact([Part(data={"total": total})], name="summary")


def invoice_app(
    make_app: t.Callable[..., Flask], tmp_path: Path, seen: Seen, **options: t.Any
) -> Flask:
    skills = options.pop("skills", None) or [
        Skill(id="summary", name="Summary", description="Sums.", handler=seen.summary)
    ]
    app = make_app(
        skills=skills,
        config={
            "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'app.db'}",
            # a pool whose check-outs the test counts (SQLAlchemy 1.4 gives a file no pool)
            "SQLALCHEMY_ENGINE_OPTIONS": {
                "poolclass": sa.pool.QueuePool,
                "connect_args": {"check_same_thread": False},
            },
        },  # fmt: skip
        **options,
    )
    db.init_app(app)

    @app.teardown_appcontext
    def count(exc: BaseException | None) -> None:
        if "run_task" in g:
            seen.teardowns.append(g.run_task)

    with app.app_context():
        db.create_all()
        db.session.add_all(
            [
                Invoice(owner="alice", amount=12),
                Invoice(owner="alice", amount=30),
                Invoice(owner="bob", amount=500),
            ]
        )
        db.session.commit()
    return app


def runs_done(app: Flask) -> bool:
    return not app.extensions["a2a"].exchange.live_runs()


def assert_clean(app: Flask, seen: Seen, task_ids: list[str]) -> None:
    """Every run ended its app context: teardown once each, no connection checked out."""
    assert wait_for(lambda: runs_done(app) and len(seen.teardowns) >= len(task_ids))
    assert sorted(seen.teardowns) == sorted(task_ids)
    assert all(a is app for a in seen.apps)
    assert not any(seen.requests) and not any(seen.stale_g)
    with app.app_context():
        assert t.cast(t.Any, db.engine.pool).checkedout() == 0


def summary_total(task: dict[str, t.Any]) -> int:
    return int(task["artifacts"][0]["parts"][0]["data"]["total"])


@pytest.fixture
def seen() -> Seen:
    return Seen()


def test_blocking_runs_query_the_callers_rows_and_release_the_session(
    make_app: t.Callable[..., Flask], tmp_path: Path, seen: Seen
) -> None:
    app = invoice_app(make_app, tmp_path, seen)
    client = A2ATestClient(app, token="alice")
    ids = []
    for _ in range(5):
        task = client.send(skill="summary")["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        assert summary_total(task) == 42
        ids.append(task["id"])
    bob = client.send(skill="summary", token="bob")["task"]
    assert summary_total(bob) == 500
    ids.append(bob["id"])
    assert all(n >= 1 for n in seen.checked_out)  # the session held a connection in the run
    assert_clean(app, seen, ids)


def test_return_immediately_run_has_the_app_context(
    make_app: t.Callable[..., Flask], tmp_path: Path, seen: Seen
) -> None:
    app = invoice_app(make_app, tmp_path, seen)
    client = A2ATestClient(app, token="alice")
    task = client.send(skill="summary", configuration={"returnImmediately": True})["task"]
    assert wait_for(lambda: runs_done(app))
    done = client.rpc("GetTask", {"id": task["id"]}).result
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert summary_total(done) == 42
    assert_clean(app, seen, [task["id"]])


def test_streamed_run_has_the_app_context(
    make_app: t.Callable[..., Flask], tmp_path: Path, seen: Seen
) -> None:
    app = invoice_app(make_app, tmp_path, seen)
    client = A2ATestClient(app, token="alice")
    _, events = client.stream(
        "SendStreamingMessage", {"message": client.message("go", skill="summary")}
    )
    results = [event["result"] for event in events]
    artifact = next(r["artifactUpdate"]["artifact"] for r in results if "artifactUpdate" in r)
    assert artifact["parts"] == [{"data": {"total": 42}}]
    assert results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert_clean(app, seen, [results[0]["task"]["id"]])


def test_resumed_run_has_the_app_context(
    make_app: t.Callable[..., Flask], tmp_path: Path, seen: Seen
) -> None:
    def ask_then_sum(task: TaskContext) -> None:
        seen.enter(task)
        total = callers_total(task)
        if len(task.history) < 2:
            task.require_input(f"you have {total}; which year?")
            return
        task.artifact([Part(data={"total": total, "year": task.message.text})])

    app = invoice_app(
        make_app,
        tmp_path,
        seen,
        skills=[Skill(id="ask", name="Ask", description="Asks, then sums.", handler=ask_then_sum)],
    )
    client = A2ATestClient(app, token="alice")
    paused = client.send(skill="ask")["task"]
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", paused
    assert paused["status"]["message"]["parts"] == [{"text": "you have 42; which year?"}]
    assert wait_for(lambda: runs_done(app))
    resumed = client.send("2024", task_id=paused["id"])["task"]
    assert resumed["status"]["state"] == "TASK_STATE_COMPLETED", resumed
    assert resumed["artifacts"][0]["parts"] == [{"data": {"total": 42, "year": "2024"}}]
    assert_clean(app, seen, [paused["id"], paused["id"]])


class ContextRecordingStore(MemoryStore):
    """Records, for each task write, the app whose context was active (None: no context)."""

    def __init__(self) -> None:
        super().__init__()
        self.writers: list[Flask | None] = []

    def update_task(self, record: TaskRecord, expected_version: int) -> TaskRecord:
        self.writers.append(
            current_app._get_current_object() if has_app_context() else None  # type: ignore[attr-defined]
        )
        return super().update_task(record, expected_version)


def test_handed_off_work_and_task_updater_writes_have_the_app_context(
    make_app: t.Callable[..., Flask], tmp_path: Path, seen: Seen
) -> None:
    handed: list[str] = []

    def queue(task: TaskContext) -> None:
        seen.enter(task)
        task.hand_off(f"queued {callers_total(task)}")
        handed.append(task.id)

    store = ContextRecordingStore()
    app = invoice_app(
        make_app,
        tmp_path,
        seen,
        store=store,
        skills=[Skill(id="queue", name="Queue", description="Hands off.", handler=queue)],
    )
    client = A2ATestClient(app, token="alice")
    working = client.send(skill="queue")["task"]
    assert working["status"]["state"] == "TASK_STATE_WORKING", working
    assert working["status"]["message"]["parts"] == [{"text": "queued 42"}]
    assert_clean(app, seen, [working["id"]])

    a2a = app.extensions["a2a"]
    outside: list[bool] = []
    store.writers.clear()

    def worker() -> None:  # a job worker: a plain thread, no app context of its own
        updater = a2a.exchange.task_updater(handed[0])
        updater.artifact([Part(text="part one")], name="report")
        outside.append(has_app_context())  # each write pushed and popped its own context
        updater.complete("report ready")

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(10)
    assert outside == [False]
    assert store.writers and all(w is app for w in store.writers)
    done = client.rpc("GetTask", {"id": handed[0]}).result
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"


def test_task_updater_inside_the_workers_own_context_leaves_it_alone(
    make_app: t.Callable[..., Flask], tmp_path: Path, seen: Seen
) -> None:
    app = invoice_app(
        make_app,
        tmp_path,
        seen,
        skills=[
            Skill(
                id="queue",
                name="Queue",
                description="Hands off.",
                handler=lambda task: task.hand_off(),
            )
        ],
    )
    client = A2ATestClient(app, token="alice")
    task_id = client.send(skill="queue")["task"]["id"]
    with app.app_context():  # the worker's own context (its own db.session work)
        g.job = "mine"
        session = db.session()
        updater = app.extensions["a2a"].exchange.task_updater(task_id)
        updater.artifact([Part(text="x")])
        updater.complete()
        assert g.job == "mine" and db.session() is session  # not torn down by the updater
    assert client.rpc("GetTask", {"id": task_id}).result["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )


def test_current_app_is_the_app_serving_the_exchange(
    make_app: t.Callable[..., Flask], tmp_path: Path, seen: Seen
) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = invoice_app(make_app, tmp_path / "one", seen)
    other = Seen()
    second = invoice_app(make_app, tmp_path / "two", other)
    A2ATestClient(second, token="alice").send(skill="summary")
    A2ATestClient(first, token="bob").send(skill="summary")
    assert other.apps == [second] and seen.apps == [first]
