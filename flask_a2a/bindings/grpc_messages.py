"""ProtoJSON into the SDK's generated messages, the gRPC binding's hot path, by hand.

Every answer of the exchange is ProtoJSON (a stored task's own encoding, reused); the gRPC
binding hands the caller the same answer as the RPC's protobuf message. ``json_format.Parse``
does that generically and slowly (most of a GetTask's CPU): :func:`fill` walks the message's
descriptor instead, its fields looked up once per message type, and sets each value the way
the ProtoJSON mapping says (enums by name, bytes in base64, timestamps in RFC 3339, Struct and
Value as JSON). Anything it was not written for (a map field, a wrapper type, a value of
another JSON type) falls back to ``json_format``, which then says what is wrong with it.
Needs the ``grpc`` extra (protobuf, from the SDK).
"""

from __future__ import annotations

import base64
import calendar
import functools
import typing as t
from datetime import datetime

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

_TIMESTAMP: t.Final = "google.protobuf.Timestamp"
_STRUCT: t.Final = "google.protobuf.Struct"
_VALUE: t.Final = "google.protobuf.Value"


#: Whole doubles up to here are exact integers (2**53): made ints again by :func:`json_numbers`.
_EXACT: t.Final = 2**53


def json_numbers(value: t.Any) -> t.Any:
    """A ProtoJSON value read from a message, with its numbers as JSON has them.

    A ``google.protobuf.Value`` (a data part, metadata) holds every number as a double, so
    ``{"limit": 10}`` sent by any gRPC client arrives as ``10.0``, where JSON-RPC hands the
    same call ``10``: a JSON Schema ``integer`` check, ``isinstance(x, int)`` or a host's
    marshmallow ``Integer(strict=True)`` would then refuse over gRPC what they accept over
    JSON-RPC. A whole number is an int again (a fraction stays a float)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and -_EXACT <= value <= _EXACT else value
    if isinstance(value, dict):
        return {key: json_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_numbers(item) for item in value]
    return value


class _Unhandled(Exception):
    """A shape :func:`fill` leaves to ``json_format``."""


def parse(data: t.Any, message: Message, *, lenient: bool = False) -> Message:
    """``data`` (a ProtoJSON object) into ``message``; ``lenient``: unknown fields are skipped
    (else ``json_format.ParseError``, as ``json_format.ParseDict`` raises)."""
    try:
        fill(message, data, lenient)
    except (_Unhandled, KeyError, TypeError, ValueError, AttributeError):
        message.Clear()
        json_format.ParseDict(data, message, ignore_unknown_fields=lenient)
    return message


@functools.cache
def _fields(descriptor: Descriptor) -> dict[str, FieldDescriptor]:
    """A message type's fields by their ProtoJSON name and their proto name."""
    out = {field.name: field for field in descriptor.fields}
    out.update({field.json_name: field for field in descriptor.fields})
    return out


def fill(message: Message, data: t.Any, lenient: bool = False) -> None:
    if not isinstance(data, dict):
        raise _Unhandled(data)
    fields = _fields(message.DESCRIPTOR)
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            if lenient:
                continue
            raise _Unhandled(key)
        if value is None and (field.message_type is None or field.message_type.full_name != _VALUE):
            continue  # null is the field's default, but a Value's JSON null
        if field.message_type is not None:
            if field.message_type.GetOptions().map_entry:
                raise _Unhandled(key)
            if _is_repeated(field):
                if not isinstance(value, list):
                    raise _Unhandled(key)
                container = getattr(message, field.name)
                for item in value:
                    _message_value(container.add(), item, lenient)
            else:
                _message_value(getattr(message, field.name), value, lenient)
        elif _is_repeated(field):
            if not isinstance(value, list):
                raise _Unhandled(key)
            getattr(message, field.name).extend(_scalar(field, item) for item in value)
        else:
            setattr(message, field.name, _scalar(field, value))


def _is_repeated(field: FieldDescriptor) -> bool:
    # protobuf 5.28+ has ``is_repeated``; ``label`` is deprecated there but works everywhere.
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return bool(repeated)
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)


def _message_value(target: Message, value: t.Any, lenient: bool) -> None:
    target.SetInParent()  # present even when empty (``{}``), as json_format has it
    name = target.DESCRIPTOR.full_name
    if name == _TIMESTAMP:
        seconds, nanos = _timestamp(value)
        target.seconds, target.nanos = seconds, nanos
    elif name == _STRUCT:
        if not isinstance(value, dict):
            raise _Unhandled(value)
        target.update(value)
    elif name == _VALUE:
        json_format.ParseDict(value, target)
    elif name.startswith("google.protobuf."):
        raise _Unhandled(name)  # another well-known type: json_format knows its JSON
    else:
        fill(target, value, lenient)


def _scalar(field: FieldDescriptor, value: t.Any) -> t.Any:
    kind = field.type
    if kind == FieldDescriptor.TYPE_ENUM:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        return field.enum_type.values_by_name[value].number
    if kind == FieldDescriptor.TYPE_BYTES:
        if not isinstance(value, str):
            raise _Unhandled(value)
        return base64.b64decode(value, validate=True)  # else json_format (URL-safe, unpadded)
    if kind == FieldDescriptor.TYPE_STRING:
        if not isinstance(value, str):
            raise _Unhandled(value)
        return value
    if kind == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise _Unhandled(value)
        return value
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Unhandled(value)
        return value
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _Unhandled(value)
    return int(value)  # the integer types (64-bit ones come as strings in ProtoJSON)


def _timestamp(value: t.Any) -> tuple[int, int]:
    """RFC 3339 (``2026-01-02T03:04:05.678Z``, or an offset) as (seconds, nanos) since 1970."""
    if not isinstance(value, str):
        raise _Unhandled(value)
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    head, dot, rest = text.partition(".")
    nanos = 0
    if dot:
        digits = ""
        while rest and rest[0].isdigit():
            digits, rest = digits + rest[0], rest[1:]
        if not digits or len(digits) > 9:
            raise _Unhandled(value)
        nanos = int(digits.ljust(9, "0"))
        text = head + rest
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise _Unhandled(value)
    return calendar.timegm(moment.utctimetuple()), nanos
