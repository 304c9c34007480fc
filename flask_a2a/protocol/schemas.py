"""The readers of a caller's params (ProtoJSON readers), declared field by field.

Reading follows ProtoJSON readers: camelCase and the proto's snake_case names are both accepted,
unknown fields are ignored, JSON ``null`` means unset, enums are accepted by name or number, and
an unknown enum name is an error. Failures become -32602 with one message per field
(:func:`load_params`). Plain Python (:mod:`.readers`), not marshmallow: the host's marshmallow,
of any major, is left to its entity schemas. What is written back is :mod:`.wire`'s.
"""

from __future__ import annotations

import base64
import binascii
import re
import typing as t
from datetime import datetime

from .errors import InvalidParamsError
from .limits import MAX_KEY, MAX_TASK_ID, unstorable
from .model import (
    ROLE_NUMBERS,
    TASK_STATE_NUMBERS,
    UNSET,
    AuthenticationInfo,
    Message,
    Part,
    Role,
    TaskState,
)
from .readers import (
    MISSING_TEXT,
    Check,
    Field,
    Invalid,
    Read,
    Reader,
    camel,
    in_range,
    list_of,
    min_length,
    raw,
    string,
    struct,
)
from .wire import parse_timestamp


def proto_enum(enum: type[TaskState] | type[Role], numbers: dict[int, t.Any]) -> Read:
    """An enum read by proto name or number; an unknown name is an error."""
    names = ", ".join(member.value for member in enum)

    def read_enum(value: t.Any) -> t.Any:
        if isinstance(value, int) and not isinstance(value, bool) and value in numbers:
            return numbers[value]
        if isinstance(value, str):
            try:
                return enum(value)
            except ValueError:
                pass
        raise Invalid(f"unknown value {repr(value)[:40]}; expected one of {names}")

    return read_enum


def timestamp(value: t.Any) -> datetime:
    if not isinstance(value, str):
        raise Invalid("must be an RFC 3339 timestamp string")
    try:
        return parse_timestamp(value)
    except ValueError:
        raise Invalid(
            "must be an RFC 3339 timestamp within years 0001-9999 in UTC, e.g. 2026-01-02T03:04:05Z"
        ) from None


_INT_TEXT = re.compile(r"^-?\d+$")
_NOT_AN_INT: t.Final = "Not a valid integer."


def proto_int(value: t.Any) -> int:
    """An int32 as ProtoJSON reads it: a number or a numeric string, never a bool or 1.5."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise Invalid(_NOT_AN_INT)
    if (isinstance(value, float) and not value.is_integer()) or (
        isinstance(value, str) and not _INT_TEXT.match(value)
    ):
        raise Invalid(_NOT_AN_INT)
    try:
        number = int(value)
    except ValueError:  # a numeric string past Python's digit limit
        raise Invalid(_NOT_AN_INT) from None
    if not -(2**31) <= number < 2**31:
        raise Invalid("must fit in a 32-bit integer")
    return number


def proto_bool(value: t.Any) -> bool:
    """A bool as ProtoJSON reads it: ``true`` or ``false``, not ``"yes"`` or ``1``."""
    if not isinstance(value, bool):
        raise Invalid("Not a valid boolean.")
    return value


def base64_bytes(value: t.Any) -> bytes:
    """``bytes`` as base64: standard or URL-safe, padding optional."""
    if not isinstance(value, str):
        raise Invalid("must be a base64 string")
    text = value.replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise Invalid("is not valid base64") from None


def storable(limit: int) -> Check:
    """A string every store can hold in a field of ``limit`` characters (``limits.py``)."""

    def check(value: str) -> None:
        reason = unstorable(value, limit)
        if reason is not None:
            raise Invalid(reason)

    return check


def matches(pattern: re.Pattern[str], text: str) -> Check:
    def check(value: str) -> None:
        if pattern.match(value) is None:
            raise Invalid(text)

    return check


#: A task id a caller names; a context id or push-config id.
_TASK_ID: t.Final = storable(MAX_TASK_ID)
_KEY: t.Final = storable(MAX_KEY)
_NOT_EMPTY: t.Final = min_length(1)
_REQUIRED_TASK_ID: t.Final = (_NOT_EMPTY, _TASK_ID)

#: What ``http.client`` can send as a header value: Latin-1, no control characters (CR, LF,
#: NUL...), no whitespace at either end (``requests`` refuses a leading one).
_HEADER_VALUE = re.compile(
    r"^(?:[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)?\Z"
)
#: An HTTP auth scheme is a token (RFC 9110 §11.1, §5.6.2).
_AUTH_SCHEME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")

#: Push tokens and credentials are sent as header values at every delivery: refuse at
#: registration what could never be sent, instead of failing each delivery.
header_value = matches(
    _HEADER_VALUE,
    "must be sendable as an HTTP header value: Latin-1 characters, no control "
    "characters (CR, LF, NUL...), no whitespace at either end",
)
auth_scheme = matches(
    _AUTH_SCHEME, "must be an HTTP auth scheme such as Bearer (letters, digits, -._~+!...)"
)
_TENANT: t.Final = Field("tenant", string)
_METADATA: t.Final = Field("metadata", struct)


class PartSchema(Reader):
    keep_null = frozenset({"data"})
    fields = (
        Field("text", string),
        Field("raw", base64_bytes),
        Field("url", string),
        Field("data", raw),
        _METADATA,
        Field("filename", string),
        Field("media_type", string),
    )

    def build(self, data: dict[str, t.Any]) -> Part:
        content = [k for k in ("text", "raw", "url", "data") if k in data]
        if len(content) != 1:
            raise Invalid(
                {
                    "_schema": [
                        "a part must hold exactly one of text, raw, url or data"
                        + (f"; got {', '.join(content)}" if content else "")
                    ]
                }
            )
        return Part(
            text=data.get("text"),
            raw=data.get("raw"),
            url=data.get("url"),
            data=data.get("data", UNSET),
            metadata=data.get("metadata"),
            filename=data.get("filename") or None,
            media_type=data.get("media_type") or None,
        )


class MessageSchema(Reader):
    fields = (
        Field("message_id", string, required=True, checks=(_NOT_EMPTY,)),
        Field("context_id", string, checks=(_KEY,)),
        Field("task_id", string, checks=(_TASK_ID,)),
        Field("role", proto_enum(Role, ROLE_NUMBERS), required=True),
        Field("parts", list_of(PartSchema()), required=True, checks=(_NOT_EMPTY,)),
        _METADATA,
        Field("extensions", list_of(string)),
        Field("reference_task_ids", list_of(string)),
    )

    def build(self, data: dict[str, t.Any]) -> Message:
        if data["role"] is Role.UNSPECIFIED:
            raise Invalid({"role": [MISSING_TEXT]})
        return Message(
            message_id=data["message_id"],
            role=data["role"],
            parts=tuple(data["parts"]),
            context_id=data.get("context_id") or None,
            task_id=data.get("task_id") or None,
            metadata=data.get("metadata"),
            extensions=tuple(data.get("extensions", ())),
            reference_task_ids=tuple(data.get("reference_task_ids", ())),
        )


class AuthenticationInfoSchema(Reader):
    fields = (
        Field("scheme", string, required=True, checks=(auth_scheme,)),
        Field("credentials", string, checks=(header_value,)),
    )

    def build(self, data: dict[str, t.Any]) -> AuthenticationInfo:
        return AuthenticationInfo(data["scheme"], data.get("credentials") or None)


class PushConfigSchema(Reader):
    """A flat TaskPushNotificationConfig; loads to a dict (the task id may still be unknown)."""

    fields = (
        _TENANT,
        Field("id", string, checks=(_KEY,)),
        Field("task_id", string, checks=(_TASK_ID,)),
        Field("url", string, required=True, checks=(_NOT_EMPTY,)),
        Field("token", string, checks=(header_value,)),
        Field("authentication", AuthenticationInfoSchema()),
    )


class SendMessageConfigurationSchema(Reader):
    fields = (
        Field("accepted_output_modes", list_of(string)),
        Field("task_push_notification_config", PushConfigSchema()),
        Field("history_length", proto_int, checks=(in_range(0),)),
        Field("return_immediately", proto_bool),
    )


class SendMessageRequestSchema(Reader):
    fields = (
        _TENANT,
        Field("message", MessageSchema(), required=True),
        Field("configuration", SendMessageConfigurationSchema()),
        _METADATA,
    )


class GetTaskRequestSchema(Reader):
    fields = (
        _TENANT,
        Field("id", string, required=True, checks=_REQUIRED_TASK_ID),
        Field("history_length", proto_int, checks=(in_range(0),)),
    )


class ListTasksRequestSchema(Reader):
    fields = (
        _TENANT,
        Field("context_id", string, checks=(_KEY,)),
        Field("status", proto_enum(TaskState, TASK_STATE_NUMBERS)),
        Field("page_size", proto_int, checks=(in_range(1, 100),)),
        Field("page_token", string),
        Field("history_length", proto_int, checks=(in_range(0),)),
        Field("status_timestamp_after", timestamp),
        Field("include_artifacts", proto_bool),
    )


class CancelTaskRequestSchema(Reader):
    fields = (_TENANT, Field("id", string, required=True, checks=_REQUIRED_TASK_ID), _METADATA)


class SubscribeToTaskRequestSchema(Reader):
    fields = (_TENANT, Field("id", string, required=True, checks=_REQUIRED_TASK_ID))


class PushConfigRefSchema(Reader):
    """Get/DeleteTaskPushNotificationConfigRequest."""

    fields = (
        _TENANT,
        Field("task_id", string, required=True, checks=_REQUIRED_TASK_ID),
        Field("id", string, required=True, checks=(_NOT_EMPTY, _KEY)),
    )


class ListPushConfigsRequestSchema(Reader):
    fields = (
        _TENANT,
        Field("task_id", string, required=True, checks=_REQUIRED_TASK_ID),
        Field("page_size", proto_int, checks=(in_range(0, 100),)),
        Field("page_token", string),
    )


class GetExtendedAgentCardRequestSchema(Reader):
    fields = (_TENANT,)


def _violations(messages: t.Any, prefix: str = "") -> list[tuple[str, str]]:
    """Flatten a nested error tree into (field path, description) pairs."""
    if isinstance(messages, dict):
        out: list[tuple[str, str]] = []
        for key, value in messages.items():
            if isinstance(key, int):  # a list item: AIP-193 paths say parts[0].text
                path = f"{prefix}[{key}]"
            else:
                name = camel(str(key)) if key != "_schema" else ""
                path = ".".join(p for p in (prefix, name) if p)
            out.extend(_violations(value, path))
        return out
    if isinstance(messages, list) and all(isinstance(m, str) for m in messages):
        return [(prefix or "params", " ".join(messages))]
    if isinstance(messages, list):
        return [v for item in messages for v in _violations(item, prefix)]
    return [(prefix or "params", str(messages))]


_S = t.TypeVar("_S", bound=Reader)


def schema(cls: type[_S]) -> _S:
    """An instance of reader ``cls``: it holds no state, so building one costs nothing."""
    return cls()


def read(cls: type[Reader], params: t.Any) -> t.Any:
    """``params`` read by reader ``cls`` (:func:`load_params`)."""
    return load_params(schema(cls), params)


def load_params(schema: Reader, params: t.Any) -> t.Any:
    """Validate ``params`` with ``schema``; failures become -32602 with field messages."""
    try:
        return schema.load(params)
    except Invalid as exc:
        violations = _violations(exc.messages)
        detail = "; ".join(f"{field}: {text}" for field, text in violations)
        raise InvalidParamsError(
            f"Invalid parameters: {detail}", field_violations=violations
        ) from None
