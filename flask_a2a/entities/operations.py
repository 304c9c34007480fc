"""What an entity's operations take, declared to fit the routes an app already has.

An app's own REST API rarely has the shape the generated CRUD blueprint has: its list reads
``per_page`` rather than ``limit``, a nested route (``/api/users/{id}/followers``) takes the
parent's id in its path, and its operations have names of its own (``followers``). An
:class:`Argument` says what one operation takes (its name for the agent, the parameter the route
reads, where it goes, its type), an :class:`Operation` names a route (method and path
template) and the arguments it takes. :func:`bind` checks a declaration against its route once,
at startup, so a path parameter left undeclared fails the app's start rather than every call.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import re
import typing as t
from urllib.parse import quote

from ..config import ConfigError, ConfigTypeError

#: Where an argument goes in the app request.
PLACES: t.Final = ("path", "query", "body")
#: A ``{name}`` placeholder of a path template.
PLACEHOLDER: t.Final = re.compile(r"\{([^{}/]+)\}")
#: JSON Schema type names an argument may be declared with.
TYPES: t.Final = ("string", "integer", "number", "boolean", "array", "object")
#: Methods whose request carries no body.
BODILESS: t.Final = frozenset({"GET", "DELETE", "HEAD"})

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_OPERATION = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


@dataclasses.dataclass(frozen=True)
class Argument:
    """One argument an operation takes.

    :param name: the key agents send in ``arguments`` (and see in the description and schema).
    :param type: a JSON Schema type name (``"integer"``) or a whole JSON Schema
        (``{"type": "integer", "minimum": 1, "maximum": 100}``). Not given: the schema of the
        derived key of that name (a field, ``page``, ``limit``...), else ``"string"``.
    :param sends_as: the parameter the app's route reads, when it differs (``limit`` sent as
        ``per_page``).
    :param where: ``"path"``, ``"query"`` or ``"body"``. Not given: ``path`` when the route's
        template holds ``{sends_as or name}``, else ``query`` for GET and DELETE, else ``body``.
    :param required: the call must carry it (a path parameter always must).
    :param description: shown in the tool's input schema.
    """

    name: str
    type: str | t.Mapping[str, t.Any] | None = None
    sends_as: str | None = None
    where: str | None = None
    required: bool = False
    description: str | None = None

    def __post_init__(self) -> None:
        for label, value in (("name", self.name), ("sends_as", self.sends_as)):
            if value is not None and (not isinstance(value, str) or not _NAME.match(value)):
                raise ConfigError(f"Argument {label} {value!r} must match {_NAME.pattern}")
        if self.where is not None and self.where not in PLACES:
            raise ConfigError(f"Argument {self.name!r}: where must be one of {PLACES}")
        if isinstance(self.type, str) and self.type not in TYPES:
            raise ConfigError(f"Argument {self.name!r}: type must be one of {TYPES}")
        if self.type is not None and not isinstance(self.type, (str, t.Mapping)):
            raise ConfigTypeError(
                f"Argument {self.name!r}: type must be a type name or a JSON Schema"
            )

    @property
    def param(self) -> str:
        """The name the app's route reads."""
        return self.sends_as or self.name


@dataclasses.dataclass(frozen=True)
class Operation:
    """An operation of an entity, served by one route of the app.

    :param name: the operation's name (``followers``); one of ``list``, ``get``, ``create``,
        ``update``, ``delete`` replaces that operation's route and arguments.
    :param method: the HTTP method (``GET``).
    :param path: the path template (``/api/users/{id}/followers``); each ``{param}`` must be
        an argument.
    :param arguments: what the route takes: :class:`Argument` objects, or names of the
        entity's derived keys (a schema field, ``page``...), which keep their derived schema.
    :param description: the tool's description (default: ``"<Name> (<METHOD> <path>)."``).
    """

    name: str
    method: str
    path: str
    arguments: t.Sequence[Argument | str] = ()
    description: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _OPERATION.match(self.name):
            raise ConfigError(f"Operation name {self.name!r} must match {_OPERATION.pattern}")
        if not isinstance(self.path, str) or not self.path.startswith("/"):
            raise ConfigError(f"Operation {self.name!r}: path must start with '/'")
        if isinstance(self.arguments, str):
            raise ConfigTypeError(f"Operation {self.name!r}: arguments must be a sequence")
        object.__setattr__(self, "method", str(self.method).upper())
        object.__setattr__(self, "arguments", tuple(self.arguments))


class Bound(t.NamedTuple):
    """One argument checked against its route: what a call is checked and built with."""

    name: str
    param: str
    where: str
    schema: dict[str, t.Any]
    required: bool


def placeholders(template: str) -> list[str]:
    return PLACEHOLDER.findall(template)


def bind(
    where_from: str,
    method: str,
    template: str,
    declared: t.Sequence[Argument | str],
    derived: t.Mapping[str, t.Any],
    fixed: t.Collection[str] = (),
) -> list[Bound]:
    """The declared arguments of one operation, checked against its route (or ValueError).

    :param where_from: names the operation in an error (``Entity 'users' operation 'list'``).
    :param derived: the keys a bare name may pick, with their JSON Schemas.
    :param fixed: path parameters the caller fills in itself (``{id}`` of a standard operation).
    """
    bound: list[Bound] = []
    slots = placeholders(template)
    for item in declared:
        if isinstance(item, str):
            if item not in derived:
                raise ConfigError(
                    f"{where_from} names {item!r}, which it cannot take; choose from "
                    f"{list(derived)}, or declare Argument({item!r}, type=...)"
                )
            item = Argument(item)
        elif not isinstance(item, Argument):
            raise ConfigTypeError(f"{where_from}: an argument is a key name or an Argument")
        schema = _schema(item, derived)
        where = item.where or (
            "path" if item.param in slots else "query" if method in BODILESS else "body"
        )
        if (where == "path") != (item.param in slots):
            raise ConfigError(
                f"{where_from}: argument {item.name!r} is a path parameter only when the "
                f"path {template!r} holds {{{item.param}}}"
            )
        if where == "body" and method in BODILESS:
            raise ConfigError(f"{where_from}: a {method} request carries no body ({item.name!r})")
        bound.append(Bound(item.name, item.param, where, schema, item.required or where == "path"))
    names = [b.name for b in bound]
    if len(set(names)) != len(names) or any(n in fixed for n in names):
        raise ConfigError(f"{where_from} declares an argument twice: {names}")
    missing = [slot for slot in slots if slot not in fixed and slot not in {b.param for b in bound}]
    if missing:
        raise ConfigError(
            f"{where_from}: the path {template!r} holds {missing} but the operation does not "
            f"declare them; add Argument({missing[0]!r}, type=...) to its arguments"
        )
    return bound


def _schema(item: Argument, derived: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    if isinstance(item.type, str):
        schema: dict[str, t.Any] = {"type": item.type}
    elif item.type is not None:
        schema = dict(item.type)
    else:
        schema = dict(derived.get(item.name) or {"type": "string"})
    if item.description is not None:
        schema["description"] = item.description
    return schema


class Request(t.NamedTuple):
    """The parts of an app request the bound arguments fill in."""

    path: str
    query: list[tuple[str, str]]
    body: dict[str, t.Any]


def apply(
    bound: t.Sequence[Bound],
    template: str,
    arguments: t.Mapping[str, t.Any],
    errors: dict[str, t.Any],
) -> Request:
    """Check ``arguments`` against ``bound`` (messages into ``errors``) and place them."""
    path = template
    query: list[tuple[str, str]] = []
    body: dict[str, t.Any] = {}
    for arg in bound:
        if arg.name not in arguments:
            if arg.required:
                errors[arg.name] = ["Missing data for required field."]
            continue
        value = arguments[arg.name]
        problem = check(value, arg.schema, scalar=arg.where != "body")
        if problem is not None:
            errors[arg.name] = [problem]
        elif arg.where == "path":
            path = path.replace("{" + arg.param + "}", quote(_text(value), safe=""))
        elif arg.where == "query":
            items = value if isinstance(value, list) else [value]
            query.extend((arg.param, _text(item)) for item in items)
        else:
            body[arg.param] = value
    return Request(path, query, body)


def _text(value: t.Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


_PY_TYPES: t.Final[dict[str, tuple[type, ...]]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


_BOUNDS: t.Final[dict[str, t.Callable[[float, float], bool]]] = {
    "minimum": operator.ge,
    "maximum": operator.le,
    "exclusiveMinimum": operator.gt,
    "exclusiveMaximum": operator.lt,
}


def check(value: t.Any, schema: t.Mapping[str, t.Any], *, scalar: bool) -> str | None:
    """Why ``value`` breaks ``schema`` (type, enum, bounds, length, pattern), or None.

    A query or path value is one string, number or boolean (a query value may be a list of
    them, sent as the parameter repeated).
    """
    if scalar:
        items = value if isinstance(value, list) and schema.get("type") == "array" else [value]
        if any(item is None or isinstance(item, (dict, list)) for item in items):
            return "A path or query value is one string, number or boolean."
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is(value, kind) for kind in names):
            return f"Not a valid {' or '.join(names)}."
    if "enum" in schema and value not in schema["enum"]:
        return f"Must be one of: {', '.join(str(c) for c in schema['enum'])}."
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for key, ok in _BOUNDS.items():
            if key in schema and not ok(value, schema[key]):
                return f"Must satisfy {key} {schema[key]}."
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", 1e9):
            return "Length out of bounds."
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return "String does not match expected pattern."
    return None


def _is(value: t.Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _PY_TYPES.get(kind, (object,)))
