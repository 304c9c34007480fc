"""Entity skills end to end: two users, the generated CRUD blueprint on SQLite, the real wire."""

from __future__ import annotations

import dataclasses
import typing as t

import pytest
import sqlalchemy as sa
from flask import Flask, g, request
from marshmallow import Schema, fields
from sqlalchemy.orm import sessionmaker

from examples.invoices import Base, Invoice, InvoiceSchema
from flask_a2a import A2A, ConfigError, Entity, Principal
from flask_a2a.entities import host_schema
from flask_a2a.entities.crud import crud_blueprint
from flask_a2a.entities.host_schema import field_options
from flask_a2a.testing import A2ATestClient
from tests import stack
from tests.conftest import TOKENS

DESCRIPTION = (
    "CRUD on invoices records through the app's tools. Send one data part carrying skill, "
    "operation, and arguments:\n"
    "list(page, limit, sort, due_at, total)\n"
    "get(id)\n"
    "create(due_at, total)\n"
    "update(id, due_at, total)\n"
    "delete(id)"
)
OPERATIONS = "list, get, create, update, delete"
MISSING: t.Any = object()


#: The app's own cookie sessions (the A2A principal hook and the API both accept them).
SESSIONS = {"s-bob": Principal("bob")}


def caller() -> Principal | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme == "Bearer":
        return TOKENS.get(token)
    return SESSIONS.get(request.cookies.get("session", ""))


class Recorder:
    """WSGI middleware noting every request that reaches the app's API."""

    def __init__(self, wsgi: t.Any) -> None:
        self.wsgi = wsgi
        self.calls: list[dict[str, t.Any]] = []

    def __call__(self, environ: dict[str, t.Any], start_response: t.Any) -> t.Any:
        if environ["PATH_INFO"].startswith("/api/"):
            self.calls.append(dict(environ))
        return self.wsgi(environ, start_response)


@dataclasses.dataclass
class InvoiceApp:
    app: Flask
    #: Any A2A instance reads the app's state (pass ``app``).
    a2a: A2A
    recorder: Recorder
    client: A2ATestClient
    sessions: sessionmaker[sa.orm.Session]

    def call(
        self,
        operation: t.Any = MISSING,
        arguments: t.Any = MISSING,
        *,
        token: str | None = "alice",
        skill: str = "entity.invoices",
        headers: dict[str, str] | None = None,
    ) -> dict[str, t.Any]:
        data: dict[str, t.Any] = {"skill": skill}
        if operation is not MISSING:
            data["operation"] = operation
        if arguments is not MISSING:
            data["arguments"] = arguments
        params = {"message": A2ATestClient.message(data=data)}
        response = self.client.rpc("SendMessage", params, token=token, headers=headers)
        return t.cast(dict[str, t.Any], response.result["task"])

    def rows(self, owner: str | None = None) -> list[Invoice]:
        with self.sessions() as db:
            stmt = sa.select(Invoice).order_by(Invoice.id)
            if owner is not None:
                stmt = stmt.where(Invoice.owner_id == owner)
            return list(db.scalars(stmt))


@pytest.fixture
def make_invoice_app(
    make_app: t.Callable[..., Flask], tmp_path: t.Any
) -> t.Iterator[t.Callable[..., InvoiceApp]]:
    engines: list[sa.Engine] = []

    def build(entities: t.Sequence[Entity] | None = None, **options: t.Any) -> InvoiceApp:
        engine = sa.create_engine(f"sqlite:///{tmp_path / f'app{len(engines)}.db'}")
        engines.append(engine)
        Base.metadata.create_all(engine)
        sessions = sessionmaker(engine)
        options.setdefault("principal", caller)
        if entities is None:
            entities = [Entity("invoices", schema=InvoiceSchema(), url="/api/invoices")]
        app = make_app(entities=entities, **options)

        @app.before_request
        def api_auth() -> t.Any:
            """The app's own auth for its REST API: it decides, not the exchange."""
            if not request.path.startswith("/api/"):
                return None
            who = caller()
            if who is None:
                return {"error": "who are you?"}, 401
            if app.config.get("API_KEY_REQUIRED") and (
                request.headers.get("X-API-Key") != f"key-{who.owner}"
            ):
                return {"error": "api key required"}, 401
            if who.scopes is not None and request.method != "GET":
                return {"error": "read-only token"}, 403
            g.api_owner = who.owner
            return None

        app.register_blueprint(
            crud_blueprint(
                "invoices_api",
                model=Invoice,
                schema=InvoiceSchema(),
                session=sessions,
                owner=lambda: g.get("api_owner"),
                url_prefix="/api/invoices",
            )
        )
        recorder = Recorder(app.wsgi_app)
        app.wsgi_app = recorder  # type: ignore[method-assign]
        return InvoiceApp(app, A2A(), recorder, A2ATestClient(app), sessions)

    yield build
    for engine in engines:
        engine.dispose()


@pytest.fixture
def invoices(make_invoice_app: t.Callable[..., InvoiceApp]) -> InvoiceApp:
    return make_invoice_app()


def state(task: dict[str, t.Any]) -> str:
    return t.cast(str, task["status"]["state"]).removeprefix("TASK_STATE_")


def status_text(task: dict[str, t.Any]) -> str:
    return t.cast(str, task["status"]["message"]["parts"][0]["text"])


def answer(task: dict[str, t.Any], name: str) -> t.Any:
    assert state(task) == "COMPLETED", task["status"]
    [artifact] = task["artifacts"]
    assert artifact["name"] == name
    [part] = artifact["parts"]
    return part["data"]


def create(inv: InvoiceApp, token: str, total: str, due: str = "2026-10-01") -> dict[str, t.Any]:
    task = inv.call("create", {"due_at": due, "total": total}, token=token)
    return t.cast(dict[str, t.Any], answer(task, "invoices.create"))


# ---------------------------------------------------------------------- registry and card


def test_description_is_the_spec_shape_exactly(invoices: InvoiceApp) -> None:
    [skill] = [s for s in invoices.a2a.skills(invoices.app) if s.id == "entity.invoices"]
    assert skill.description == DESCRIPTION
    assert skill.input_modes == ("application/json",)
    assert skill.output_modes == ("application/json",)
    card = invoices.client.client.get("/.well-known/agent-card.json").get_json()
    [entry] = [s for s in card["skills"] if s["id"] == "entity.invoices"]
    assert entry["description"] == DESCRIPTION
    assert entry["inputModes"] == ["application/json"]
    assert entry["outputModes"] == ["application/json"]


def test_tool_listing_comes_from_the_same_walk(invoices: InvoiceApp) -> None:
    tools = {tool["name"]: tool["inputSchema"] for tool in invoices.a2a.tools(invoices.app)}
    assert list(tools) == [f"invoices.{op}" for op in OPERATIONS.split(", ")]
    assert tools["invoices.create"] == {
        "type": "object",
        "properties": {
            "due_at": {"type": "string", "format": "date"},
            "total": {"type": "string", "format": "decimal"},
        },
        "additionalProperties": False,
        "required": ["due_at", "total"],
    }
    assert list(tools["invoices.list"]["properties"]) == [
        "page",
        "limit",
        "sort",
        "due_at",
        "total",
    ]
    assert tools["invoices.list"]["properties"]["sort"]["enum"] == [
        "id",
        "-id",
        "due_at",
        "-due_at",
        "total",
        "-total",
    ]
    assert "required" not in tools["invoices.list"]
    assert tools["invoices.update"]["required"] == ["id"]
    assert list(tools["invoices.update"]["properties"]) == ["id", "due_at", "total"]
    assert tools["invoices.get"]["properties"] == {"id": {"type": "string"}}
    # Every description line names exactly its tool's keys.
    lines = DESCRIPTION.split("\n")[1:]
    assert len(lines) == len(tools)
    for line, (name, schema) in zip(lines, tools.items()):
        keys = line[line.index("(") + 1 : -1].split(", ")
        assert [k for k in keys if k != "..."] == list(schema["properties"]), name


def test_card_lists_exactly_the_public_ungated_skills(
    make_invoice_app: t.Callable[..., InvoiceApp],
) -> None:
    schema = InvoiceSchema()
    entities = [
        Entity("invoices", schema=schema),
        Entity("ledger", schema=schema, url="/api/invoices", public=False),
        Entity("payroll", schema=schema, url="/api/invoices"),
        Entity(
            "invoices",
            schema=schema,
            namespace="billing",
            operations=("list", "get"),
            url="/api/invoices",
        ),
    ]
    seen: list[tuple[Principal | None, str, str]] = []

    def gate(principal: Principal | None, entity: Entity, operation: str) -> bool:
        seen.append((principal, entity.name, operation))
        return not (entity.name == "payroll" and principal is None)

    inv = make_invoice_app(entities, entity_gate=gate)
    card = inv.client.client.get("/.well-known/agent-card.json").get_json()
    assert [s["id"] for s in card["skills"]] == [
        "echo",
        "entity.invoices",
        "entity.billing.invoices",
    ]
    served = [s.id for s in inv.a2a.skills(inv.app)]
    assert "entity.ledger" in served and "entity.payroll" in served
    assert [t["name"] for t in inv.a2a.tools(inv.app)] == [
        *[f"invoices.{op}" for op in OPERATIONS.split(", ")],
        *[f"ledger.{op}" for op in OPERATIONS.split(", ")],
        "billing.invoices.list",
        "billing.invoices.get",
    ]
    assert (None, "payroll", "list") in seen
    # An unlisted entity is still served, and the gate lets Alice use payroll.
    create(inv, "alice", "3.00")
    ledger = inv.call("list", skill="entity.ledger")
    assert answer(ledger, "ledger.list")["total"] == 1
    payroll = inv.call("list", skill="entity.payroll")
    assert answer(payroll, "payroll.list")["total"] == 1
    namespaced = inv.call("list", skill="entity.billing.invoices")
    assert answer(namespaced, "invoices.list")["total"] == 1


def test_no_entity_skill_on_the_card_when_anonymous_listing_is_refused(
    make_invoice_app: t.Callable[..., InvoiceApp],
) -> None:
    inv = make_invoice_app(entity_gate=lambda principal, entity, op: principal is not None)
    card = inv.client.client.get("/.well-known/agent-card.json").get_json()
    assert [s["id"] for s in card["skills"]] == ["echo"]
    assert inv.a2a.tools(inv.app) == []
    assert len(inv.a2a.tools(inv.app, principal=TOKENS["alice"])) == 5
    answer(inv.call("list"), "invoices.list")  # every call runs the gate: Alice passes


def test_disabling_entity_skills_removes_them_from_routing_and_card(
    make_invoice_app: t.Callable[..., InvoiceApp],
) -> None:
    inv = make_invoice_app(config={"A2A_DISABLE_ENTITY_SKILLS": True})
    assert [s.id for s in inv.a2a.skills(inv.app)] == ["echo"]
    card = inv.client.client.get("/.well-known/agent-card.json").get_json()
    assert [s["id"] for s in card["skills"]] == ["echo"]
    task = inv.call("list", {})
    assert state(task) == "REJECTED"
    assert status_text(task) == 'unknown skill "entity.invoices"'
    assert inv.recorder.calls == []


# ---------------------------------------------------------------------- round trips


def test_each_operation_round_trips(invoices: InvoiceApp) -> None:
    made = create(invoices, "alice", "12.50")
    assert made["due_at"] == "2026-10-01" and made["total"] == "12.50" and made["id"]
    got = answer(invoices.call("get", {"id": made["id"]}), "invoices.get")
    assert got == made
    updated = answer(
        invoices.call("update", {"id": made["id"], "total": "20.00"}), "invoices.update"
    )
    assert updated == {**made, "total": "20.00"}
    listed = answer(invoices.call("list", {"limit": 10}), "invoices.list")
    assert listed == {"data": [updated], "page": 1, "perPage": 10, "total": 1, "totalPages": 1}
    # Exactly what the caller's own GET /api/invoices?limit=10 returns.
    direct = invoices.client.client.get(
        "/api/invoices?limit=10", headers={"Authorization": "Bearer alice"}
    )
    assert listed == direct.get_json()
    deleted = answer(invoices.call("delete", {"id": made["id"]}), "invoices.delete")
    assert deleted == {"id": made["id"], "deleted": True}
    assert invoices.rows() == []
    gone = invoices.call("get", {"id": made["id"]})
    assert state(gone) == "FAILED"
    assert status_text(gone) == 'entity request failed: status 404: {"error":"not found"}'


def test_list_pages_sorts_and_filters(invoices: InvoiceApp) -> None:
    for total, due in (("5.00", "2026-01-03"), ("7.00", "2026-01-01"), ("5.00", "2026-01-02")):
        create(invoices, "alice", total, due)
    page = answer(
        invoices.call("list", {"sort": "-due_at", "limit": 2, "page": 2}), "invoices.list"
    )
    assert [r["due_at"] for r in page["data"]] == ["2026-01-01"]
    assert (page["total"], page["totalPages"], page["perPage"]) == (3, 2, 2)
    fives = answer(invoices.call("list", {"total": "5.00", "sort": "due_at"}), "invoices.list")
    assert [r["due_at"] for r in fives["data"]] == ["2026-01-02", "2026-01-03"]
    by_date = answer(invoices.call("list", {"due_at": "2026-01-01"}), "invoices.list")
    assert [r["total"] for r in by_date["data"]] == ["7.00"]
    everything = answer(invoices.call("list"), "invoices.list")  # arguments may be omitted
    assert everything["total"] == 3


def test_operation_named_in_metadata_skill(invoices: InvoiceApp) -> None:
    message = A2ATestClient.message(skill="entity.invoices", data={"operation": "list"})
    task = invoices.client.rpc("SendMessage", {"message": message}, token="alice").result["task"]
    assert answer(task, "invoices.list")["total"] == 0


def test_route_overrides_choose_method_and_path(
    make_invoice_app: t.Callable[..., InvoiceApp],
) -> None:
    entity = Entity(
        "invoices",
        schema=InvoiceSchema,
        routes={"update": ("PUT", "/api/invoices/{id}")},
        operations=("create", "update"),
    )
    inv = make_invoice_app([entity])
    made = create(inv, "alice", "1.00")
    task = inv.call("update", {"id": made["id"], "due_at": "2027-01-01", "total": "2.00"})
    assert answer(task, "invoices.update")["total"] == "2.00"
    assert inv.recorder.calls[-1]["REQUEST_METHOD"] == "PUT"
    # PUT is a full replace for this app: its own refusal comes back as FAILED.
    partial = inv.call("update", {"id": made["id"], "total": "3.00"})
    assert state(partial) == "FAILED"
    assert status_text(partial).startswith("entity request failed: status 400: ")
    assert [str(r.total) for r in inv.rows()] == ["2.00"]


# ---------------------------------------------------------------------- owner scoping


def test_alice_never_sees_bobs_rows_through_any_operation(invoices: InvoiceApp) -> None:
    bobs = create(invoices, "bob", "99.00")
    mine = create(invoices, "alice", "1.00")
    listed = answer(invoices.call("list", {"total": "99.00"}), "invoices.list")
    assert listed["data"] == [] and listed["total"] == 0
    assert [r["id"] for r in answer(invoices.call("list"), "invoices.list")["data"]] == [mine["id"]]
    for operation, arguments in (
        ("get", {"id": bobs["id"]}),
        ("update", {"id": bobs["id"], "total": "0.01"}),
        ("delete", {"id": bobs["id"]}),
    ):
        task = invoices.call(operation, arguments)
        assert state(task) == "FAILED", operation
        assert status_text(task) == 'entity request failed: status 404: {"error":"not found"}'
    [row] = invoices.rows("bob")
    assert (row.id, str(row.total)) == (bobs["id"], "99.00")
    bob_view = answer(invoices.call("get", {"id": bobs["id"]}, token="bob"), "invoices.get")
    assert bob_view == bobs


def test_only_the_credential_headers_are_copied(invoices: InvoiceApp) -> None:
    invoices.app.config["API_KEY_REQUIRED"] = True
    stack.set_cookie(invoices.client.client, "session", "s-bob")  # the test client owns Cookie
    headers = {"X-API-Key": "key-bob", "X-Other": "leak"}
    task = invoices.call(
        "create", {"due_at": "2026-02-02", "total": "4.00"}, token=None, headers=headers
    )
    assert answer(task, "invoices.create")["total"] == "4.00"
    [environ] = invoices.recorder.calls
    assert environ["HTTP_COOKIE"] == "session=s-bob"
    assert environ["HTTP_X_API_KEY"] == "key-bob"
    assert "HTTP_X_OTHER" not in environ and "HTTP_AUTHORIZATION" not in environ
    assert environ["flask_a2a.entity_call"] is True
    assert [r.owner_id for r in invoices.rows()] == ["bob"]
    # Credentials go to the run, never to the store.
    stored = invoices.client.rpc("GetTask", {"id": task["id"]}, token="bob")
    assert "key-bob" not in stored.text and "s-bob" not in stored.text


def test_streaming_sends_carry_the_credentials_too(invoices: InvoiceApp) -> None:
    create(invoices, "bob", "6.00")
    message = A2ATestClient.message(data={"skill": "entity.invoices", "operation": "list"})
    response, events = invoices.client.stream(
        "SendStreamingMessage", {"message": message}, token="bob"
    )
    assert response.status_code == 200
    [update] = [e["result"]["artifactUpdate"] for e in events if "artifactUpdate" in e["result"]]
    assert update["artifact"]["name"] == "invoices.list"
    assert update["artifact"]["parts"][0]["data"]["total"] == 1
    assert invoices.recorder.calls[-1]["HTTP_AUTHORIZATION"] == "Bearer bob"


def test_the_apps_own_auth_refusal_fails_the_task_with_its_status(invoices: InvoiceApp) -> None:
    invoices.app.config["API_KEY_REQUIRED"] = True
    task = invoices.call("create", {"due_at": "2026-02-02", "total": "4.00"})
    assert state(task) == "FAILED"
    assert status_text(task) == 'entity request failed: status 401: {"error":"api key required"}'
    invoices.app.config["API_KEY_REQUIRED"] = False
    scoped = invoices.call("create", {"due_at": "2026-02-02", "total": "4.00"}, token="alice-read")
    assert state(scoped) == "FAILED"
    assert status_text(scoped) == 'entity request failed: status 403: {"error":"read-only token"}'
    assert len(invoices.recorder.calls) == 2
    assert invoices.rows() == []


# ---------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("operation", "arguments", "text"),
    [
        ("create", {"due_at": "2026-01-01"}, "total: Missing data for required field."),
        (
            "create",
            {"due_at": "soon", "total": "x"},
            "due_at: Not a valid date.; total: Not a valid number.",
        ),
        ("create", {"id": "x", "due_at": "2026-01-01", "total": "1"}, "id: Unknown field."),
        ("update", {"total": "1.00"}, "id: Missing data for required field."),
        ("update", {"id": "x", "total": "lots"}, "total: Not a valid number."),
        ("update", {"id": True}, "id: Must be a non-empty string or an integer."),
        ("get", {}, "id: Missing data for required field."),
        ("get", {"id": "x", "owner_id": "bob"}, "owner_id: Unknown field."),
        ("delete", {"id": ""}, "id: Must be a non-empty string or an integer."),
        ("list", {"limit": 0}, "limit: Must be an integer of at least 1."),
        ("list", {"page": "2"}, "page: Must be an integer of at least 1."),
        (
            "list",
            {"sort": "owner_id"},
            "sort: Must be one of: id, -id, due_at, -due_at, total, -total.",
        ),
        ("list", {"owner_id": "bob"}, "owner_id: Unknown field."),
        ("list", {"total": ["1"]}, "total: A filter is one string, number or boolean."),
        ("list", {"due_at": "yesterday"}, "due_at: Not a valid date."),
    ],
)
def test_schema_violations_fail_before_any_request(
    invoices: InvoiceApp, operation: str, arguments: dict[str, t.Any], text: str
) -> None:
    task = invoices.call(operation, arguments)
    assert state(task) == "FAILED"
    assert status_text(task) == f"invalid arguments: {text}"
    assert invoices.recorder.calls == []
    assert invoices.rows() == []


@pytest.mark.parametrize(
    ("operation", "arguments", "text"),
    [
        (MISSING, MISSING, f"missing operation; operations: {OPERATIONS}"),
        (None, {}, f"missing operation; operations: {OPERATIONS}"),
        ("purge", {}, f'unknown operation "purge"; operations: {OPERATIONS}'),
        ("LIST", MISSING, f'unknown operation "LIST"; operations: {OPERATIONS}'),
        (7, {}, f'unknown operation "7"; operations: {OPERATIONS}'),
        ("create", [1], "arguments must be a JSON object, not array"),
        ("list", "limit=10", "arguments must be a JSON object, not string"),
        ("list", None, "arguments must be a JSON object, not null"),
    ],
)
def test_rejections_name_the_operations(
    invoices: InvoiceApp, operation: t.Any, arguments: t.Any, text: str
) -> None:
    task = invoices.call(operation, arguments)
    assert state(task) == "REJECTED"
    assert status_text(task) == text
    assert invoices.recorder.calls == []


def test_rejection_lists_only_the_entitys_operations(
    make_invoice_app: t.Callable[..., InvoiceApp],
) -> None:
    inv = make_invoice_app([Entity("invoices", schema=InvoiceSchema(), operations=("get", "list"))])
    task = inv.call("delete", {"id": "x"})
    assert state(task) == "REJECTED"
    assert status_text(task) == 'unknown operation "delete"; operations: list, get'
    [skill] = [s for s in inv.a2a.skills(inv.app) if s.id == "entity.invoices"]
    assert skill.description.split("\n")[1:] == [
        "list(page, limit, sort, due_at, total)",
        "get(id)",
    ]


def test_a_gated_tool_is_refused_generically(
    make_invoice_app: t.Callable[..., InvoiceApp],
) -> None:
    def gate(principal: Principal | None, entity: Entity, operation: str) -> bool:
        if principal is not None and principal.owner == "carol":
            raise RuntimeError("module lookup failed")
        return not (operation == "delete" and principal is not None and principal.owner == "bob")

    inv = make_invoice_app(entity_gate=gate)
    made = create(inv, "bob", "8.00")
    calls = len(inv.recorder.calls)
    refused = inv.call("delete", {"id": made["id"]}, token="bob")
    assert state(refused) == "FAILED"
    assert status_text(refused) == "tool unavailable"
    assert len(inv.recorder.calls) == calls
    assert [r.id for r in inv.rows("bob")] == [made["id"]]
    TOKENS["carol"] = Principal("carol")
    try:
        broken = inv.call("list", token="carol")
    finally:
        del TOKENS["carol"]
    assert state(broken) == "FAILED"
    assert status_text(broken) == "tool unavailable"
    assert len(inv.recorder.calls) == calls


def test_declarations_are_checked() -> None:
    with pytest.raises(ConfigError, match="operations"):
        Entity("invoices", schema=InvoiceSchema(), operations=("list", "purge"))
    with pytest.raises(ConfigError, match="operations"):
        Entity(
            "invoices",
            schema=InvoiceSchema(),
            routes={"delete": ("DELETE", "/x/{id}")},
            operations=("list",),
        )
    with pytest.raises(ConfigError, match="name"):
        Entity("Invoices!", schema=InvoiceSchema())
    with pytest.raises(ConfigError, match="marshmallow"):
        Entity("invoices", schema=dict)  # type: ignore[arg-type]
    app = Flask("dupes")
    with pytest.raises(ConfigError, match="share the skill id"):
        A2A(app, principal=caller, entities=[Entity("a", schema=InvoiceSchema)] * 2)


def test_the_walk_maps_field_types_and_validators() -> None:
    """On the installed marshmallow, whichever major: the field types and options all have."""
    from marshmallow import validate

    from flask_a2a.entities.toolschema import walk

    class Line(Schema):
        sku = fields.String(required=True)

    class Wide(Schema):
        id = fields.Integer(dump_only=True)
        code = fields.String(
            validate=validate.Length(min=2, max=8), **field_options(data_key="sku")
        )
        email = fields.Email(allow_none=True, **field_options(description="who pays"))
        at = fields.DateTime()
        qty = fields.Integer(validate=validate.Range(min=0, max=9))
        paid = fields.Boolean()
        kind = fields.String(validate=validate.OneOf(["a", "b"]))
        tags = fields.List(fields.String(), validate=validate.Length(max=3))
        lines = fields.Nested(Line, many=True)
        extra = fields.Dict()
        secret = fields.String(load_only=True)

    facts = walk(Wide())
    assert facts.properties == {
        "sku": {"type": "string", "minLength": 2, "maxLength": 8},
        "email": {"type": ["string", "null"], "format": "email", "description": "who pays"},
        "at": {"type": "string", "format": "date-time"},
        "qty": {"type": "integer", "minimum": 0, "maximum": 9},
        "paid": {"type": "boolean"},
        "kind": {"type": "string", "enum": ["a", "b"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}},
                "required": ["sku"],
            },
        },
        "extra": {"type": "object"},
        "secret": {"type": "string"},
    }
    assert facts.filters == ("sku", "email", "at", "qty", "paid", "kind")
    assert "secret" not in facts.sorts and facts.sorts[0] == "id"
    assert facts.id_schema == {"type": "integer"}


@pytest.mark.skipif(
    host_schema.field_class("Enum") is None,
    reason="fields.Enum, AwareDateTime, Range(max_inclusive=) and Dict(values=) are newer",
)
def test_the_walk_maps_the_newer_field_types() -> None:
    """What marshmallow 3.18+ adds: enums, aware datetimes, exclusive bounds, typed dicts."""
    import enum

    from marshmallow import validate

    from flask_a2a.entities.toolschema import walk

    class Color(enum.Enum):
        RED = "r"

    class Newer(Schema):
        at = fields.AwareDateTime()
        qty = fields.Integer(validate=validate.Range(min=0, max=9, max_inclusive=False))
        color = fields.Enum(Color)
        extra = fields.Dict(values=fields.Integer())

    facts = walk(Newer())
    assert facts.properties == {
        "at": {"type": "string", "format": "date-time"},
        "qty": {"type": "integer", "minimum": 0, "exclusiveMaximum": 9},
        "color": {"type": "string", "enum": ["RED"]},
        "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
    }
    assert facts.filters == ("at", "qty", "color")


def test_odd_answers_fail_with_a_plain_reason(
    make_invoice_app: t.Callable[..., InvoiceApp],
) -> None:
    from flask import abort

    entities = [
        Entity("boom", schema=InvoiceSchema, url="/api/boom", operations=("list", "get")),
        Entity("html", schema=InvoiceSchema, url="/api/html", operations=("list",)),
    ]
    inv = make_invoice_app(entities)

    @inv.app.get("/api/boom")
    def boom() -> t.Any:
        raise RuntimeError("database on fire")

    @inv.app.get("/api/boom/<record_id>")
    def not_json(record_id: str) -> t.Any:
        return "plain words", 200, {"Content-Type": "text/plain"}

    @inv.app.get("/api/html")
    def html() -> t.Any:
        abort(401)

    crashed = inv.call("list", skill="entity.boom")
    assert state(crashed) == "FAILED"
    assert status_text(crashed) == "entity request failed: status 500: Internal Server Error"
    prose = inv.call("get", {"id": "1"}, skill="entity.boom")
    assert status_text(prose) == "entity request failed: status 200: the answer is not JSON"
    refused = inv.call("list", skill="entity.html")
    # An HTML error page is quoted by its heading and first paragraph.
    assert status_text(refused).startswith(
        "entity request failed: status 401: Unauthorized: The server could not verify"
    )
