"""Entity skills: the host app's own resources, served as deterministic skills.

An :class:`Entity` names a resource of the app, its marshmallow schema and the app's REST routes
for it. Each entity becomes one tool per operation in an :class:`EntityRegistry`; a tool's input
schema is the marshmallow schema walked once, and the skill description, the card's skill entry
and the tool listing are all generated from the registry, so they cannot drift apart.

A tool call re-enters the app through its own WSGI stack (middleware, ``before_request`` hooks
and auth all run) with the caller's ``Cookie``, ``Authorization`` and ``X-API-Key`` headers and
nothing else of theirs, so the app decides exactly as it does for its REST API.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import logging
import re
import typing as t
import weakref
from http import HTTPStatus
from urllib.parse import quote, urlencode

from flask.testing import EnvironBuilder
from marshmallow import RAISE, Schema, ValidationError

from ..exchange.router import Skill
from ..ops.log_fields import fields
from ..protocol.model import Part, Principal
from ..protocol.scrub import scrub
from .operations import Argument, Bound, Operation, apply, bind
from .toolschema import SchemaFacts, walk

if t.TYPE_CHECKING:
    from flask import Flask

    from ..exchange.tasks import TaskContext

log = logging.getLogger("flask_a2a")

#: The five operations an entity may offer, in the order descriptions list them.
OPERATIONS: t.Final = ("list", "get", "create", "update", "delete")
#: Operation -> (HTTP method, path under the entity's URL); ``{id}`` is the record id.
DEFAULT_ROUTES: t.Final[dict[str, tuple[str, str]]] = {
    "list": ("GET", ""),
    "get": ("GET", "/{id}"),
    "create": ("POST", ""),
    "update": ("PATCH", "/{id}"),
    "delete": ("DELETE", "/{id}"),
}
#: The list operation's own keys, before the filterable fields.
LIST_KEYS: t.Final = ("page", "limit", "sort")
#: Field keys a description line shows before its ``...`` (the tool listing has them all).
MAX_DESCRIBED_FIELDS: t.Final = 8
#: The refusal for a gated tool, whatever the reason: it says nothing about why.
TOOL_UNAVAILABLE: t.Final = "tool unavailable"
#: Marks a request the exchange re-entered the app with (``request.environ`` key).
ENTITY_CALL_ENVIRON_KEY: t.Final = "flask_a2a.entity_call"
#: The largest app answer a tool call reads.
MAX_ANSWER_BYTES: t.Final = 4 * 1024 * 1024

_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")

#: ``gate(principal_or_None, entity, operation) -> bool``: may this caller use this tool?
EntityGate = t.Callable[["Principal | None", "Entity", str], bool]


@dataclasses.dataclass(frozen=True, eq=False)
class Entity:
    """A resource of the host app, offered to agents as the skill ``entity.<name>``.

    :param name: the resource name (``invoices``); artifacts are named ``<name>.<operation>``.
    :param schema: the marshmallow schema (instance or class) of one record.
    :param url: where the app serves the conventional routes (default ``/api/<name>``).
    :param operations: the operations offered: names from :data:`OPERATIONS`, and
        :class:`~flask_a2a.entities.operations.Operation` objects (an operation of the app's
        own name and route, or a standard one with its route and arguments declared).
    :param routes: per-operation ``(method, path)`` overrides; ``{id}`` in a path is the id,
        any other ``{param}`` must be declared in ``arguments`` (else startup fails).
    :param namespace: groups the skill as ``entity.<namespace>.<name>``.
    :param public: listed on the public agent card (a non-public entity is served, unlisted).
    :param arguments: per-operation argument keys the app's route really takes (a hand-written
        route that ignores ``limit``, say), chosen from the keys derived from the schema, or
        :class:`~flask_a2a.entities.operations.Argument` objects (a key renamed for the route,
        ``limit`` sent as ``per_page``, or one the schema does not have); an operation left
        out takes them all, as the generated CRUD blueprint does. The description, the tool
        schema and the argument check follow it.
    :param description: the skill description's lead line, instead of the generated one.
    """

    name: str
    schema: Schema | type[Schema]
    url: str | None = None
    #: Given as names and :class:`Operation` objects; once made, the names (a tuple of str).
    operations: t.Sequence[t.Any] = OPERATIONS
    routes: t.Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    namespace: str | None = None
    public: bool = True
    arguments: t.Mapping[str, t.Sequence[str | Argument]] = dataclasses.field(
        default_factory=dict
    )
    description: str | None = None
    #: The operations declared as :class:`Operation` objects, by name (set from ``operations``).
    declared_routes: t.Mapping[str, Operation] = dataclasses.field(
        init=False, default_factory=dict, repr=False
    )

    def __post_init__(self) -> None:
        for label, value in (("name", self.name), ("namespace", self.namespace)):
            if value is not None and not _NAME.match(value):
                raise ValueError(f"Entity {label} {value!r} must match {_NAME.pattern}")
        if isinstance(self.schema, type):
            if not issubclass(self.schema, Schema):
                raise TypeError(f"Entity {self.name!r}: schema must be a marshmallow Schema")
            object.__setattr__(self, "schema", self.schema())
        elif not isinstance(self.schema, Schema):
            raise TypeError(f"Entity {self.name!r}: schema must be a marshmallow Schema")
        if isinstance(self.operations, str):
            raise TypeError(f"Entity {self.name!r}: operations must be a sequence of names")
        own = {op.name: op for op in self.operations if isinstance(op, Operation)}
        ops = tuple(op.name if isinstance(op, Operation) else op for op in self.operations)
        unknown = [op for op in ops if op not in OPERATIONS and op not in own] + [
            op for op in [*self.routes, *self.arguments] if op not in ops or op in own
        ]
        if unknown or not ops or len(set(ops)) != len(ops):
            raise ValueError(
                f"Entity {self.name!r}: operations must be distinct names from {OPERATIONS} "
                "or Operation objects (and routes and arguments may name only the former), "
                f"got {unknown or list(ops)}"
            )
        declared: dict[str, tuple[str | Argument, ...]] = {}
        for op, keys in self.arguments.items():
            if isinstance(keys, str) or not all(isinstance(k, str | Argument) for k in keys):
                raise TypeError(
                    f"Entity {self.name!r}: arguments[{op!r}] must be a sequence of key "
                    "names and Argument objects"
                )
            names = [k if isinstance(k, str) else k.name for k in keys]
            if len(set(names)) != len(names):
                raise ValueError(f"Entity {self.name!r}: arguments[{op!r}] repeats a key")
            declared[op] = tuple(keys)
        object.__setattr__(self, "arguments", declared)
        object.__setattr__(self, "declared_routes", own)
        object.__setattr__(self, "operations", tuple(
            [op for op in OPERATIONS if op in ops and op not in own]
            + [op for op in ops if op in own]
        ))
        object.__setattr__(self, "url", (self.url or f"/api/{self.name}").rstrip("/"))
        for op, (_method, path) in self.routes.items():
            if not path.startswith("/"):
                raise ValueError(f"Entity {self.name!r}: route {op!r} path must start with '/'")
        object.__setattr__(self, "routes", dict(self.routes))

    @property
    def skill_id(self) -> str:
        return f"entity.{self.qualified_name}"

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}.{self.name}" if self.namespace else self.name

    @property
    def record_schema(self) -> Schema:
        return t.cast(Schema, self.schema)

    def route(self, operation: str) -> tuple[str, str]:
        """The ``(method, path template)`` the app serves ``operation`` at."""
        if operation in self.declared_routes:
            own = self.declared_routes[operation]
            return own.method, own.path
        if operation in self.routes:
            method, path = self.routes[operation]
            return method.upper(), path
        method, suffix = DEFAULT_ROUTES[operation]
        return method, f"{self.url}{suffix}"


# ---------------------------------------------------------------------- tools


class ArgumentError(Exception):
    """The arguments break the tool's input schema; nothing was sent to the app."""


class Call(t.NamedTuple):
    """One prepared request to the app."""

    method: str
    path: str
    query: list[tuple[str, str]]
    body: dict[str, t.Any] | None


@dataclasses.dataclass(frozen=True)
class Tool:
    """One operation of one entity, with its JSON-Schema input."""

    name: str
    entity: Entity
    operation: str
    input_schema: dict[str, t.Any]
    facts: SchemaFacts = dataclasses.field(repr=False)
    #: The declared arguments checked and placed as declared (renamed, extra, path parameters).
    bound: tuple[Bound, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.input_schema["properties"])

    @property
    def declared(self) -> bool:
        """The entity declares this operation's arguments (else they are derived)."""
        return self.operation in self.entity.arguments or self.custom

    @property
    def custom(self) -> bool:
        """Declared as an :class:`Operation`: its arguments are all it takes."""
        return self.operation in self.entity.declared_routes

    @property
    def signature(self) -> str:
        """``list(page, limit, sort, due_at, total)``: the description line for this tool.

        A declared operation lists its keys in the order declared, a derived one its fixed
        keys first; either ends with ``...`` only when keys past :data:`MAX_DESCRIBED_FIELDS`
        were left out (the tool listing has them all).
        """
        keys = list(self.keys)
        if not self.declared:
            fixed = {"list": LIST_KEYS, "update": ("id",), "get": ("id",), "delete": ("id",)}
            head = list(fixed.get(self.operation, ()))
            keys = [*head, *(k for k in keys if k not in head)]
            limit = len(head) + MAX_DESCRIBED_FIELDS
        else:
            limit = MAX_DESCRIBED_FIELDS
        more = ["..."] if len(keys) > limit else []
        return f"{self.operation}({', '.join([*keys[:limit], *more])})"

    def describe(self) -> dict[str, t.Any]:
        """The tool as a tool listing shows it (MCP ``tools/list`` shape)."""
        text = f"{self.operation.capitalize()} {self.entity.name} records."
        if self.custom:
            own = self.entity.declared_routes[self.operation]
            text = own.description or f"{own.name.capitalize()} ({own.method} {own.path})."
        return {"name": self.name, "description": text, "inputSchema": self.input_schema}

    def prepare(self, arguments: t.Mapping[str, t.Any]) -> Call:
        """Validate ``arguments`` with the schema and build the app request; or ArgumentError."""
        schema = self.entity.record_schema
        method, template = self.entity.route(self.operation)
        # A key this tool does not take (``additionalProperties: false``) is refused by name.
        errors: dict[str, t.Any] = {k: ["Unknown field."] for k in arguments if k not in self.keys}
        arguments = {k: v for k, v in arguments.items() if k in self.keys}
        # The declared arguments (renamed, extra, path parameters) are placed as declared.
        names = {b.name for b in self.bound}
        placed = apply(self.bound, template, {k: arguments[k] for k in names & set(arguments)},
                       errors)
        template = placed.path
        arguments = {k: v for k, v in arguments.items() if k not in names}
        if self.custom:
            if errors:
                raise ArgumentError(_format_errors(errors))
            return Call(method, template, placed.query, placed.body or None)
        query: list[tuple[str, str]] = []
        body: dict[str, t.Any] | None = None
        record_id: t.Any = None
        if self.operation in ("get", "delete", "update"):
            record_id = arguments.get("id")
            if "id" not in arguments:
                errors["id"] = ["Missing data for required field."]
            elif isinstance(record_id, bool) or not isinstance(record_id, str | int) or (
                isinstance(record_id, str) and not 0 < len(record_id) <= 512
            ):
                errors["id"] = ["Must be a non-empty string or an integer."]
        rest = {k: v for k, v in arguments.items() if k != "id" or self.operation == "create"}
        if self.operation == "list":
            query = self._list_query(rest, errors)
        elif self.operation in ("create", "update"):
            try:
                schema.load(rest, partial=self._partial(), unknown=RAISE)
            except ValidationError as exc:
                errors.update(_messages(exc))
            body = dict(rest)
        if errors:
            raise ArgumentError(_format_errors(errors))
        path = template
        if self.operation in ("get", "delete", "update"):
            path = template.replace("{id}", quote(str(record_id), safe=""))
        if placed.body:
            body = {**(body or {}), **placed.body}
        return Call(method, path, [*placed.query, *query], body)

    def _partial(self) -> bool | tuple[str, ...]:
        """What the schema load may leave out: all of it for update; for a create, the
        required fields its declaration leaves out (the route fills them in itself)."""
        if self.operation == "update":
            return True
        schema = self.entity.record_schema
        return tuple(
            name
            for name, field in schema.load_fields.items()
            if field.required and (field.data_key or name) not in self.keys
        )

    def _list_query(
        self, arguments: t.Mapping[str, t.Any], errors: dict[str, t.Any]
    ) -> list[tuple[str, str]]:
        query: list[tuple[str, str]] = []
        for key in ("page", "limit"):
            if key in arguments:
                value = arguments[key]
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    errors[key] = ["Must be an integer of at least 1."]
                else:
                    query.append((key, str(value)))
        if "sort" in arguments:
            choices = self.input_schema["properties"]["sort"]["enum"]
            if arguments["sort"] not in choices:
                errors["sort"] = [f"Must be one of: {', '.join(choices)}."]
            else:
                query.append(("sort", arguments["sort"]))
        filters = {k: v for k, v in arguments.items() if k not in LIST_KEYS}
        for key, value in filters.items():
            if value is None or isinstance(value, dict | list):
                errors[key] = ["A filter is one string, number or boolean."]
        if errors:
            return query
        try:
            self.entity.record_schema.load(filters, partial=True, unknown=RAISE)
        except ValidationError as exc:
            errors.update(_messages(exc))
        for key, value in filters.items():
            query.append((key, value if isinstance(value, str) else json.dumps(value)))
        return query


def _messages(exc: ValidationError) -> dict[str, t.Any]:
    messages = exc.messages
    return messages if isinstance(messages, dict) else {"_schema": messages}


def _format_errors(errors: t.Mapping[str, t.Any], prefix: str = "") -> str:
    """``due_at: Missing data for required field.; total: Not a valid number.`` (sorted)."""
    out: list[str] = []
    for key in sorted(errors, key=str):
        value = errors[key]
        label = f"{prefix}{key}"
        if isinstance(value, dict):
            out.append(_format_errors(value, f"{label}."))
        else:
            items = value if isinstance(value, list) else [value]
            out.append(f"{label}: {' '.join(str(v) for v in items)}")
    return "; ".join(out)


def build_tools(entity: Entity) -> list[Tool]:
    """Every tool of ``entity``: one walk of its schema, one input schema per operation."""
    facts = walk(entity.record_schema)
    sort_choices = [choice for key in facts.sorts for choice in (key, f"-{key}")]
    id_only = {"id": facts.id_schema}
    inputs: dict[str, tuple[dict[str, t.Any], list[str]]] = {
        "list": (
            {
                "page": {"type": "integer", "minimum": 1},
                "limit": {"type": "integer", "minimum": 1},
                "sort": {"type": "string", "enum": sort_choices},
                **{key: facts.properties[key] for key in facts.filters},
            },
            [],
        ),
        "get": (id_only, ["id"]),
        "create": (dict(facts.properties), list(facts.required)),
        "update": ({**id_only, **facts.properties}, ["id"]),
        "delete": (id_only, ["id"]),
    }
    tools = []
    for op in entity.operations:
        method, template = entity.route(op)
        where = f"Entity {entity.name!r} operation {op!r}"
        if op in entity.declared_routes:
            # Bare names pick from every derived key; the declaration is all the route takes.
            derived = {**inputs["list"][0], **id_only, **facts.properties}
            bound = bind(where, method, template, entity.declared_routes[op].arguments, derived)
            properties = {b.name: b.schema for b in bound}
            required = [b.name for b in bound if b.required]
        else:
            properties, required = inputs[op]
            fixed = ("id",) if op in ("get", "update", "delete") else ()
            extras = [a for a in entity.arguments.get(op, ()) if isinstance(a, Argument)]
            bound = bind(where, method, template, extras, properties, fixed)
            if op in entity.arguments:
                properties, required = _declared(entity, op, properties, required, bound)
        input_schema: dict[str, t.Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        if required:
            input_schema["required"] = required
        tools.append(Tool(
            f"{entity.qualified_name}.{op}", entity, op, input_schema, facts, tuple(bound)
        ))
    return tools


def _declared(
    entity: Entity,
    op: str,
    properties: dict[str, t.Any],
    required: list[str],
    bound: t.Sequence[Bound],
) -> tuple[dict[str, t.Any], list[str]]:
    """An operation's derived input narrowed to the keys the entity declares for it, with its
    :class:`Argument` declarations (``bound``) in their declared places.

    A record id is always taken where the path holds one (``get``, ``update``, ``delete``).
    """
    declared = {b.name: b for b in bound}
    keys = [k if isinstance(k, str) else k.name for k in entity.arguments[op]]
    unknown = [k for k in keys if k not in properties and k not in declared]
    if unknown:
        raise ValueError(
            f"Entity {entity.name!r}: arguments[{op!r}] names {unknown}, which the {op} "
            f"operation cannot take; choose from {list(properties)}, or declare "
            f"Argument({unknown[0]!r}, type=...)"
        )
    if "id" in properties and op != "create":
        keys = ["id", *(k for k in keys if k != "id")]
    out = {k: declared[k].schema if k in declared else properties[k] for k in keys}
    needed = [k for k in required if k in keys and k not in declared]
    return out, [*needed, *(b.name for b in bound if b.required and b.name not in needed)]


def describe_skill(entity: Entity, tools: t.Sequence[Tool]) -> str:
    """The skill description: the first line, then one line per operation with its keys."""
    contract = "Send one data part carrying skill, operation, and arguments:"
    if entity.description:
        lines = [entity.description.strip(), contract]
    elif entity.declared_routes:
        lines = [f"Operations on {entity.name} records through the app's tools. {contract}"]
    else:
        lines = [f"CRUD on {entity.name} records through the app's tools. {contract}"]
    lines.extend(tool.signature for tool in tools)
    return "\n".join(lines)


# ---------------------------------------------------------------------- re-entering the app


class AnswerTooLarge(Exception):
    """The app answered with more than :data:`MAX_ANSWER_BYTES`."""


class Answer(t.NamedTuple):
    status: int
    mimetype: str
    body: bytes


def dispatch(app: Flask, call: Call, credentials: t.Mapping[str, str]) -> Answer:
    """Run ``call`` through the app's whole WSGI stack as the caller; no test client involved."""
    builder = EnvironBuilder(
        app,
        path=call.path,
        method=call.method,
        query_string=urlencode(call.query) if call.query else None,
        json=call.body,
        headers=list(credentials.items()),
    )
    try:
        environ = builder.get_environ()
    finally:
        builder.close()
    environ[ENTITY_CALL_ENVIRON_KEY] = True
    status: list[str] = []
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []
    size = 0

    def start_response(
        line: str, response_headers: list[tuple[str, str]], exc_info: t.Any = None
    ) -> t.Callable[[bytes], object]:
        status[:] = [line]
        headers[:] = response_headers
        return chunks.append

    def serve() -> None:
        nonlocal size
        iterable = app(environ, start_response)
        try:
            for chunk in iterable:
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise AnswerTooLarge(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")
                chunks.append(chunk)
        finally:
            close = getattr(iterable, "close", None)
            if close is not None:
                close()

    # An empty context: the call gets its own app and request context (its own ``g`` and
    # ``db.session``, torn down as after any request), not the run's.
    contextvars.Context().run(serve)
    content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
    code = int(status[0].split(" ", 1)[0]) if status else 500
    return Answer(code, content_type.split(";", 1)[0].strip().lower(), b"".join(chunks))


def refusal_text(answer: Answer) -> str:
    """What a non-2xx answer said: its JSON compacted, its plain text, or the status phrase."""
    text = ""
    try:
        text = json.dumps(json.loads(answer.body), separators=(",", ":"), ensure_ascii=False)
    except (ValueError, UnicodeDecodeError):
        if answer.mimetype == "text/plain":
            text = " ".join(answer.body.decode("utf-8", "replace").split())
    if not text:
        try:
            text = HTTPStatus(answer.status).phrase
        except ValueError:
            text = "refused"
    return scrub(text)[:500]


# ---------------------------------------------------------------------- the registry


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


class EntityRegistry:
    """The tools of every entity of one app, and the entity skills built from them.

    :param gate: ``gate(principal_or_None, entity, operation) -> bool``; every skill call runs
        it, and the public card lists only what it lets an anonymous caller (``None``) list.
    """

    def __init__(
        self, entities: t.Iterable[Entity], app: Flask, gate: EntityGate | None = None
    ) -> None:
        self.entities: dict[str, Entity] = {}
        self.tools: dict[str, Tool] = {}
        for entity in entities:
            if entity.skill_id in self.entities:
                raise ValueError(f"two entities share the skill id {entity.skill_id!r}")
            self.entities[entity.skill_id] = entity
            for tool in build_tools(entity):
                self.tools[tool.name] = tool
        self.gate = gate
        self._app = weakref.ref(app)

    def tools_of(self, entity: Entity) -> list[Tool]:
        return [self.tools[f"{entity.qualified_name}.{op}"] for op in entity.operations]

    def allowed(self, principal: Principal | None, entity: Entity, operation: str) -> bool:
        """The gate's answer; a gate that raises refuses."""
        if self.gate is None:
            return True
        try:
            return bool(self.gate(principal, entity, operation))
        except Exception as exc:
            log.warning("a2a: entity gate failed: %s", scrub(repr(exc)))
            return False

    def listed_tools(self, principal: Principal | None = None) -> list[dict[str, t.Any]]:
        """The tools ``principal`` may list (``None``: an anonymous caller), as dicts."""
        return [
            tool.describe()
            for tool in self.tools.values()
            if self.allowed(principal, tool.entity, tool.operation)
        ]

    def skills(self) -> list[Skill]:
        """One skill per entity, described from its tools.

        A skill is listed on the public card when its entity is public and an anonymous
        caller may list at least one of its tools (a skill names its entity and fields). Like
        every skill, that is fixed when the app starts; each call still runs the gate.
        """
        return [self._skill(entity) for entity in self.entities.values()]

    def anonymous_can_list(self, entity: Entity) -> bool:
        return any(self.allowed(None, entity, op) for op in entity.operations)

    def _skill(self, entity: Entity) -> Skill:
        examples: tuple[str, ...] = ()
        if "list" in entity.operations:
            example: dict[str, t.Any] = {"skill": entity.skill_id, "operation": "list"}
            if "limit" in self.tools[f"{entity.qualified_name}.list"].keys:
                example["arguments"] = {"limit": 10}
            examples = (json.dumps(example),)
        return Skill(
            id=entity.skill_id,
            name=f"{entity.name.replace('_', ' ').capitalize()} records",
            description=describe_skill(entity, self.tools_of(entity)),
            handler=lambda task: self.run(task, entity),
            tags=("entity", entity.name),
            examples=examples,
            input_modes=("application/json",),
            output_modes=("application/json",),
            public=entity.public and self.anonymous_can_list(entity),
        )

    def run(self, task: TaskContext, entity: Entity) -> None:
        """The entity skill handler: route the operation, gate, validate, re-enter the app."""
        operations = ", ".join(entity.operations)
        request = _entity_request(task, entity)
        operation = request.get("operation")
        if operation is None:
            task.reject(f"missing operation; operations: {operations}")
            return
        if operation not in entity.operations:
            asked = scrub(operation)[:100]
            task.reject(f'unknown operation "{asked}"; operations: {operations}')
            return
        arguments = request.get("arguments", {})
        if not isinstance(arguments, dict):
            task.reject(f"arguments must be a JSON object, not {_json_kind(arguments)}")
            return
        if not self.allowed(task.principal, entity, operation):
            task.fail(TOOL_UNAVAILABLE)
            return
        tool = self.tools[f"{entity.qualified_name}.{operation}"]
        try:
            call = tool.prepare(arguments)
        except ArgumentError as exc:
            task.fail(scrub(f"invalid arguments: {exc}")[:1000])
            return
        app = self._app()
        if app is None:
            task.fail(TOOL_UNAVAILABLE)
            return
        task.check()
        try:
            answer = dispatch(app, call, task.credentials)
        except AnswerTooLarge as exc:
            task.fail(f"entity request failed: {exc}")
            return
        except Exception as exc:
            log.warning(
                "a2a: entity %s %s failed: %s", entity.name, operation, scrub(repr(exc)),
                extra=fields(task.id, task.skill.id),
            )
            task.fail("entity request failed: status 500: Internal Server Error")
            return
        if not 200 <= answer.status < 300:
            task.fail(f"entity request failed: status {answer.status}: {refusal_text(answer)}")
            return
        try:
            data = json.loads(answer.body) if answer.body.strip() else None
        except (ValueError, UnicodeDecodeError):
            task.fail(f"entity request failed: status {answer.status}: the answer is not JSON")
            return
        task.artifact([Part(data=data)], name=f"{entity.name}.{operation}")


def _entity_request(task: TaskContext, entity: Entity) -> dict[str, t.Any]:
    """The data part carrying this skill (or, with the skill in metadata, the first object)."""
    objects = [p.data for p in task.message.parts if isinstance(p.data, dict)]
    for data in objects:
        if data.get("skill") == entity.skill_id:
            return data
    return objects[0] if objects else {}
