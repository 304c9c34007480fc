"""Flask habits that used to fail quietly: integer user ids, handlers that return their result,
``task.artifact`` given a dict."""

from __future__ import annotations

import logging
import typing as t

import pytest
from flask import Flask, request

from flask_a2a import Part, Principal, Skill, TaskContext
from flask_a2a.testing import A2ATestClient
from tests.conftest import wait_for

# ------------------------------------------------------------------ integer owners

#: Bearer token -> what the host's principal hook returns for it (a legacy app's user.id).
HOOK_RETURNS: dict[str, t.Any] = {
    "seven": 7,
    "eight": 8,
    "seven-str": "7",
    "float": 7.0,
    "bool": True,
    "object": object(),
}


def user_id_hook() -> t.Any:
    token = request.headers.get("Authorization", "").removeprefix("Bearer ")
    if token == "five-principal":
        return Principal(owner=5, tenant=3)  # type: ignore[arg-type]
    return HOOK_RETURNS.get(token)


def test_int_principal_fields_are_strings() -> None:
    principal = Principal(owner=5, tenant=3)  # type: ignore[arg-type]
    assert (principal.owner, principal.tenant) == ("5", "3")
    for owner in (True, 7.0, object(), ""):
        with pytest.raises(ValueError, match="Principal.owner must be a non-empty str or an int"):
            Principal(owner=owner)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Principal.tenant"):
        Principal(owner="a", tenant=1.5)  # type: ignore[arg-type]


def test_hook_returning_an_int_owns_tasks_as_its_string(
    make_app: t.Callable[..., Flask],
) -> None:
    app = make_app(principal=user_id_hook)
    client = A2ATestClient(app)
    task = client.send("hi", token="seven")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    store = app.extensions["a2a"].exchange.store
    assert store.get_task(task["id"]).owner == "7"
    # The str "7" is the same owner; another int user cannot see the task.
    assert client.rpc("GetTask", {"id": task["id"]}, token="seven-str").result["id"] == task["id"]
    assert client.rpc("GetTask", {"id": task["id"]}, token="eight").code == -32001
    assert client.rpc("CancelTask", {"id": task["id"]}, token="eight").code == -32001
    assert client.rpc("ListTasks", {}, token="eight").result["totalSize"] == 0
    assert client.rpc("ListTasks", {}, token="seven").result["totalSize"] == 1
    five = client.send("hi", token="five-principal")["task"]
    assert store.get_task(five["id"]).owner == "5"


@pytest.mark.parametrize("token,kind", [("float", "float"), ("bool", "bool"), ("object", "object")])
def test_hook_returning_an_unusable_owner_names_the_hook(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture, token: str, kind: str
) -> None:
    app = make_app(principal=user_id_hook)
    client = A2ATestClient(app)
    with caplog.at_level(logging.ERROR, logger="flask_a2a"):
        answer = client.rpc("SendMessage", {"message": client.message("hi")}, token=token)
    assert answer.code == -32603
    assert answer.error["message"] == "Internal error"  # nothing of the host leaks to the caller
    logged = "\n".join(r.getMessage() + str(r.exc_info) for r in caplog.records)
    assert "the principal hook tests.test_flask_habits.user_id_hook returned " + kind in logged
    assert client.rpc("ListTasks", {}, token="seven").result["totalSize"] == 0  # nothing stored


# ------------------------------------------------------------------ returned values


def returning(value: t.Any, before: t.Callable[[TaskContext], object] | None = None) -> Skill:
    def handler(task: TaskContext) -> t.Any:
        if before is not None:
            before(task)
        return value

    return Skill(id="ret", name="Ret", description="Returns a value.", handler=handler)


@pytest.mark.parametrize(
    "value,parts",
    [
        ("twelve", [{"text": "twelve"}]),
        ({"total": 12}, [{"data": {"total": 12}}]),
        ([{"id": 1}, {"id": 2}], [{"data": [{"id": 1}, {"id": 2}]}]),
        (b"\x00\x01", [{"raw": "AAE="}]),
        (Part(text="a part"), [{"text": "a part"}]),
        ([Part(text="one"), Part(data={"two": 2})], [{"text": "one"}, {"data": {"two": 2}}]),
    ],
    ids=["str", "dict", "list", "bytes", "part", "parts"],
)
def test_returned_value_is_the_one_artifact(
    make_app: t.Callable[..., Flask], value: t.Any, parts: list[t.Any]
) -> None:
    client = A2ATestClient(make_app(skills=[returning(value)]), token="alice")
    task = client.send(skill="ret")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert len(task["artifacts"]) == 1
    assert task["artifacts"][0]["parts"] == parts
    assert task["artifacts"][0]["name"] == "ret"


def test_returning_none_adds_nothing(make_app: t.Callable[..., Flask]) -> None:
    client = A2ATestClient(make_app(skills=[returning(None)]), token="alice")
    task = client.send(skill="ret")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and "artifacts" not in task


@pytest.mark.parametrize(
    "value,named",
    [
        (12, "the handler returned int:"),
        (1.5, "the handler returned float:"),
        ([Part(text="a"), "b"], "the handler returned a list mixing Part and other values:"),
        (("a", 200), "the handler returned tuple:"),
    ],
)
def test_returning_something_else_fails_naming_the_type(
    make_app: t.Callable[..., Flask], value: t.Any, named: str
) -> None:
    client = A2ATestClient(make_app(skills=[returning(value)]), token="alice")
    task = client.send(skill="ret")["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    text = task["status"]["message"]["parts"][0]["text"]
    assert text.startswith(named) and "a flask_a2a.Part or a list of Parts" in text
    assert "artifacts" not in task


def test_returned_value_follows_the_artifacts_already_sent(
    make_app: t.Callable[..., Flask],
) -> None:
    skill = returning({"total": 12}, lambda task: task.artifact(Part(text="streamed first")))
    task = A2ATestClient(make_app(skills=[skill]), token="alice").send(skill="ret")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [a["parts"] for a in task["artifacts"]] == [
        [{"text": "streamed first"}],
        [{"data": {"total": 12}}],
    ]


@pytest.mark.parametrize(
    "settle,state",
    [
        (lambda task: task.complete("done"), "TASK_STATE_COMPLETED"),
        (lambda task: task.require_input("which year?"), "TASK_STATE_INPUT_REQUIRED"),
        (lambda task: task.hand_off(), "TASK_STATE_WORKING"),
    ],
)
def test_value_returned_after_settling_is_dropped_with_a_warning(
    make_app: t.Callable[..., Flask],
    caplog: pytest.LogCaptureFixture,
    settle: t.Callable[[TaskContext], None],
    state: str,
) -> None:
    app = make_app(skills=[returning({"total": 12}, settle)])
    client = A2ATestClient(app, token="alice")
    with caplog.at_level(logging.WARNING, logger="flask_a2a"):
        task_id = client.send(skill="ret")["task"]["id"]  # answered once the task settled
        assert wait_for(lambda: not app.extensions["a2a"].exchange.live_runs())
    task = client.rpc("GetTask", {"id": task_id}).result
    assert task["status"]["state"] == state and "artifacts" not in task
    assert any(
        f"skill ret returned a dict after its task became {state}; the value is dropped"
        in r.getMessage()
        for r in caplog.records
    )


def test_returned_data_json_cannot_hold_fails_the_task(make_app: t.Callable[..., Flask]) -> None:
    client = A2ATestClient(make_app(skills=[returning({"x": float("nan")})]), token="alice")
    task = client.send(skill="ret")["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert task["status"]["message"]["parts"][0]["text"].startswith(
        "skill produced data that cannot be sent"
    )


# ------------------------------------------------------------------ task.artifact() arguments


@pytest.mark.parametrize(
    "argument,message",
    [
        (
            {"total": 12},
            (
                "artifact() takes a list of flask_a2a.Part, got dict: "
                "use task.artifact([Part(data={...})])"
            ),
        ),
        (
            "twelve",
            (
                "artifact() takes a list of flask_a2a.Part, got str: "
                "use task.artifact([Part(text=...)])"
            ),
        ),
        (
            12,
            (
                "artifact() takes a list of flask_a2a.Part, got int: "
                "use task.artifact([Part(data=...)])"
            ),
        ),
        (
            [{"total": 12}],
            (
                "artifact() takes a list of flask_a2a.Part, item 0 is a dict: "
                "wrap it as Part(data={...})"
            ),
        ),
    ],
    ids=["dict", "str", "int", "list-of-dict"],
)
def test_artifact_refusal_names_what_it_got_and_the_fix(
    make_app: t.Callable[..., Flask], argument: t.Any, message: str
) -> None:
    def handler(task: TaskContext) -> None:
        task.artifact(argument)

    skill = Skill(id="art", name="Art", description="Artifact.", handler=handler)
    task = A2ATestClient(make_app(skills=[skill]), token="alice").send(skill="art")["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert task["status"]["message"]["parts"] == [{"text": message}]


def test_artifact_takes_a_single_part(make_app: t.Callable[..., Flask]) -> None:
    # A lambda returns what artifact() returns, the artifact's id: that adds no second artifact.
    skill = Skill(
        id="art",
        name="Art",
        description="Artifact.",
        handler=lambda task: task.artifact(Part(data={"total": 12}), name="summary"),
    )
    task = A2ATestClient(make_app(skills=[skill]), token="alice").send(skill="art")["task"]
    assert [a["parts"] for a in task["artifacts"]] == [[{"data": {"total": 12}}]]
