"""The host's marshmallow, whichever major it is (2, 3 or 4): every difference the entities see.

An entity's schema is written for the host app's marshmallow, and the library never asks for a
newer one. The rest of :mod:`flask_a2a.entities` reads schemas and fields only through this
module: loading (2 returns ``(data, errors)`` unless strict, and has no ``unknown=RAISE``),
dumping, the field keys (``data_key``, or 2's ``load_from``/``dump_to``), the load and dump
fields in declaration order, a field's description and the field classes an old major lacks.
:func:`field_options` spells a field's options for the installed major, for schemas that must
run on all three (the library's own tests).
"""

from __future__ import annotations

import inspect
import typing as t

import marshmallow
from marshmallow import Schema, ValidationError, fields

#: Public (docs/api.md, "Where names live"); the rest of this module is private.
__all__ = ["dump", "field_options", "load"]

#: marshmallow 2: ``load``/``dump`` return ``(data, errors)``; ``load_from``/``dump_to`` keys.
MARSHMALLOW_2: t.Final = not hasattr(marshmallow, "EXCLUDE")
_FIELD_PARAMETERS: t.Final = frozenset(
    name
    for name, parameter in inspect.signature(fields.Field.__init__).parameters.items()
    if parameter.kind is not parameter.VAR_KEYWORD  # 2 and early 3 take ``**metadata``
)
#: 3.13 renamed ``missing``/``default`` to ``load_default``/``dump_default`` (4 has only those).
_LOAD_DEFAULT: t.Final = "load_default" in _FIELD_PARAMETERS
#: Before 3.10 a field's metadata is its extra keyword arguments; after, ``metadata={...}``.
_METADATA_PARAMETER: t.Final = "metadata" in _FIELD_PARAMETERS
UNKNOWN_TEXT: t.Final = "Unknown field."


def field_class(name: str) -> type[fields.Field] | None:  # type: ignore[type-arg]
    """``marshmallow.fields.<name>`` when the installed major has it (``Enum`` is 3.18+...)."""
    found = getattr(fields, name, None)
    return found if isinstance(found, type) and issubclass(found, fields.Field) else None


#: The field class of JSON objects: ``Mapping`` (3+, ``Dict``'s base), or 2's ``Dict``.
MAPPING: t.Final = field_class("Mapping") or fields.Dict


def field_options(
    *,
    data_key: str | None = None,
    load_default: t.Any = marshmallow.missing,
    description: str | None = None,
    **options: t.Any,
) -> dict[str, t.Any]:
    """Keyword arguments for a field, spelled for the installed marshmallow."""
    if data_key is not None:
        options.update({"load_from": data_key, "dump_to": data_key} if MARSHMALLOW_2 else
                       {"data_key": data_key})  # fmt: skip
    if load_default is not marshmallow.missing:
        options["load_default" if _LOAD_DEFAULT else "missing"] = load_default
    if description is not None:
        if _METADATA_PARAMETER:
            options["metadata"] = {**options.get("metadata", {}), "description": description}
        else:
            options["description"] = description
    return options


def load_key(name: str, field: fields.Field) -> str:  # type: ignore[type-arg]
    """The key a client sends the field under."""
    return str(getattr(field, "load_from" if MARSHMALLOW_2 else "data_key", None) or name)


def dump_key(name: str, field: fields.Field) -> str:  # type: ignore[type-arg]
    """The key a client sees the field under."""
    return str(getattr(field, "dump_to" if MARSHMALLOW_2 else "data_key", None) or name)


def _declared(schema: Schema) -> list[tuple[str, fields.Field]]:  # type: ignore[type-arg]
    items = list(schema.fields.items())
    if getattr(schema.opts, "ordered", True) is False:  # 2 and 3 keep the order only if ordered
        items.sort(key=lambda item: getattr(item[1], "_creation_index", 0))
    return items


def load_fields(schema: Schema) -> dict[str, fields.Field]:  # type: ignore[type-arg]
    """The fields a load reads, by attribute name, in declaration order."""
    return {name: field for name, field in _declared(schema) if not field.dump_only}


def dump_fields(schema: Schema) -> dict[str, fields.Field]:  # type: ignore[type-arg]
    """The fields a dump writes, by attribute name, in declaration order."""
    return {name: field for name, field in _declared(schema) if not field.load_only}


def description(field: fields.Field) -> str | None:  # type: ignore[type-arg]
    """``description`` from the field's metadata (``metadata={...}`` nests it before 3.10)."""
    found = field.metadata.get("description")
    nested = field.metadata.get("metadata")
    if found is None and isinstance(nested, dict):
        found = nested.get("description")
    return found if isinstance(found, str) else None


def list_item(field: fields.List) -> fields.Field:  # type: ignore[type-arg]
    """A List's item field (``inner``; 2 and early 3 call it ``container``)."""
    found = getattr(field, "inner", None) or getattr(field, "container", None)
    return t.cast("fields.Field[t.Any]", found)


def mapping_values(field: fields.Field) -> fields.Field | None:  # type: ignore[type-arg]
    """The field of a mapping's values, or None when any value goes."""
    for name in ("value_field", "value_container"):
        if hasattr(field, name):
            return t.cast("fields.Field[t.Any] | None", getattr(field, name))
    return None


def inclusive(rule: marshmallow.validate.Range) -> tuple[bool, bool]:
    """Whether a Range's (min, max) bounds are inclusive (always, before 3.6)."""
    return getattr(rule, "min_inclusive", True), getattr(rule, "max_inclusive", True)


def load(
    schema: Schema, data: t.Mapping[str, t.Any], *, partial: bool | tuple[str, ...] = False
) -> dict[str, t.Any]:
    """``data`` loaded, a key the schema has no field for refused as ``Unknown field.``.

    Raises :class:`marshmallow.ValidationError` (its ``messages`` a dict) on every major;
    marshmallow 2 returns its errors instead unless the schema is strict, and has no
    ``unknown=RAISE``, so the unknown keys are found here.
    """
    if not MARSHMALLOW_2:
        return t.cast(
            dict[str, t.Any], schema.load(data, partial=partial, unknown=marshmallow.RAISE)
        )
    known = {load_key(name, field) for name, field in load_fields(schema).items()}
    errors: dict[str, t.Any] = {key: [UNKNOWN_TEXT] for key in data if key not in known}
    # Only the known keys are loaded: 2 would also read a ``load_from`` field by its name.
    known_data = {key: value for key, value in data.items() if key in known}
    try:
        loaded, problems = schema.load(known_data, partial=partial)
    except ValidationError as exc:  # a strict schema raises
        loaded, problems = {}, exc.messages
    errors.update(problems if isinstance(problems, dict) else {"_schema": problems})
    if errors:
        raise ValidationError(errors)
    return t.cast(dict[str, t.Any], loaded)


def dump(schema: Schema, obj: t.Any, *, many: bool = False) -> t.Any:
    """``obj`` dumped (marshmallow 2's ``(data, errors)`` reduced to its data)."""
    result = schema.dump(obj, many=many)
    return result.data if MARSHMALLOW_2 else result
