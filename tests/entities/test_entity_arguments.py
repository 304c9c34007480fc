"""Entities over hand-written routes: ``arguments=`` declares what each route really takes.

The description, the card, the tool listing and the argument check follow the declaration; an
operation left undeclared keeps the keys derived from the schema (the generated CRUD blueprint's).
"""

from __future__ import annotations

import typing as t

import pytest
from flask import Flask, request

from examples.invoices import InvoiceSchema
from flask_a2a import A2A, ConfigError, Entity
from flask_a2a.testing import A2ATestClient
from tests.conftest import token_principal

ROWS = [{"id": str(n), "due_at": f"2026-01-0{n}", "total": f"{n}.00"} for n in range(1, 6)]


class HandWritten:
    """An app's own invoice routes: ``list`` reads only ``page`` (two rows a page)."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.client = A2ATestClient(app, token="alice")
        #: (method, path, query, JSON body) of every request that reached the routes.
        self.seen: list[tuple[str, str, dict[str, str], t.Any]] = []
        app.before_request(self.note)
        app.add_url_rule("/api/invoices", "list_invoices", self.list_invoices)
        app.add_url_rule("/api/invoices/<invoice_id>", "get_invoice", self.get_invoice)
        app.add_url_rule("/api/invoices", "create_invoice", self.create_invoice, methods=["POST"])

    def note(self) -> t.Any:
        if request.path.startswith("/api/"):
            if token_principal() is None:
                return {"error": "who are you?"}, 401
            body = request.get_json(silent=True)
            self.seen.append((request.method, request.path, request.args.to_dict(), body))
        return None

    def list_invoices(self) -> t.Any:
        page = int(request.args.get("page", 1))  # ignores limit, sort and any filter
        return {"data": ROWS[(page - 1) * 2 : page * 2], "page": page}

    def get_invoice(self, invoice_id: str) -> t.Any:
        return next((r for r in ROWS if r["id"] == invoice_id), None) or ({}, 404)

    def create_invoice(self) -> t.Any:
        body = request.get_json()
        return {"id": "9", "due_at": "2026-12-31", "total": body["total"]}, 201  # sets due_at

    def call(self, operation: str, arguments: t.Any = None) -> dict[str, t.Any]:
        data: dict[str, t.Any] = {"skill": "entity.invoices", "operation": operation}
        if arguments is not None:
            data["arguments"] = arguments
        return t.cast(dict[str, t.Any], self.client.send(data=data)["task"])


@pytest.fixture
def hand_written(make_app: t.Callable[..., Flask]) -> HandWritten:
    entity = Entity(
        "invoices",
        schema=InvoiceSchema,
        operations=("list", "get", "create"),
        arguments={"list": ["page"], "create": ["total"]},
    )
    return HandWritten(make_app(entities=[entity]))


def text(task: dict[str, t.Any]) -> str:
    return t.cast(str, task["status"]["message"]["parts"][0]["text"])


def test_description_card_and_tools_list_only_the_declared_keys(
    hand_written: HandWritten,
) -> None:
    expected = (
        "CRUD on invoices records through the app's tools. Send one data part carrying skill, "
        "operation, and arguments:\n"
        "list(page)\n"
        "get(id)\n"
        "create(total)"
    )
    [skill] = [s for s in A2A().skills(hand_written.app) if s.id == "entity.invoices"]
    assert skill.description == expected
    card = hand_written.client.client.get("/.well-known/agent-card.json").get_json()
    [entry] = [s for s in card["skills"] if s["id"] == "entity.invoices"]
    assert entry["description"] == expected
    # The card's example call uses only what list takes (no limit).
    assert entry["examples"] == ['{"skill": "entity.invoices", "operation": "list"}']
    tools = {tool["name"]: tool["inputSchema"] for tool in A2A().tools(hand_written.app)}
    assert tools["invoices.list"] == {
        "type": "object",
        "properties": {"page": {"type": "integer", "minimum": 1}},
        "additionalProperties": False,
    }
    assert tools["invoices.create"] == {
        "type": "object",
        "properties": {"total": {"type": "string", "format": "decimal"}},
        "additionalProperties": False,
        "required": ["total"],
    }
    assert tools["invoices.get"]["required"] == ["id"]  # undeclared: derived as before


def test_an_undeclared_argument_is_refused_before_any_request(
    hand_written: HandWritten,
) -> None:
    for arguments, refused in (
        ({"limit": 10}, "limit: Unknown field."),
        ({"page": 1, "sort": "total"}, "sort: Unknown field."),
        ({"total": "1.00"}, "total: Unknown field."),
    ):
        task = hand_written.call("list", arguments)
        assert task["status"]["state"] == "TASK_STATE_FAILED", arguments
        assert text(task) == f"invalid arguments: {refused}"
    made = hand_written.call("create", {"due_at": "2026-01-01", "total": "1.00"})
    assert text(made) == "invalid arguments: due_at: Unknown field."
    assert hand_written.seen == []


def test_the_declared_arguments_reach_the_route(hand_written: HandWritten) -> None:
    listed = hand_written.call("list", {"page": 2})
    assert listed["status"]["state"] == "TASK_STATE_COMPLETED"
    assert listed["artifacts"][0]["parts"][0]["data"] == {"data": ROWS[2:4], "page": 2}
    bad_page = hand_written.call("list", {"page": 0})
    assert text(bad_page) == "invalid arguments: page: Must be an integer of at least 1."
    # create takes total alone: the schema's required due_at is the route's to fill in.
    made = hand_written.call("create", {"total": "4.50"})
    assert made["status"]["state"] == "TASK_STATE_COMPLETED"
    assert made["artifacts"][0]["parts"][0]["data"]["due_at"] == "2026-12-31"
    no_total = hand_written.call("create", {})
    assert text(no_total) == "invalid arguments: total: Missing data for required field."
    assert hand_written.seen == [
        ("GET", "/api/invoices", {"page": "2"}, None),
        ("POST", "/api/invoices", {}, {"total": "4.50"}),
    ]


def test_declared_filters_and_update_keys(make_app: t.Callable[..., Flask]) -> None:
    entity = Entity(
        "invoices",
        schema=InvoiceSchema(),
        operations=("list", "update", "delete"),
        arguments={"list": ("total", "page"), "update": ("total",), "delete": ()},
    )
    app = make_app(entities=[entity])
    tools = {tool["name"]: tool["inputSchema"] for tool in A2A().tools(app)}
    assert list(tools["invoices.list"]["properties"]) == ["total", "page"]  # declared order
    assert list(tools["invoices.update"]["properties"]) == ["id", "total"]  # the id is the path
    assert tools["invoices.update"]["required"] == ["id"]
    assert tools["invoices.delete"]["properties"] == {"id": {"type": "string"}}
    [skill] = [s for s in A2A().skills(app) if s.id == "entity.invoices"]
    assert skill.description.split("\n")[1:] == [
        "list(total, page)",
        "update(id, total)",
        "delete(id)",
    ]
    assert skill.examples == ('{"skill": "entity.invoices", "operation": "list"}',)
    client = A2ATestClient(app, token="alice")
    task = client.send(
        data={
            "skill": "entity.invoices",
            "operation": "update",
            "arguments": {"id": "1", "due_at": "2026-01-01"},
        }
    )["task"]
    assert task["status"]["message"]["parts"] == [
        {"text": "invalid arguments: due_at: Unknown field."}
    ]


def test_a_partial_declaration_keeps_the_derived_keys_elsewhere(
    make_app: t.Callable[..., Flask],
) -> None:
    app = make_app(entities=[Entity("invoices", schema=InvoiceSchema, arguments={"get": ["id"]})])
    [skill] = [s for s in A2A().skills(app) if s.id == "entity.invoices"]
    assert skill.description.split("\n")[1:] == [
        "list(page, limit, sort, due_at, total)",
        "get(id)",
        "create(due_at, total)",
        "update(id, due_at, total)",
        "delete(id)",
    ]
    assert skill.examples == (
        '{"skill": "entity.invoices", "operation": "list", "arguments": {"limit": 10}}',
    )


def test_declarations_are_checked_at_startup() -> None:
    with pytest.raises(ConfigError, match="operations"):
        Entity("invoices", schema=InvoiceSchema, operations=("list",), arguments={"get": ["id"]})
    with pytest.raises(ConfigError, match="sequence of key names"):
        Entity("invoices", schema=InvoiceSchema, arguments={"list": "page"})
    with pytest.raises(ConfigError, match="repeats"):
        Entity("invoices", schema=InvoiceSchema, arguments={"list": ["page", "page"]})
    for arguments, named in (
        ({"list": ["page", "owner_id"]}, "['owner_id'], which the list operation cannot take"),
        ({"create": ["id", "total"]}, "['id'], which the create operation cannot take"),
    ):
        with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("]", r"\]")):
            A2A(
                Flask("bad"),
                principal=token_principal,
                entities=[Entity("invoices", schema=InvoiceSchema, arguments=arguments)],
            )
