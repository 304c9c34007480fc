"""Entities on the host's marshmallow, whichever major is installed (2, 3 or 4).

Every CI environment runs these on its own pin (CTFd's marshmallow 2.20.2, the floors' 3.0.0,
the newest 4.x): one schema, written with :func:`field_options`, gives the same tool schemas,
the same argument checks and the same records on each.
"""

from __future__ import annotations

import typing as t

import marshmallow
import pytest
from flask import Flask, jsonify, request
from marshmallow import Schema, ValidationError, fields, validate

from flask_a2a import Entity
from flask_a2a.entities import host_schema
from flask_a2a.entities.host_schema import field_options
from flask_a2a.entities.tools import ArgumentError, Tool, build_tools
from flask_a2a.testing import A2ATestClient


class NoteSchema(Schema):
    id = fields.Integer(dump_only=True)
    title = fields.String(required=True, validate=validate.Length(min=1, max=20))
    due_on = fields.Date(allow_none=True, **field_options(data_key="dueOn", description="when"))
    done = fields.Boolean(**field_options(load_default=False))
    secret = fields.String(load_only=True)


def tools() -> dict[str, Tool]:
    return {tool.operation: tool for tool in build_tools(Entity("notes", schema=NoteSchema))}


def refusal(tool: Tool, arguments: dict[str, t.Any]) -> str:
    with pytest.raises(ArgumentError) as caught:
        tool.prepare(arguments)
    return str(caught.value)


def test_the_installed_major_is_the_one_detected() -> None:
    assert host_schema.MARSHMALLOW_2 is (not hasattr(marshmallow, "EXCLUDE"))


def test_fields_in_declaration_order_with_their_keys() -> None:
    schema = NoteSchema()
    loads = host_schema.load_fields(schema)
    dumps = host_schema.dump_fields(schema)
    assert [host_schema.load_key(n, f) for n, f in loads.items()] == [
        "title", "dueOn", "done", "secret"]  # fmt: skip
    assert [host_schema.dump_key(n, f) for n, f in dumps.items()] == [
        "id", "title", "dueOn", "done"]  # fmt: skip
    assert host_schema.description(loads["due_on"]) == "when"
    assert host_schema.description(loads["title"]) is None


def test_load_returns_the_data_and_takes_the_default() -> None:
    loaded = host_schema.load(NoteSchema(), {"title": "milk", "dueOn": "2026-01-02"})
    assert loaded["title"] == "milk" and str(loaded["due_on"]) == "2026-01-02"
    assert loaded["done"] is False


def test_load_refuses_unknown_keys_bad_values_and_missing_fields_together() -> None:
    with pytest.raises(ValidationError) as caught:
        host_schema.load(NoteSchema(), {"title": "", "due_on": "x", "id": 3, "dueOn": "soon"})
    messages = caught.value.messages
    assert isinstance(messages, dict)
    assert messages["due_on"] == messages["id"] == ["Unknown field."]
    assert messages["dueOn"] == ["Not a valid date."]
    assert len(messages["title"]) == 1  # the Length validator's text: the host major's own
    with pytest.raises(ValidationError) as missing:
        host_schema.load(NoteSchema(), {})
    assert missing.value.messages == {"title": ["Missing data for required field."]}


def test_partial_loads_leave_out_what_they_name() -> None:
    assert host_schema.load(NoteSchema(), {"done": True}, partial=True) == {"done": True}
    assert host_schema.load(NoteSchema(), {}, partial=("title",)) == {"done": False}


@pytest.mark.skipif(not host_schema.MARSHMALLOW_2, reason="strict schemas are marshmallow 2's")
def test_a_strict_marshmallow_2_schema_refuses_the_same_way() -> None:
    with pytest.raises(ValidationError) as caught:
        host_schema.load(NoteSchema(strict=True), {"x": 1})  # type: ignore[call-arg]
    assert caught.value.messages == {
        "x": ["Unknown field."],
        "title": ["Missing data for required field."],
    }


def test_dump_is_the_record_itself() -> None:
    note = {"id": 7, "title": "milk", "due_on": None, "done": True, "secret": "s"}
    assert host_schema.dump(NoteSchema(), note) == {
        "id": 7, "title": "milk", "dueOn": None, "done": True}  # fmt: skip
    assert host_schema.dump(NoteSchema(), [note], many=True)[0]["id"] == 7


def test_the_tool_schemas_come_from_the_host_schema() -> None:
    create = tools()["create"].input_schema
    assert create["properties"] == {
        "title": {"type": "string", "minLength": 1, "maxLength": 20},
        "dueOn": {"type": ["string", "null"], "format": "date", "description": "when"},
        "done": {"type": "boolean"},
        "secret": {"type": "string"},
    }
    assert create["required"] == ["title"]
    listing = tools()["list"].input_schema["properties"]
    assert list(listing) == ["page", "limit", "sort", "title", "dueOn", "done"]
    assert listing["sort"]["enum"] == ["id", "-id", "title", "-title", "dueOn", "-dueOn",
                                       "done", "-done"]  # fmt: skip


def test_the_tools_check_arguments_with_the_host_schema() -> None:
    by_op = tools()
    assert refusal(by_op["create"], {"dueOn": "soon"}) == (
        "dueOn: Not a valid date.; title: Missing data for required field."
    )
    assert refusal(by_op["create"], {"title": "a", "due_on": "x"}) == "due_on: Unknown field."
    assert refusal(by_op["update"], {"id": 1, "title": ""}).startswith("title: ")
    assert refusal(by_op["list"], {"dueOn": "soon"}) == "dueOn: Not a valid date."
    call = by_op["update"].prepare({"id": 1, "done": True})
    assert (call.method, call.path, call.body) == ("PATCH", "/api/notes/1", {"done": True})
    listed = by_op["list"].prepare({"dueOn": "2026-01-02", "done": False, "sort": "-dueOn"})
    assert listed.query == [("sort", "-dueOn"), ("dueOn", "2026-01-02"), ("done", "false")]


def test_an_entity_on_the_host_marshmallow_end_to_end(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(entities=[Entity("notes", schema=NoteSchema)])
    created: list[dict[str, t.Any]] = []

    @app.post("/api/notes")
    def create_note() -> t.Any:
        record = host_schema.load(NoteSchema(), request.get_json())
        created.append(record)
        return jsonify(host_schema.dump(NoteSchema(), {"id": len(created), **record})), 201

    client = A2ATestClient(app, token="alice")
    arguments = {"title": "milk", "dueOn": "2026-01-02"}
    data = {"skill": "entity.notes", "operation": "create", "arguments": arguments}
    task = client.send(data=data)["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["data"] == {
        "id": 1, "title": "milk", "dueOn": "2026-01-02", "done": False}  # fmt: skip
    refused = client.send(data={**data, "arguments": {"title": "milk", "dueOn": "soon"}})["task"]
    assert refused["status"]["state"] == "TASK_STATE_FAILED"
    assert refused["status"]["message"]["parts"][0]["text"] == (
        "invalid arguments: dueOn: Not a valid date."
    )
    assert len(created) == 1
