"""Plain-Python readers for a caller's params: the little of a schema library :mod:`.schemas` uses.

The wire layer validates without marshmallow so that the library never asks a host for a
marshmallow newer than its own (the host's marshmallow is for its entity schemas). A reader is a
function ``value -> result`` that raises :class:`Invalid`; a :class:`Reader` subclass lists its
:class:`Field` s. Error messages are the ones marshmallow gave these params before, so callers'
-32602 texts did not change.
"""

from __future__ import annotations

import dataclasses
import typing as t

#: The texts of a field-level refusal (kept as marshmallow wrote them).
MISSING_TEXT: t.Final = "Missing data for required field."
NULL_TEXT: t.Final = "Field may not be null."
STRING_TEXT: t.Final = "Not a valid string."
LIST_TEXT: t.Final = "Not a valid list."
MAPPING_TEXT: t.Final = "Not a valid mapping type."

#: An error tree: a field's messages, or key (a name, a list index, ``_schema``) -> subtree.
Messages = t.Union[list[str], dict[t.Any, t.Any]]
Read = t.Callable[[t.Any], t.Any]
Check = t.Callable[[t.Any], None]


class Invalid(Exception):
    """A value refused: its messages, or a dict of the refusals inside it."""

    def __init__(self, messages: Messages | str) -> None:
        super().__init__(messages)
        self.messages: Messages = [messages] if isinstance(messages, str) else messages


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def string(value: t.Any) -> str:
    if not isinstance(value, str):
        raise Invalid(STRING_TEXT)
    return value


def raw(value: t.Any) -> t.Any:
    return value


def struct(value: t.Any) -> dict[str, t.Any]:
    """A ``google.protobuf.Struct``: any JSON object."""
    if not isinstance(value, dict):
        raise Invalid(MAPPING_TEXT)
    return dict(value)


def list_of(item: Read) -> Read:
    """A list read item by item; refusals are keyed by index (``parts[0].text``)."""

    def read_list(value: t.Any) -> list[t.Any]:
        if not isinstance(value, (list, tuple)):
            raise Invalid(LIST_TEXT)
        out: list[t.Any] = []
        errors: dict[int, Messages] = {}
        for index, each in enumerate(value):
            try:
                if each is None:
                    raise Invalid(NULL_TEXT)
                out.append(item(each))
            except Invalid as exc:
                errors[index] = exc.messages
        if errors:
            raise Invalid(errors)
        return out

    return read_list


def min_length(least: int) -> Check:
    def check(value: t.Sized) -> None:
        if len(value) < least:
            raise Invalid(f"Shorter than minimum length {least}.")

    return check


def in_range(least: int, most: int | None = None) -> Check:
    if most is None:
        text = f"Must be greater than or equal to {least}."
    else:
        text = f"Must be greater than or equal to {least} and less than or equal to {most}."

    def check(value: int) -> None:
        if value < least or (most is not None and value > most):
            raise Invalid(text)

    return check


@dataclasses.dataclass(frozen=True)
class Field:
    """One key of an object: ``key`` on the wire (camelCase), ``name`` in the result."""

    name: str
    read: Read
    key: str = ""
    required: bool = False
    checks: tuple[Check, ...] = ()

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", camel(self.name))

    def load(self, value: t.Any) -> t.Any:
        """Read, then run every check (all their messages, as one refusal)."""
        result = self.read(value)
        problems: list[str] = []
        for check in self.checks:
            try:
                check(result)
            except Invalid as exc:
                problems.extend(t.cast(list[str], exc.messages))
        if problems:
            raise Invalid(problems)
        return result


class Reader:
    """An object's reader: camelCase and snake_case names, unknown keys ignored, null unset."""

    fields: t.ClassVar[tuple[Field, ...]] = ()
    #: Keys whose JSON ``null`` is a value, not "unset".
    keep_null: t.ClassVar[frozenset[str]] = frozenset()

    def __call__(self, value: t.Any) -> t.Any:
        return self.load(value)

    def load(self, data: t.Any) -> t.Any:
        """The fields read into a dict by name, then :meth:`build`; refusals by wire key."""
        given = self.normalize(data)
        out: dict[str, t.Any] = {}
        errors: dict[str, Messages] = {}
        for field in self.fields:
            if field.key not in given:
                if field.required:
                    errors[field.key] = [MISSING_TEXT]
                continue
            value = given[field.key]
            try:
                out[field.name] = None if value is None else field.load(value)
            except Invalid as exc:
                errors[field.key] = exc.messages
        if errors:
            raise Invalid(errors)
        return self.build(out)

    def normalize(self, data: t.Any) -> dict[str, t.Any]:
        """Keys in camelCase (that spelling wins over snake_case), nulls dropped."""
        if not isinstance(data, dict):
            raise Invalid({"_schema": ["must be an object"]})
        out: dict[str, t.Any] = {}
        for key, value in data.items():
            if value is None and key not in self.keep_null:
                continue
            name = camel(key) if "_" in key else key
            if name in out and name != key:
                continue
            out[name] = value
        return out

    def build(self, data: dict[str, t.Any]) -> t.Any:
        """What the read fields make (the dict itself by default)."""
        return data
