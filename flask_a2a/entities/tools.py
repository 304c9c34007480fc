"""An entity's tools: one per operation, with its JSON-Schema input, its argument check and the
request to the app it prepares; and the skill description generated from them."""

from __future__ import annotations

import dataclasses
import json
import logging
import typing as t
from urllib.parse import quote

from marshmallow import ValidationError

from ..config import ConfigError
from . import host_schema
from .entity import Entity
from .operations import Argument, Bound, apply, bind
from .toolschema import SchemaFacts, walk

if t.TYPE_CHECKING:
    pass

log = logging.getLogger("flask_a2a")

#: The list operation's own keys, before the filterable fields.
LIST_KEYS: t.Final = ("page", "limit", "sort")
#: Field keys a description line shows before its ``...`` (the tool listing has them all).
MAX_DESCRIBED_FIELDS: t.Final = 8


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
        placed = apply(
            self.bound, template, {k: arguments[k] for k in names & set(arguments)}, errors
        )
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
            elif (
                isinstance(record_id, bool)
                or not isinstance(record_id, (str, int))
                or (isinstance(record_id, str) and not 0 < len(record_id) <= 512)
            ):
                errors["id"] = ["Must be a non-empty string or an integer."]
        rest = {k: v for k, v in arguments.items() if k != "id" or self.operation == "create"}
        if self.operation == "list":
            query = self._list_query(rest, errors)
        elif self.operation in ("create", "update"):
            try:
                host_schema.load(schema, rest, partial=self._partial())
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
            for name, field in host_schema.load_fields(schema).items()
            if field.required and host_schema.load_key(name, field) not in self.keys
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
            if value is None or isinstance(value, (dict, list)):
                errors[key] = ["A filter is one string, number or boolean."]
        if errors:
            return query
        try:
            host_schema.load(self.entity.record_schema, filters, partial=True)
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
        tools.append(
            Tool(f"{entity.qualified_name}.{op}", entity, op, input_schema, facts, tuple(bound))
        )
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
        raise ConfigError(
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
