"""A host's marshmallow schema as JSON Schema, in one walk: the input schemas of the entity tools.

:func:`walk` reads a record schema once and returns what every tool of its entity needs (the
load fields and their JSON Schemas, which are required, which filter a list, which sort it, the
id's schema). The generated CRUD blueprint reads the same facts, so the filters and sort keys a
tool advertises are the ones the blueprint accepts. Fields are read through :mod:`.host_schema`,
so a schema of marshmallow 2, 3 or 4 gives the same JSON Schema.
"""

from __future__ import annotations

import dataclasses
import typing as t

from marshmallow import Schema, fields, validate

from . import host_schema

_SCALAR_TYPES: t.Final = frozenset({"string", "number", "integer", "boolean"})
#: Field classes an older marshmallow lacks (None there).
_TUPLE: t.Final[t.Any] = host_schema.field_class("Tuple")
_ENUM: t.Final[t.Any] = host_schema.field_class("Enum")
_IP: t.Final[t.Any] = host_schema.field_class("IP")


def _validator_keywords(field: fields.Field[t.Any], out: dict[str, t.Any]) -> None:
    for rule in field.validators:
        if isinstance(rule, validate.OneOf):
            out["enum"] = list(rule.choices)
        elif isinstance(rule, validate.Length):
            kind = "Items" if out.get("type") == "array" else "Length"
            if getattr(rule, "equal", None) is not None:
                out[f"min{kind}"] = out[f"max{kind}"] = rule.equal
            if rule.min is not None:
                out[f"min{kind}"] = rule.min
            if rule.max is not None:
                out[f"max{kind}"] = rule.max
        elif isinstance(rule, validate.Range):
            min_inclusive, max_inclusive = host_schema.inclusive(rule)
            if rule.min is not None:
                out["minimum" if min_inclusive else "exclusiveMinimum"] = rule.min
            if rule.max is not None:
                out["maximum" if max_inclusive else "exclusiveMaximum"] = rule.max
        elif isinstance(rule, validate.Regexp):
            out["pattern"] = rule.regex.pattern


def _base_schema(field: fields.Field[t.Any]) -> dict[str, t.Any]:
    """The JSON Schema of one field's input, by its marshmallow type (most specific first)."""
    if isinstance(field, fields.Nested):
        nested = field.schema
        properties, required = _properties(nested)
        inner: dict[str, t.Any] = {"type": "object", "properties": properties}
        if required:
            inner["required"] = required
        return {"type": "array", "items": inner} if field.many else inner
    if isinstance(field, fields.List):
        return {"type": "array", "items": field_schema(host_schema.list_item(field))}
    if _TUPLE is not None and isinstance(field, _TUPLE):
        return {"type": "array", "prefixItems": [field_schema(f) for f in field.tuple_fields]}
    if isinstance(field, host_schema.MAPPING):
        value = host_schema.mapping_values(field)
        if value is None:
            return {"type": "object"}
        return {"type": "object", "additionalProperties": field_schema(value)}
    if isinstance(field, fields.Boolean):
        return {"type": "boolean"}
    if isinstance(field, fields.Integer):
        return {"type": "integer"}
    if isinstance(field, fields.Decimal):
        return {"type": "string", "format": "decimal"} if field.as_string else {"type": "number"}
    if isinstance(field, (fields.Number, fields.TimeDelta)):
        return {"type": "number"}
    if _ENUM is not None and isinstance(field, _ENUM):
        if field.by_value:
            return {"enum": [member.value for member in field.enum]}
        return {"type": "string", "enum": [member.name for member in field.enum]}
    formats: tuple[tuple[type[fields.Field[t.Any]], str], ...] = (
        (fields.Date, "date"),  # a DateTime in marshmallow 3.0
        (fields.Time, "time"),
        (fields.DateTime, "date-time"),
        (fields.Email, "email"),
        (fields.URL, "uri"),
        (fields.UUID, "uuid"),
    )
    for kind, fmt in formats:
        if isinstance(field, kind):
            return {"type": "string", "format": fmt}
    if isinstance(field, fields.String) or (_IP is not None and isinstance(field, _IP)):
        return {"type": "string"}
    return {}


def field_schema(field: fields.Field[t.Any]) -> dict[str, t.Any]:
    """One marshmallow field as a JSON Schema (type, format, validators, null, description)."""
    out = _base_schema(field)
    _validator_keywords(field, out)
    if field.allow_none and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    description = host_schema.description(field)
    if description is not None:
        out["description"] = description
    return out


def _properties(schema: Schema) -> tuple[dict[str, t.Any], list[str]]:
    """A schema's load fields as JSON Schema properties, and the required keys."""
    props: dict[str, t.Any] = {}
    required: list[str] = []
    for name, field in host_schema.load_fields(schema).items():
        key = host_schema.load_key(name, field)
        props[key] = field_schema(field)
        if field.required:
            required.append(key)
    return props, required


@dataclasses.dataclass(frozen=True)
class SchemaFacts:
    """What one walk of a record schema tells every tool of its entity."""

    #: Load fields (what create/update take): key -> JSON Schema, in declaration order.
    properties: dict[str, t.Any]
    required: tuple[str, ...]
    #: Scalar fields clients both send and see: what list filters by.
    filters: tuple[str, ...]
    #: Scalar dumped fields: what list sorts by.
    sorts: tuple[str, ...]
    #: The JSON Schema of a record id.
    id_schema: dict[str, t.Any]


def walk(schema: Schema) -> SchemaFacts:
    """Walk a record schema once; every tool's input schema is built from the result."""
    properties, required = _properties(schema)
    sorts: list[str] = []
    id_schema: dict[str, t.Any] = {"type": ["string", "integer"]}
    for name, field in host_schema.dump_fields(schema).items():
        key = host_schema.dump_key(name, field)
        js = properties.get(key) or field_schema(field)
        if key == "id":
            id_schema = {k: v for k, v in js.items() if k != "type"}
            id_schema["type"] = js.get("type") if js.get("type") in _SCALAR_TYPES else "string"
        if _is_scalar(js):
            sorts.append(key)
    # A field clients never see (load_only, a password say) is not a filter: it would leak.
    filters = tuple(key for key, js in properties.items() if _is_scalar(js) and key in sorts)
    return SchemaFacts(properties, tuple(required), filters, tuple(sorts), id_schema)


def _is_scalar(js: t.Mapping[str, t.Any]) -> bool:
    kind = js.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    return bool(kinds - {"null"}) and kinds - {"null"} <= _SCALAR_TYPES
