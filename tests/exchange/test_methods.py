"""The JSON-RPC methods one by one: SendMessage, GetTask, ListTasks, CancelTask, the card, push."""

from __future__ import annotations

import base64
import threading
import typing as t

import pytest
from flask import Flask

from flask_a2a import Part, Skill, TaskCanceled, TaskContext
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, echo, next_millisecond, wait_for
from tests.runners import WrappedRunner

pytestmark = pytest.mark.usefixtures("binding")

# ----------------------------------------------------------------------------- helpers


def bounded(call: t.Callable[[], t.Any], on_timeout: t.Callable[[], None]) -> t.Any:
    """Run ``call`` but fail (after ``on_timeout`` unblocks it) if it does not return in 5 s."""
    out: list[t.Any] = []
    worker = threading.Thread(target=lambda: out.append(call()), daemon=True)
    worker.start()
    worker.join(5)
    if worker.is_alive():
        on_timeout()
        worker.join(5)
        raise AssertionError("the call blocked")
    assert out, "the call raised"
    return out[0]


def ask(task: TaskContext) -> None:
    """Pause on the first message; on a resume, answer with every message seen so far."""
    if len(task.history) == 1:
        task.require_input("more?")
        return
    texts = [p.text for m in task.history for p in m.parts if p.text is not None]
    task.artifact([Part(text="|".join(texts))], name="seen")
    task.complete("done")


class HeldRunner(WrappedRunner):
    """Wraps a runner: runs it starts wait until the test lets them go (no race on 'started')."""

    def __init__(self, inner: t.Any) -> None:
        super().__init__(inner)
        self.held: list[t.Callable[[], None]] = []

    def start(self, fn: t.Callable[[], None]) -> t.Any:
        self.held.append(fn)
        return self

    def kill(self, exc: type[BaseException]) -> None:
        """Nothing to kill before the run starts."""

    def release(self) -> None:
        held, self.held = self.held, []
        for fn in held:
            self.inner.start(fn)


def skills(gate: Gate | None = None, **handlers: t.Callable[[TaskContext], None]) -> list[Skill]:
    handlers.setdefault("echo", echo)
    handlers.setdefault("ask", ask)
    if gate is not None:
        handlers["gate"] = gate.handler
    return [Skill(id=k, name=k, description=k, handler=v) for k, v in handlers.items()]


def state(task: dict[str, t.Any]) -> str:
    return t.cast(str, task["status"]["state"])


def send_params(text: str, skill: str, **message: t.Any) -> dict[str, t.Any]:
    return {"message": A2ATestClient.message(text, skill=skill, **message)}


def total(client: A2ATestClient, token: str | None = None) -> int:
    return int(client.rpc("ListTasks", {}, token=token).result["totalSize"])


@pytest.fixture
def app(make_app: t.Callable[..., Flask], gate: Gate) -> Flask:
    return make_app(skills=skills(gate))


@pytest.fixture
def client(app: Flask) -> A2ATestClient:
    return A2ATestClient(app, token="alice")


def paused_task(client: A2ATestClient) -> dict[str, t.Any]:
    task = client.send("first", skill="ask")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED"
    return t.cast(dict[str, t.Any], task)


# ----------------------------------------------------------------------------- SendMessage


def test_send_blocks_until_terminal(app: Flask, gate: Gate) -> None:
    answers: list[t.Any] = []
    sent = threading.Event()

    def send() -> None:
        answers.append(A2ATestClient(app, token="alice").send("x", skill="gate"))
        sent.set()

    sender = threading.Thread(target=send)
    sender.start()
    assert gate.entered.wait(5)
    assert not sent.is_set()  # the handler is still running: no answer yet
    gate.release.set()
    assert sent.wait(5)
    sender.join(5)
    task = answers[0]["task"]
    assert state(task) == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "done"}]


def test_send_returns_at_an_interrupted_state(client: A2ATestClient) -> None:
    task = paused_task(client)
    assert task["status"]["message"]["parts"] == [{"text": "more?"}]


def test_return_immediately_answers_submitted_and_the_run_continues(
    client: A2ATestClient, gate: Gate
) -> None:
    task = bounded(
        lambda: client.send("x", skill="gate", configuration={"returnImmediately": True}),
        gate.release.set,
    )["task"]
    assert state(task) == "TASK_STATE_SUBMITTED"
    assert gate.entered.wait(5)
    assert state(client.rpc("GetTask", {"id": task["id"]}).result) == "TASK_STATE_WORKING"
    gate.release.set()
    assert wait_for(
        lambda: state(client.rpc("GetTask", {"id": task["id"]}).result) == "TASK_STATE_COMPLETED"
    )
    done = client.rpc("GetTask", {"id": task["id"]}).result
    assert done["artifacts"][0]["name"] == "gate"


def test_history_length_on_send(client: A2ATestClient) -> None:
    first = paused_task(client)
    resume = send_params("second", "ask", task_id=first["id"])
    full = client.rpc("SendMessage", resume).result["task"]
    assert [m["role"] for m in full["history"]] == [
        "ROLE_USER",
        "ROLE_AGENT",
        "ROLE_USER",
        "ROLE_AGENT",
    ]

    other = paused_task(client)
    none = client.rpc(
        "SendMessage",
        {**send_params("2", "ask", task_id=other["id"]), "configuration": {"historyLength": 0}},
    ).result["task"]
    assert "history" not in none
    assert state(none) == "TASK_STATE_COMPLETED"
    stored = client.rpc("GetTask", {"id": other["id"]}).result
    one = client.send("x", skill="echo", configuration={"historyLength": 1})["task"]
    assert len(one["history"]) == 1
    assert len(stored["history"]) == 4


def test_negative_history_length_on_send_is_refused_before_writing(
    client: A2ATestClient,
) -> None:
    before = total(client)
    params = {**send_params("x", "echo"), "configuration": {"historyLength": -1}}
    response = client.rpc("SendMessage", params)
    assert response.code == -32602
    assert total(client) == before


# ----------------------------------------------------------------------------- GetTask


def test_get_task_history_length(client: A2ATestClient) -> None:
    first = paused_task(client)
    resumed = client.rpc("SendMessage", send_params("second", "ask", task_id=first["id"])).result
    assert state(resumed["task"]) == "TASK_STATE_COMPLETED"
    full = client.rpc("GetTask", {"id": first["id"]}).result["history"]
    assert len(full) == 4
    assert "history" not in client.rpc("GetTask", {"id": first["id"], "historyLength": 0}).result
    newest = client.rpc("GetTask", {"id": first["id"], "historyLength": 2}).result["history"]
    assert newest == full[-2:]
    assert client.rpc("GetTask", {"id": first["id"], "historyLength": 99}).result["history"] == full
    assert client.rpc("GetTask", {"id": first["id"], "historyLength": -1}).code == -32602


def test_get_task_unknown_is_not_found(client: A2ATestClient) -> None:
    assert client.rpc("GetTask", {"id": "no-such-task"}).code == -32001


# ----------------------------------------------------------------------------- ListTasks


def make_tasks(client: A2ATestClient, n: int) -> list[dict[str, t.Any]]:
    """``n`` completed echo tasks with distinct status timestamps, oldest first."""
    out = []
    for i in range(n):
        out.append(client.send(f"t{i}", skill="echo")["task"])
        next_millisecond()
    return out


def test_list_pages_walk_every_task_once_newest_first(client: A2ATestClient) -> None:
    made = make_tasks(client, 7)
    seen: list[str] = []
    token = ""
    sizes = []
    for _ in range(10):  # bounded: 3 pages expected
        params: dict[str, t.Any] = {"pageSize": 3}
        if token:
            params["pageToken"] = token
        page = client.rpc("ListTasks", params).result
        assert set(page) >= {"tasks", "nextPageToken", "pageSize", "totalSize"}
        assert page["totalSize"] == 7
        assert page["pageSize"] == len(page["tasks"])
        sizes.append(page["pageSize"])
        seen.extend(task["id"] for task in page["tasks"])
        token = page["nextPageToken"]
        if token == "":
            break
    assert sizes == [3, 3, 1]
    assert seen == [task["id"] for task in reversed(made)]  # newest first, no gap, no repeat


def test_list_default_page_size_is_50(client: A2ATestClient) -> None:
    for i in range(51):
        client.send(f"t{i}", skill="echo")
    page = client.rpc("ListTasks", {}).result
    assert page["pageSize"] == 50 and len(page["tasks"]) == 50
    assert page["totalSize"] == 51
    assert page["nextPageToken"] != ""
    rest = client.rpc("ListTasks", {"pageToken": page["nextPageToken"]}).result
    assert rest["pageSize"] == 1 and rest["nextPageToken"] == ""
    assert {t_["id"] for t_ in rest["tasks"]}.isdisjoint(t_["id"] for t_ in page["tasks"])


def test_list_last_page_token_is_empty_string(client: A2ATestClient) -> None:
    page = client.rpc("ListTasks", {}).result
    assert page == {"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0}
    client.send("x", skill="echo")
    page = client.rpc("ListTasks", {"pageSize": 1}).result
    assert page["nextPageToken"] == "" and page["pageSize"] == 1


@pytest.mark.parametrize("size", [0, 101, -1])
def test_list_page_size_out_of_range(client: A2ATestClient, size: int) -> None:
    assert client.rpc("ListTasks", {"pageSize": size}).code == -32602


@pytest.mark.parametrize("size", [1, 100])
def test_list_page_size_bounds_are_accepted(client: A2ATestClient, size: int) -> None:
    make_tasks(client, 2)
    page = client.rpc("ListTasks", {"pageSize": size}).result
    assert page["pageSize"] == min(size, 2)


@pytest.mark.parametrize(
    "token",
    [
        "not-a-token",
        "e30",  # base64 of {}
        "WzEsMl0",  # base64 of [1,2]
        "WyJ4IiwieSJd",  # base64 of ["x","y"]
        base64.urlsafe_b64encode(b"[" * 100_000).decode(),  # nesting JSON cannot parse
        base64.urlsafe_b64encode(b'["2026-01-02T03:04:05Z"]').decode(),  # one item short
        "é",
    ],
    ids=["text", "object", "numbers", "not-a-timestamp", "deep", "short", "non-ascii"],
)
def test_list_forged_page_token_is_invalid_params(client: A2ATestClient, token: str) -> None:
    client.send("x", skill="echo")
    response = client.rpc("ListTasks", {"pageToken": token})
    assert response.code == -32602


def test_list_filters_by_context(client: A2ATestClient) -> None:
    in_ctx = [
        client.rpc("SendMessage", send_params(f"c{i}", "echo", context_id="ctx-a")).result["task"]
        for i in range(2)
    ]
    client.send("other", skill="echo")
    page = client.rpc("ListTasks", {"contextId": "ctx-a"}).result
    assert page["totalSize"] == 2
    assert {task["id"] for task in page["tasks"]} == {task["id"] for task in in_ctx}
    assert all(task["contextId"] == "ctx-a" for task in page["tasks"])


def test_list_filters_by_status(client: A2ATestClient) -> None:
    done = client.send("x", skill="echo")["task"]
    rejected = client.send("x", skill="nope")["task"]
    paused = paused_task(client)
    assert state(rejected) == "TASK_STATE_REJECTED"
    page = client.rpc("ListTasks", {"status": "TASK_STATE_COMPLETED"}).result
    assert [task["id"] for task in page["tasks"]] == [done["id"]] and page["totalSize"] == 1
    page = client.rpc("ListTasks", {"status": "TASK_STATE_INPUT_REQUIRED"}).result
    assert [task["id"] for task in page["tasks"]] == [paused["id"]]
    unfiltered = client.rpc("ListTasks", {"status": "TASK_STATE_UNSPECIFIED"}).result
    assert unfiltered["totalSize"] == 3
    assert client.rpc("ListTasks", {"status": "TASK_STATE_BOGUS"}).code == -32602


def test_list_status_timestamp_after_is_inclusive(client: A2ATestClient) -> None:
    made = make_tasks(client, 4)
    stamp = made[1]["status"]["timestamp"]
    page = client.rpc("ListTasks", {"statusTimestampAfter": stamp}).result
    assert [task["id"] for task in page["tasks"]] == [task["id"] for task in reversed(made[1:])]
    assert page["totalSize"] == 3
    for bad in ("yesterday", "2026-01-02 03:04:05", "2026-01-02T03:04:05", 12):
        assert client.rpc("ListTasks", {"statusTimestampAfter": bad}).code == -32602


def test_list_orders_by_status_timestamp_not_creation(client: A2ATestClient) -> None:
    paused = paused_task(client)
    next_millisecond()
    later = client.send("x", skill="echo")["task"]
    next_millisecond()
    again = client.rpc("SendMessage", send_params("again", "ask", task_id=paused["id"])).result
    assert state(again["task"]) == "TASK_STATE_COMPLETED"
    ids = [task["id"] for task in client.rpc("ListTasks", {}).result["tasks"]]
    assert ids == [paused["id"], later["id"]]


def test_list_include_artifacts_and_history_length(client: A2ATestClient) -> None:
    client.send("x", skill="echo")
    plain = client.rpc("ListTasks", {}).result["tasks"][0]
    assert "artifacts" not in plain
    off = client.rpc("ListTasks", {"includeArtifacts": False}).result["tasks"][0]
    assert "artifacts" not in off
    on = client.rpc("ListTasks", {"includeArtifacts": True}).result["tasks"][0]
    assert on["artifacts"][0]["parts"] == [{"text": "x"}]
    assert "history" in plain
    assert "history" not in client.rpc("ListTasks", {"historyLength": 0}).result["tasks"][0]
    assert client.rpc("ListTasks", {"historyLength": -2}).code == -32602


# ----------------------------------------------------------------------------- CancelTask


def test_cancel_running_task_cuts_the_handler_and_stays_canceled(
    make_app: t.Callable[..., Flask], runner_kind: str
) -> None:
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()
    outcome: list[str] = []

    def late(task: TaskContext) -> None:
        try:
            task.working()
            entered.set()
            release.wait(10)
            for attempt in (
                lambda: task.artifact([Part(text="late")], name="late"),
                task.complete,
            ):
                try:
                    attempt()
                    outcome.append("written")
                except TaskCanceled:
                    outcome.append("refused")
        finally:
            finished.set()

    app = make_app(skills=skills(late=late))
    client = A2ATestClient(app, token="alice")
    task = client.send(skill="late", configuration={"returnImmediately": True})["task"]
    assert entered.wait(5)
    canceled = client.rpc("CancelTask", {"id": task["id"]}).result
    assert state(canceled) == "TASK_STATE_CANCELED"
    release.set()
    assert finished.wait(5)
    if runner_kind == "threads":
        assert outcome == ["refused", "refused"]
    else:
        assert outcome == []  # gevent kills the greenlet inside its wait
    after = client.rpc("GetTask", {"id": task["id"]}).result
    assert state(after) == "TASK_STATE_CANCELED"
    assert "artifacts" not in after
    assert client.rpc("CancelTask", {"id": task["id"]}).code == -32002


def test_cancel_before_the_handler_starts_means_it_never_runs(
    make_app: t.Callable[..., Flask], make_runner: t.Callable[..., t.Any]
) -> None:
    calls: list[str] = []
    runner = HeldRunner(make_runner(4))
    app = make_app(skills=skills(count=lambda task: calls.append(task.id)), runner=runner)
    client = A2ATestClient(app, token="alice")
    task = client.send(skill="count", configuration={"returnImmediately": True})["task"]
    assert runner.held, "the run is waiting to start"
    canceled = client.rpc("CancelTask", {"id": task["id"]}).result
    assert state(canceled) == "TASK_STATE_CANCELED"
    runner.release()
    exchange = app.extensions["a2a"].exchange
    assert wait_for(lambda: exchange.runs.get(task["id"]) is None)
    assert calls == []
    assert state(client.rpc("GetTask", {"id": task["id"]}).result) == "TASK_STATE_CANCELED"
    assert exchange.slots.held("alice") == 0


def test_cancel_paused_task(client: A2ATestClient) -> None:
    task = paused_task(client)
    assert state(client.rpc("CancelTask", {"id": task["id"]}).result) == "TASK_STATE_CANCELED"


def test_cancel_terminal_task_is_not_cancelable(client: A2ATestClient) -> None:
    task = client.send("x", skill="echo")["task"]
    for _ in range(2):
        response = client.rpc("CancelTask", {"id": task["id"]})
        assert response.code == -32002
    assert state(client.rpc("GetTask", {"id": task["id"]}).result) == "TASK_STATE_COMPLETED"


def test_cancel_unknown_task(client: A2ATestClient) -> None:
    assert client.rpc("CancelTask", {"id": "missing"}).code == -32001


# ----------------------------------------------------------------------------- follow-ups


def test_message_to_unknown_or_foreign_task_is_not_found(client: A2ATestClient) -> None:
    before = total(client)
    unknown = client.rpc("SendMessage", send_params("x", "echo", task_id="missing"))
    assert unknown.code == -32001
    bobs = client.send("x", skill="ask", token="bob")["task"]
    foreign = client.rpc("SendMessage", send_params("x", "ask", task_id=bobs["id"]))
    assert foreign.code == -32001
    assert total(client) == before
    assert client.rpc("GetTask", {"id": bobs["id"]}, token="bob").result == bobs


def test_message_to_terminal_task_is_unsupported(client: A2ATestClient) -> None:
    done = client.send("x", skill="echo")["task"]
    response = client.rpc("SendMessage", send_params("again", "echo", task_id=done["id"]))
    assert response.code == -32004
    assert client.rpc("GetTask", {"id": done["id"]}).result == done


def test_message_with_contradicting_context_is_invalid(client: A2ATestClient) -> None:
    paused = paused_task(client)
    params = send_params("x", "ask", task_id=paused["id"], context_id="another-context")
    assert client.rpc("SendMessage", params).code == -32602
    assert client.rpc("GetTask", {"id": paused["id"]}).result == paused
    same = send_params("x", "ask", task_id=paused["id"], context_id=paused["contextId"])
    assert state(client.rpc("SendMessage", same).result["task"]) == "TASK_STATE_COMPLETED"


# ----------------------------------------------------------------------------- card and push


def test_extended_card_not_configured(client: A2ATestClient) -> None:
    assert client.rpc("GetExtendedAgentCard", {}).code == -32007


def test_extended_card_hook(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(extended_card=lambda p: {"name": "Extended", "description": p.owner})
    client = A2ATestClient(app, token="alice")
    assert client.rpc("GetExtendedAgentCard", {}).result == {
        "name": "Extended",
        "description": "alice",
    }


PUSH_CALLS = [
    ("CreateTaskPushNotificationConfig", {"taskId": "{id}", "url": "https://127.0.0.1/hook"}),
    ("GetTaskPushNotificationConfig", {"taskId": "{id}", "id": "c1"}),
    ("ListTaskPushNotificationConfigs", {"taskId": "{id}"}),
    ("DeleteTaskPushNotificationConfig", {"taskId": "{id}", "id": "c1"}),
]


@pytest.mark.parametrize(("method", "params"), PUSH_CALLS)
def test_push_config_methods_without_push(
    make_app: t.Callable[..., Flask], method: str, params: dict[str, str]
) -> None:
    app = make_app(config={"A2A_DISABLE_PUSH_NOTIFICATIONS": True})
    client = A2ATestClient(app, token="alice")
    card = app.test_client().get("/.well-known/agent-card.json").get_json()
    assert card["capabilities"]["pushNotifications"] is False
    task = client.send("x", skill="echo")["task"]
    filled = {k: v.replace("{id}", task["id"]) for k, v in params.items()}
    assert client.rpc(method, filled).code == -32003
