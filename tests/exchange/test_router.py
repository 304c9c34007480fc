"""Skill routing: by name only (metadata.skill, then a data part's "skill", then the only skill).

A name that matches nothing never falls back; an unnamed message to a multi-skill agent is
rejected. A rejection names the skill asked for and no other, is stored like any task, and takes
no run slot.
"""

from __future__ import annotations

import time
import typing as t

import pytest
from flask import Flask

from flask_a2a import Part, Skill, TaskContext
from flask_a2a.exchange.router import named_skill, route
from flask_a2a.protocol.model import Message, Role
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate

SKILL_IDS = ("invoices.list", "weather.now")


class Calls:
    """Skills that record which one ran."""

    def __init__(self, ids: t.Sequence[str] = SKILL_IDS) -> None:
        self.ran: list[str] = []
        self.skills = [
            Skill(id=i, name=i, description=f"The {i} skill.", handler=self._handler(i))
            for i in ids
        ]

    def _handler(self, skill_id: str) -> t.Callable[[TaskContext], None]:
        def handler(task: TaskContext) -> None:
            self.ran.append(skill_id)
            task.artifact([Part(text=skill_id)], name="ran")

        return handler

    @property
    def table(self) -> dict[str, Skill]:
        return {s.id: s for s in self.skills}


def message(*parts: Part, metadata: dict[str, t.Any] | None = None) -> Message:
    return Message("m-1", Role.USER, parts or (Part(text="hi"),), metadata=metadata)


# --------------------------------------------------------------------------- route() itself


def test_metadata_skill_wins_over_a_data_part() -> None:
    calls = Calls()
    msg = message(Part(data={"skill": "weather.now"}), metadata={"skill": "invoices.list"})
    assert named_skill(msg) == "invoices.list"
    assert route(msg, calls.table).skill is calls.table["invoices.list"]


def test_the_first_data_part_carrying_skill_is_used() -> None:
    calls = Calls()
    msg = message(
        Part(text="use weather.now please"),
        Part(data={"operation": "list"}),
        Part(data=["skill", "weather.now"]),
        Part(data={"skill": "invoices.list"}),
        Part(data={"skill": "weather.now"}),
        metadata={"trace": "x"},
    )
    assert route(msg, calls.table).skill is calls.table["invoices.list"]


def test_null_names_nothing_and_the_next_place_is_read() -> None:
    calls = Calls()
    msg = message(
        Part(data={"skill": None}), Part(data={"skill": "weather.now"}), metadata={"skill": None}
    )
    assert route(msg, calls.table).skill is calls.table["weather.now"]
    only = Calls(["solo"])
    assert route(message(metadata={"skill": None}), only.table).skill is only.table["solo"]


def test_the_only_skill_is_used_when_none_is_named() -> None:
    calls = Calls(["solo"])
    routed = route(message(Part(text="do the thing")), calls.table)
    assert routed.skill is calls.table["solo"] and routed.refusal == ""


@pytest.mark.parametrize("ids", [["solo"], list(SKILL_IDS)])
@pytest.mark.parametrize(
    "msg",
    [
        message(metadata={"skill": "purge"}),
        message(Part(data={"skill": "purge"})),
        message(Part(data={"skill": "purge"}), Part(data={"skill": "solo"})),
    ],
)
def test_a_named_skill_that_does_not_exist_never_falls_back(ids: list[str], msg: Message) -> None:
    routed = route(msg, Calls(ids).table)
    assert routed.skill is None
    assert '"purge"' in routed.refusal
    assert not any(i in routed.refusal for i in ids)


def test_the_asked_name_is_quoted_and_bounded() -> None:
    routed = route(message(metadata={"skill": 'x"\n' + "y" * 5000}), Calls().table)
    assert routed.skill is None
    assert "\n" not in routed.refusal and '\\"' in routed.refusal
    assert len(routed.refusal) < 200


@pytest.mark.parametrize(
    "msg",
    [
        message(Part(text="please list my invoices")),
        message(Part(data={"operation": "list"})),
        message(metadata={"intent": "invoices.list"}),
    ],
)
def test_unnamed_with_several_skills_is_rejected_listing_no_skill(msg: Message) -> None:
    routed = route(msg, Calls().table)
    assert routed.skill is None and routed.refusal
    assert not any(i in routed.refusal for i in SKILL_IDS)


# --------------------------------------------------------------------------- over the wire


def client_for(make_app: t.Callable[..., Flask], calls: Calls, **config: t.Any) -> A2ATestClient:
    return A2ATestClient(make_app(skills=calls.skills, config=config), token="alice")


def refusal_text(task: dict[str, t.Any]) -> str:
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    message = task["status"]["message"]
    assert message["role"] == "ROLE_AGENT"
    return "\n".join(p["text"] for p in message["parts"])


def test_prose_to_a_multi_skill_agent_is_rejected(make_app: t.Callable[..., Flask]) -> None:
    calls = Calls()
    client = client_for(make_app, calls)
    task = client.send("please list my invoices")["task"]
    text = refusal_text(task)
    assert not any(i in text for i in SKILL_IDS)
    assert calls.ran == []
    stored = client.rpc("GetTask", {"id": task["id"]}).result
    assert stored["status"]["state"] == "TASK_STATE_REJECTED"
    assert [m["role"] for m in stored["history"]] == ["ROLE_USER", "ROLE_AGENT"]
    assert "artifacts" not in stored


def test_named_skills_run_by_metadata_or_data_part(make_app: t.Callable[..., Flask]) -> None:
    calls = Calls()
    client = client_for(make_app, calls)
    by_meta = client.send("hi", skill="weather.now", data={"skill": "invoices.list"})["task"]
    by_data = client.send("hi", data={"skill": "invoices.list", "operation": "list"})["task"]
    assert by_meta["artifacts"][0]["parts"] == [{"text": "weather.now"}]
    assert by_data["artifacts"][0]["parts"] == [{"text": "invoices.list"}]
    assert calls.ran == ["weather.now", "invoices.list"]


def test_unknown_skill_with_one_registered_is_rejected_and_stored(
    make_app: t.Callable[..., Flask],
) -> None:
    calls = Calls(["solo"])
    client = client_for(make_app, calls)
    task = client.send("hi", skill="entity.invoices")["task"]
    text = refusal_text(task)
    assert '"entity.invoices"' in text and "solo" not in text
    assert calls.ran == []
    assert client.rpc("GetTask", {"id": task["id"]}).result["id"] == task["id"]
    listed = client.rpc("ListTasks", {}).result
    assert [t["id"] for t in listed["tasks"]] == [task["id"]]


def test_a_rejection_takes_no_run_slot(make_app: t.Callable[..., Flask]) -> None:
    gate = Gate()
    skills = [
        Skill(id="gate", name="Gate", description="Blocks.", handler=gate.handler),
        Skill(id="other", name="Other", description="Unused.", handler=gate.handler),
    ]
    app = make_app(skills=skills, config={"A2A_MAX_CONCURRENT_RUNS_PER_OWNER": 1})
    client = A2ATestClient(app, token="alice")
    exchange = app.extensions["a2a"].exchange
    held = client.send("hold", skill="gate", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(5)
    assert exchange.slots.held("alice") == 1
    try:
        # The owner's only slot is taken: a run would be refused with -32004 and nothing
        # written; a rejection is answered, stored, and leaves the slot count alone.
        busy = client.rpc("SendMessage", {"message": client.message("x", skill="gate")})
        assert busy.code == -32004
        rejected = [client.send("x", skill="nope")["task"], client.send("list my invoices")["task"]]
        for task in rejected:
            refusal_text(task)
            assert client.rpc("GetTask", {"id": task["id"]}).result["status"]["state"] == (
                "TASK_STATE_REJECTED"
            )
        assert exchange.slots.held("alice") == 1
        assert gate.calls == 1
    finally:
        gate.release.set()
    deadline = time.monotonic() + 5
    while exchange.slots.held("alice") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert exchange.slots.held("alice") == 0
    ids = {t["id"] for t in client.rpc("ListTasks", {}).result["tasks"]}
    assert ids == {held["id"]} | {t["id"] for t in rejected}


# ------------------------------------------------- a metadata.skill that is not a name (issue 14)

NOT_NAMES = pytest.mark.parametrize(
    "value", ["", None, 5, {}, [], True], ids=["empty", "null", "number", "object", "list", "bool"]
)


def send_with_metadata_skill(
    client: A2ATestClient, value: t.Any, data: t.Any = None
) -> dict[str, t.Any]:
    message = client.message("hi", data=data)
    message["metadata"] = {"skill": value}
    return t.cast(dict[str, t.Any], client.rpc("SendMessage", {"message": message}).result["task"])


@NOT_NAMES
def test_a_non_name_in_metadata_falls_to_the_only_skill(
    make_app: t.Callable[..., Flask], value: t.Any
) -> None:
    calls = Calls(["solo"])
    task = send_with_metadata_skill(client_for(make_app, calls), value)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert calls.ran == ["solo"]


@NOT_NAMES
def test_a_non_name_in_metadata_falls_to_the_data_part(
    make_app: t.Callable[..., Flask], value: t.Any
) -> None:
    calls = Calls()
    task = send_with_metadata_skill(client_for(make_app, calls), value, {"skill": "weather.now"})
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert calls.ran == ["weather.now"]


@NOT_NAMES
def test_a_non_name_with_several_skills_is_unnamed(
    make_app: t.Callable[..., Flask], value: t.Any
) -> None:
    calls = Calls()
    task = send_with_metadata_skill(client_for(make_app, calls), value)
    assert refusal_text(task).startswith("no skill named: send the skill id")
    assert calls.ran == []


def test_a_non_name_in_a_data_part_is_skipped(make_app: t.Callable[..., Flask]) -> None:
    calls = Calls()
    client = client_for(make_app, calls)
    message = client.message("hi")
    message["parts"] = [
        {"data": {"skill": ""}},
        {"data": {"skill": 7}},
        {"data": {"skill": "invoices.list"}},
    ]
    task = client.rpc("SendMessage", {"message": message}).result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert calls.ran == ["invoices.list"]


def test_an_unknown_name_has_its_format_characters_escaped(
    make_app: t.Callable[..., Flask],
) -> None:
    client = client_for(make_app, Calls())
    task = client.send("hi", skill="x\u202egpj.exe\x9b\u2066")["task"]
    assert refusal_text(task) == 'unknown skill "x\\u202egpj.exe\\x9b\\u2066"'
