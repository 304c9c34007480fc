"""Runs: slots per owner and per process, deadlines, handler failures, data, resumes, retention."""

from __future__ import annotations

import logging
import math
import threading
import time
import typing as t

import pytest
from flask import Flask

from flask_a2a import Message, Part, Role, Skill, TaskContext, TaskTimedOut
from flask_a2a.protocol.errors import UnencodableDataError
from flask_a2a.store import MemoryStore
from flask_a2a.store.base import TaskRecord
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, echo, next_millisecond, wait_for
from tests.runners import WrappedRunner


def ask(task: TaskContext) -> None:
    """Pause on the first message; on a resume, report what the run saw."""
    if len(task.history) == 1:
        task.require_input("more?")
        return
    texts = [p.text for m in task.history for p in m.parts if p.text is not None]
    task.artifact([Part(text=task.message.text)], name="message")
    task.artifact([Part(text="|".join(texts))], name="history")


class FrozenTimers(WrappedRunner):
    """Wraps a runner so deadline timers never fire: only the run's own clock checks remain."""

    def call_later(self, delay: float, fn: t.Callable[[], None]) -> t.Any:
        return self

    def cancel(self) -> None:
        """The frozen timer: nothing to cancel."""


class CountingStore(MemoryStore):
    """Counts writes, so a test can prove a refusal or a no-op wrote nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.creates = 0
        self.updates = 0

    def create_task(self, record: TaskRecord) -> TaskRecord:
        self.creates += 1
        return super().create_task(record)

    def update_task(self, record: TaskRecord, expected_version: int) -> TaskRecord:
        self.updates += 1
        return super().update_task(record, expected_version)


def app_with(
    make_app: t.Callable[..., Flask],
    gate: Gate | None = None,
    config: dict[str, t.Any] | None = None,
    *,
    runner: t.Any = None,
    store: t.Any = None,
    **handlers: t.Callable[[TaskContext], None],
) -> tuple[Flask, A2ATestClient]:
    """An app serving echo, ask, the gate and ``handlers`` (skill id -> handler)."""
    handlers.setdefault("echo", echo)
    handlers.setdefault("ask", ask)
    if gate is not None:
        handlers["gate"] = gate.handler
    skills = [Skill(id=k, name=k, description=k, handler=v) for k, v in handlers.items()]
    options: dict[str, t.Any] = {}
    if runner is not None:
        options["runner"] = runner
    if store is not None:
        options["store"] = store
    app = make_app(skills=skills, config=config, **options)
    return app, A2ATestClient(app, token="alice")


def exchange_of(app: Flask) -> t.Any:
    return app.extensions["a2a"].exchange


def start_gate(client: A2ATestClient, token: str = "alice") -> t.Any:
    """Start a gate run with returnImmediately (failing, not hanging, if the send blocks)."""
    out: list[t.Any] = []
    params = {
        "message": A2ATestClient.message("hold", skill="gate"),
        "configuration": {"returnImmediately": True},
    }
    worker = threading.Thread(
        target=lambda: out.append(client.rpc("SendMessage", params, token=token)), daemon=True
    )
    worker.start()
    worker.join(5)
    if worker.is_alive():
        exchange_of(client.app).shutdown(timeout=1)  # cancels the gates so the send returns
        raise AssertionError("SendMessage with returnImmediately blocked")
    return out[0]


def count_tasks(app: Flask, owner: str = "alice") -> int:
    return len(exchange_of(app).store.export_owner(owner)["tasks"])


def state(task: dict[str, t.Any]) -> str:
    return t.cast(str, task["status"]["state"])


# ----------------------------------------------------------------------------- run slots


def test_per_owner_cap_refuses_before_writing(make_app: t.Callable[..., Flask], gate: Gate) -> None:
    app, client = app_with(make_app, gate, {"A2A_MAX_CONCURRENT_RUNS_PER_OWNER": 2})
    for _ in range(2):
        assert state(start_gate(client).result["task"]) == "TASK_STATE_SUBMITTED"
    refused = start_gate(client)
    assert refused.code == -32004
    assert "maximum concurrent task runs reached" in refused.error["message"]
    blocking = client.rpc("SendMessage", {"message": A2ATestClient.message("x", skill="echo")})
    assert blocking.code == -32004
    assert count_tasks(app) == 2  # no row for either refusal
    # Another owner has slots of their own.
    assert state(client.send("x", skill="echo", token="bob")["task"]) == "TASK_STATE_COMPLETED"
    gate.release.set()
    assert wait_for(lambda: exchange_of(app).slots.held("alice") == 0)
    assert state(client.send("x", skill="echo")["task"]) == "TASK_STATE_COMPLETED"


def test_negative_per_owner_cap_is_unlimited(make_app: t.Callable[..., Flask], gate: Gate) -> None:
    app, client = app_with(make_app, gate, {"A2A_MAX_CONCURRENT_RUNS_PER_OWNER": -1})
    for _ in range(20):  # past the default of 16
        assert start_gate(client).result["task"]
    assert exchange_of(app).slots.held("alice") == 20
    gate.release.set()


def test_zero_per_owner_cap_means_16(make_app: t.Callable[..., Flask], gate: Gate) -> None:
    app, client = app_with(make_app, gate, {"A2A_MAX_CONCURRENT_RUNS_PER_OWNER": 0})
    for _ in range(16):
        assert start_gate(client).result["task"]
    assert start_gate(client).code == -32004
    assert count_tasks(app) == 16
    gate.release.set()


def test_full_run_pool_refuses_before_writing(
    make_app: t.Callable[..., Flask], make_runner: t.Callable[..., t.Any], gate: Gate
) -> None:
    app, client = app_with(
        make_app, gate, {"A2A_MAX_CONCURRENT_RUNS_PER_OWNER": 2}, runner=make_runner(2)
    )
    assert state(start_gate(client).result["task"]) == "TASK_STATE_SUBMITTED"
    assert state(start_gate(client, token="bob").result["task"]) == "TASK_STATE_SUBMITTED"
    for token in ("alice", "alice", "alice", "bob"):
        assert start_gate(client, token=token).code == -32004
    assert count_tasks(app) == 1 and count_tasks(app, "bob") == 1
    # A pool refusal gives the owner slot back: alice (cap 2, one run) may start one more.
    exchange = exchange_of(app)
    assert exchange.slots.held("alice") == 1
    bob_gate = exchange.store.export_owner("bob")["tasks"][0]["task"]["id"]
    assert state(client.rpc("CancelTask", {"id": bob_gate}, token="bob").result) == (
        "TASK_STATE_CANCELED"
    )
    assert wait_for(lambda: exchange.slots.held("bob") == 0)
    assert state(start_gate(client).result["task"]) == "TASK_STATE_SUBMITTED"
    gate.release.set()


def test_resume_while_slots_are_taken_leaves_the_paused_task_as_it_was(
    make_app: t.Callable[..., Flask], gate: Gate
) -> None:
    store = CountingStore()
    app, client = app_with(make_app, gate, {"A2A_MAX_CONCURRENT_RUNS_PER_OWNER": 1}, store=store)
    paused = client.send("first", skill="ask")["task"]
    assert state(paused) == "TASK_STATE_INPUT_REQUIRED"
    before = store.get_task(paused["id"])
    assert state(start_gate(client).result["task"]) == "TASK_STATE_SUBMITTED"
    assert gate.entered.wait(5)
    writes = store.updates
    resume = {"message": A2ATestClient.message("second", skill="ask", task_id=paused["id"])}
    assert client.rpc("SendMessage", resume).code == -32004
    assert store.get_task(paused["id"]) is before  # same version, status and history
    assert client.rpc("GetTask", {"id": paused["id"]}).result == paused
    assert store.updates == writes
    gate.release.set()
    assert wait_for(lambda: exchange_of(app).slots.held("alice") == 0)
    assert state(client.rpc("SendMessage", resume).result["task"]) == "TASK_STATE_COMPLETED"


# ----------------------------------------------------------------------------- deadlines


def test_stuck_handler_times_out_and_the_send_returns(
    make_app: t.Callable[..., Flask], runner_kind: str
) -> None:
    release, finished = threading.Event(), threading.Event()
    late: list[str] = []

    def stuck(task: TaskContext) -> None:
        try:
            task.working()
            release.wait(30)  # ignores task.check(): only the deadline can end this send
            try:
                task.complete("late")
                late.append("written")
            except TaskTimedOut:
                late.append("refused")
        finally:
            finished.set()

    app, client = app_with(make_app, config={"A2A_TASK_TIMEOUT": 0.3}, stuck=stuck)
    watchdog = threading.Timer(20, release.set)  # keeps a broken build from hanging the suite
    watchdog.start()
    try:
        started = time.monotonic()
        task = client.send("x", skill="stuck")["task"]
        elapsed = time.monotonic() - started
        assert not release.is_set(), "the send waited for the handler, not the deadline"
    finally:
        release.set()
        watchdog.cancel()
    assert elapsed < 10
    assert state(task) == "TASK_STATE_FAILED"
    assert task["status"]["message"]["parts"] == [{"text": "task timed out"}]
    assert finished.wait(5)
    assert late == (["refused"] if runner_kind == "threads" else [])
    after = client.rpc("GetTask", {"id": task["id"]}).result
    assert state(after) == "TASK_STATE_FAILED"


def test_every_mutation_past_the_deadline_raises(
    make_app: t.Callable[..., Flask], make_runner: t.Callable[..., t.Any]
) -> None:
    outcomes: dict[str, str] = {}
    versions: list[int] = []
    store = CountingStore()

    def slow(task: TaskContext) -> None:
        task.working()
        for _ in range(2000):  # bounded: the deadline is 0.2 s away
            try:
                task.check()
            except TaskTimedOut:
                break
            threading.Event().wait(0.005)
        record = store.get_task(task.id)
        assert record is not None
        versions.append(record.version)
        mutations: dict[str, t.Callable[[], t.Any]] = {
            "working": lambda: task.working("still"),
            "artifact": lambda: task.artifact([Part(text="late")]),
            "require_input": lambda: task.require_input("?"),
            "require_auth": lambda: task.require_auth("?"),
            "reject": lambda: task.reject("no"),
            "fail": lambda: task.fail("no"),
            "complete": task.complete,
        }
        for name, mutate in mutations.items():
            try:
                mutate()
                outcomes[name] = "written"
            except TaskTimedOut:
                outcomes[name] = "refused"
        record = store.get_task(task.id)
        assert record is not None
        versions.append(record.version)

    # The timer never fires: the run's own clock must refuse, and the run must still settle.
    runner = FrozenTimers(make_runner())
    app, client = app_with(
        make_app,
        config={"A2A_TASK_TIMEOUT": 0.2, "A2A_BLOCKING_WRITE_DELAY": 0},
        slow=slow,
        runner=runner,
        store=store,
    )
    task = client.send("x", skill="slow")["task"]
    assert outcomes == dict.fromkeys(outcomes, "refused") and len(outcomes) == 7
    assert versions[0] == versions[1]
    assert state(task) == "TASK_STATE_FAILED"
    assert task["status"]["message"]["parts"] == [{"text": "task timed out"}]
    assert "artifacts" not in task


def test_handler_that_swallows_the_deadline_still_fails(
    make_app: t.Callable[..., Flask], make_runner: t.Callable[..., t.Any]
) -> None:
    def stubborn(task: TaskContext) -> None:
        for _ in range(2000):
            try:
                task.check()
            except TaskTimedOut:
                return  # returns normally: the run must not complete it
            threading.Event().wait(0.005)

    app, client = app_with(
        make_app,
        config={"A2A_TASK_TIMEOUT": 0.2},
        stubborn=stubborn,
        runner=FrozenTimers(make_runner()),
    )
    task = client.send("x", skill="stubborn")["task"]
    assert state(task) == "TASK_STATE_FAILED"
    assert exchange_of(app).slots.held("alice") == 0


# ----------------------------------------------------------------------------- handlers


def test_handler_exception_fails_the_task_generically_and_logs_scrubbed(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    def boom(task: TaskContext) -> None:
        raise RuntimeError("bad\x1b[31m\r\nFORGED LINE")

    app, client = app_with(make_app, boom=boom)
    with caplog.at_level(logging.WARNING, logger="flask_a2a"):
        task = client.send("x", skill="boom")["task"]
    assert state(task) == "TASK_STATE_FAILED"
    text = task["status"]["message"]["parts"][0]["text"]
    assert text == "skill handler failed"  # the exception's text stays in the log
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "RuntimeError: bad\\x1b[31m\\x0d\\x0aFORGED LINE" in logged
    assert "\x1b" not in logged and "\r" not in logged
    assert not any(line.startswith("FORGED") for line in logged.split("\n"))
    # The process carries on.
    assert state(client.send("x", skill="echo")["task"]) == "TASK_STATE_COMPLETED"


def test_working_is_idempotent(make_app: t.Callable[..., Flask]) -> None:
    store = CountingStore()
    seen: dict[str, t.Any] = {}

    def twice(task: TaskContext) -> None:
        subscription = exchange.bus.subscribe(task.id)
        task.working()
        first = store.get_task(task.id)
        writes = store.updates
        task.working()
        task.working()
        second = store.get_task(task.id)
        seen.update(
            writes=store.updates - writes,
            same=second is first,
            events=[subscription.get(0) for _ in range(3)],
        )
        subscription.close()

    # Every change written at once (a held task's changes are never published at all).
    config = {"A2A_BLOCKING_WRITE_DELAY": 0}
    app, client = app_with(make_app, twice=twice, store=store, config=config)
    exchange = exchange_of(app)
    task = client.send("x", skill="twice")["task"]
    assert state(task) == "TASK_STATE_COMPLETED"
    assert seen["writes"] == 0 and seen["same"] is True
    events = [e for e in seen["events"] if e is not None]
    assert len(events) == 1  # the first working() only


@pytest.mark.parametrize(
    "bad",
    [math.nan, math.inf, print, "cycle"],
    ids=["nan", "inf", "function", "cycle"],
)
def test_unencodable_data_fails_only_that_mutation(
    make_app: t.Callable[..., Flask], bad: t.Any
) -> None:
    store = CountingStore()
    caught: list[str] = []
    if bad == "cycle":
        bad = {}
        bad["self"] = bad

    def data(task: TaskContext) -> None:
        task.working()
        before = store.get_task(task.id)
        attempts: list[t.Callable[[], t.Any]] = [
            lambda: task.artifact([Part(data={"value": bad})]),
            lambda: task.artifact([Part(text="x")], metadata={"value": bad}),
            lambda: task.complete(Message("m-bad", Role.AGENT, (Part(data=bad),))),
            # Where a string goes, as a handler may pass it: checked too, not assumed.
            lambda: task.artifact([Part(text=bad)]),
            lambda: task.artifact([Part(text="x")], name=bad),
            lambda: task.artifact([Part(text="x")], artifact_id=bad),
            lambda: task.artifact([Part(text="x", filename=bad)]),
            lambda: task.complete(Message("m-bad", Role.AGENT, (Part(text=bad),))),
        ]
        for attempt in attempts:
            try:
                attempt()
                caught.append("written")
            except UnencodableDataError:
                caught.append("refused")
        assert store.get_task(task.id) is before
        task.artifact([Part(text="fine")], name="fine")

    app, client = app_with(make_app, data=data, store=store)
    task = client.send("x", skill="data")["task"]
    assert caught == ["refused"] * 8
    assert state(task) == "TASK_STATE_COMPLETED"
    assert [a["name"] for a in task["artifacts"]] == ["fine"]


def test_unencodable_data_left_uncaught_fails_the_task(make_app: t.Callable[..., Flask]) -> None:
    def data(task: TaskContext) -> None:
        task.artifact([Part(data=math.nan)])

    app, client = app_with(make_app, data=data)
    task = client.send("x", skill="data")["task"]
    assert state(task) == "TASK_STATE_FAILED"
    assert "cannot" in task["status"]["message"]["parts"][0]["text"]
    assert "artifacts" not in task


def test_returning_without_settling_completes(make_app: t.Callable[..., Flask]) -> None:
    app, client = app_with(make_app, quiet=lambda task: None)
    task = client.send("x", skill="quiet")["task"]
    assert state(task) == "TASK_STATE_COMPLETED"


def test_require_input_then_resume_runs_again_with_full_history(
    make_app: t.Callable[..., Flask],
) -> None:
    app, client = app_with(make_app)
    paused = client.send("first", skill="ask")["task"]
    assert state(paused) == "TASK_STATE_INPUT_REQUIRED"
    resume = {"message": A2ATestClient.message("second", task_id=paused["id"])}
    task = client.rpc("SendMessage", resume).result["task"]
    assert state(task) == "TASK_STATE_COMPLETED"
    assert task["contextId"] == paused["contextId"]
    artifacts = {a["name"]: a["parts"][0]["text"] for a in task["artifacts"]}
    assert artifacts == {"message": "second", "history": "first|more?|second"}
    assert [m["role"] for m in task["history"]] == ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"]
    assert all(m["contextId"] == paused["contextId"] for m in task["history"])


# ----------------------------------------------------------------------------- retention


def ids_of(client: A2ATestClient, token: str = "alice", **params: t.Any) -> list[str]:
    page = client.rpc("ListTasks", {"pageSize": 100, **params}, token=token).result
    return [task["id"] for task in page["tasks"]]


def settle_n(client: A2ATestClient, n: int, token: str = "alice") -> list[str]:
    out = []
    for i in range(n):
        out.append(client.send(f"t{i}", skill="echo", token=token)["task"]["id"])
        next_millisecond()
    return out


def test_terminal_retention_keeps_the_newest_per_tier(make_app: t.Callable[..., Flask]) -> None:
    app, client = app_with(make_app, config={"A2A_TERMINAL_TASK_RETENTION": 3})
    made = settle_n(client, 5)
    assert ids_of(client) == list(reversed(made[2:]))
    for old in made[:2]:
        assert client.rpc("GetTask", {"id": old}).code == -32001


def test_retention_tiers_never_delete_each_other(make_app: t.Callable[..., Flask]) -> None:
    app, client = app_with(make_app, config={"A2A_TERMINAL_TASK_RETENTION": 3})
    made: dict[str, list[str]] = {"alice": [], "alice-read": [], "alice-t2": []}
    for _ in range(5):
        for token in made:
            made[token] += settle_n(client, 1, token=token)
    assert ids_of(client, "alice-read") == list(reversed(made["alice-read"][-3:]))
    assert ids_of(client, "alice-t2") == list(reversed(made["alice-t2"][-3:]))
    session = set(ids_of(client, "alice"))
    assert session == set(made["alice"][-3:]) | set(made["alice-read"][-3:])


def test_in_flight_tasks_are_never_trimmed(make_app: t.Callable[..., Flask], gate: Gate) -> None:
    app, client = app_with(
        make_app, gate, {"A2A_TERMINAL_TASK_RETENTION": 1, "A2A_PAUSED_TASK_RETENTION": 1}
    )
    running = start_gate(client).result["task"]
    paused = client.send("p", skill="ask")["task"]
    settle_n(client, 3)
    assert state(client.rpc("GetTask", {"id": running["id"]}).result) == "TASK_STATE_WORKING"
    assert state(client.rpc("GetTask", {"id": paused["id"]}).result) == (
        "TASK_STATE_INPUT_REQUIRED"
    )
    gate.release.set()
    assert wait_for(
        lambda: state(client.rpc("GetTask", {"id": running["id"]}).result) == "TASK_STATE_COMPLETED"
    )
    assert len(ids_of(client, status="TASK_STATE_COMPLETED")) == 1


def test_paused_retention_cancels_the_oldest_in_its_tier_only(
    make_app: t.Callable[..., Flask],
) -> None:
    app, client = app_with(make_app, config={"A2A_PAUSED_TASK_RETENTION": 2})
    other = client.send("p", skill="ask", token="alice-read")["task"]
    next_millisecond()
    paused = []
    for i in range(3):
        paused.append(client.send(f"p{i}", skill="ask")["task"]["id"])
        next_millisecond()
    states = {i: state(client.rpc("GetTask", {"id": i}).result) for i in paused}
    assert states == {
        paused[0]: "TASK_STATE_CANCELED",
        paused[1]: "TASK_STATE_INPUT_REQUIRED",
        paused[2]: "TASK_STATE_INPUT_REQUIRED",
    }
    assert client.rpc("GetTask", {"id": other["id"]}, token="alice-read").result == other


@pytest.mark.parametrize(
    ("knob", "value", "n", "kept"),
    [
        ("A2A_TERMINAL_TASK_RETENTION", -1, 70, 70),
        ("A2A_TERMINAL_TASK_RETENTION", 0, 66, 64),
        ("A2A_PAUSED_TASK_RETENTION", -1, 66, 66),
        ("A2A_PAUSED_TASK_RETENTION", 0, 66, 64),
    ],
)
def test_retention_knob_values(
    make_app: t.Callable[..., Flask], knob: str, value: int, n: int, kept: int
) -> None:
    app, client = app_with(make_app, config={knob: value})
    skill = "echo" if "TERMINAL" in knob else "ask"
    for i in range(n):
        client.send(f"t{i}", skill=skill)
    page = client.rpc(
        "ListTasks",
        {"status": "TASK_STATE_COMPLETED" if skill == "echo" else "TASK_STATE_INPUT_REQUIRED"},
    ).result
    assert page["totalSize"] == kept
