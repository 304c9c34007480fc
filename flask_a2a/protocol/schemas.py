"""The marshmallow schemas that read a caller's params (ProtoJSON readers).

Reading follows ProtoJSON readers: camelCase and the proto's snake_case names are both accepted,
unknown fields are ignored, JSON ``null`` means unset, enums are accepted by name or number, and
an unknown enum name is an error. Failures become -32602 with one message per field
(:func:`load_params`). What is written back is :mod:`.wire`'s.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import typing as t
from datetime import datetime

from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_load, pre_load, validate

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
from .wire import parse_timestamp


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


class ProtoEnum(fields.Field):  # type: ignore[type-arg]
    """An enum read by proto name or number; an unknown name is an error."""

    def __init__(self, enum: type[TaskState] | type[Role], numbers: dict[int, t.Any], **kw: t.Any):
        super().__init__(**kw)
        self.enum = enum
        self.numbers = numbers

    def _deserialize(self, value: t.Any, attr: str | None, data: t.Any, **kw: t.Any) -> t.Any:
        if isinstance(value, int) and not isinstance(value, bool) and value in self.numbers:
            return self.numbers[value]
        if isinstance(value, str):
            try:
                return self.enum(value)
            except ValueError:
                pass
        names = ", ".join(member.value for member in self.enum)
        raise ValidationError(f"unknown value {repr(value)[:40]}; expected one of {names}")


class Timestamp(fields.Field):  # type: ignore[type-arg]
    def _deserialize(self, value: t.Any, attr: str | None, data: t.Any, **kw: t.Any) -> datetime:
        if not isinstance(value, str):
            raise ValidationError("must be an RFC 3339 timestamp string")
        try:
            return parse_timestamp(value)
        except ValueError as exc:
            raise ValidationError(
                "must be an RFC 3339 timestamp within years 0001-9999 in UTC, "
                "e.g. 2026-01-02T03:04:05Z"
            ) from exc


_INT_TEXT = re.compile(r"^-?\d+$")


class ProtoInt(fields.Integer):
    """An int32 as ProtoJSON reads it: a number or a numeric string, never a bool or 1.5."""

    def _validated(self, value: t.Any) -> int:
        if (isinstance(value, float) and not value.is_integer()) or (
            isinstance(value, str) and not _INT_TEXT.match(value)
        ):
            raise self.make_error("invalid", input=value)
        number = super()._validated(value)
        if not -(2**31) <= number < 2**31:
            raise ValidationError("must fit in a 32-bit integer")
        return number


class ProtoBool(fields.Boolean):
    """A bool as ProtoJSON reads it: ``true`` or ``false``, not ``"yes"`` or ``1``."""

    def _deserialize(self, value: t.Any, attr: str | None, data: t.Any, **kw: t.Any) -> bool:
        if not isinstance(value, bool):
            raise self.make_error("invalid", input=value)
        return value


class Base64Bytes(fields.Field):  # type: ignore[type-arg]
    """``bytes`` as base64: standard or URL-safe, padding optional."""

    def _deserialize(self, value: t.Any, attr: str | None, data: t.Any, **kw: t.Any) -> bytes:
        if not isinstance(value, str):
            raise ValidationError("must be a base64 string")
        text = value.replace("-", "+").replace("_", "/")
        text += "=" * (-len(text) % 4)
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValidationError("is not valid base64") from exc


class Storable(validate.Validator):
    """A string every store can hold in a field of ``limit`` characters (``limits.py``)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def __call__(self, value: str) -> str:
        reason = unstorable(value, self.limit)
        if reason is not None:
            raise ValidationError(reason)
        return value


#: A task id a caller names; a context id or push-config id.
_TASK_ID: t.Final = Storable(MAX_TASK_ID)
_KEY: t.Final = Storable(MAX_KEY)
_REQUIRED_TASK_ID: t.Final = [validate.Length(min=1), _TASK_ID]


class Struct(fields.Dict):
    """A ``google.protobuf.Struct``: any JSON object."""


class ProtoSchema(Schema):
    """Accepts camelCase and snake_case names, ignores unknown keys, treats null as unset."""

    #: Fields whose JSON ``null`` is a value, not "unset".
    keep_null: t.ClassVar[frozenset[str]] = frozenset()

    class Meta:
        unknown = EXCLUDE

    @pre_load
    def _normalize(self, data: t.Any, **kw: t.Any) -> t.Any:
        if not isinstance(data, dict):
            raise ValidationError("must be an object")
        out: dict[str, t.Any] = {}
        for key, value in data.items():
            if value is None and key not in self.keep_null:
                continue
            camel = _camel(key) if "_" in key else key
            if camel in out and camel != key:
                continue  # the camelCase spelling wins
            out[camel] = value
        return out


class PartSchema(ProtoSchema):
    keep_null = frozenset({"data"})
    text = fields.String()
    raw = Base64Bytes()
    url = fields.String()
    data = fields.Raw(allow_none=True)
    metadata = Struct()
    filename = fields.String()
    media_type = fields.String(data_key="mediaType")

    @post_load
    def _build(self, data: dict[str, t.Any], **kw: t.Any) -> Part:
        content = [k for k in ("text", "raw", "url", "data") if k in data]
        if len(content) != 1:
            raise ValidationError(
                "a part must hold exactly one of text, raw, url or data"
                + (f"; got {', '.join(content)}" if content else "")
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


class MessageSchema(ProtoSchema):
    message_id = fields.String(data_key="messageId", required=True, validate=validate.Length(min=1))
    context_id = fields.String(data_key="contextId", validate=_KEY)
    task_id = fields.String(data_key="taskId", validate=_TASK_ID)
    role = ProtoEnum(Role, ROLE_NUMBERS, required=True)
    parts = fields.List(fields.Nested(PartSchema), required=True, validate=validate.Length(min=1))
    metadata = Struct()
    extensions = fields.List(fields.String())
    reference_task_ids = fields.List(fields.String(), data_key="referenceTaskIds")

    @post_load
    def _build(self, data: dict[str, t.Any], **kw: t.Any) -> Message:
        if data["role"] is Role.UNSPECIFIED:
            raise ValidationError({"role": ["Missing data for required field."]})
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


#: What ``http.client`` can send as a header value: Latin-1, no control characters (CR, LF,
#: NUL...), no whitespace at either end (``requests`` refuses a leading one).
_HEADER_VALUE = re.compile(
    r"^(?:[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)?\Z"
)
#: An HTTP auth scheme is a token (RFC 9110 §11.1, §5.6.2).
_AUTH_SCHEME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")

#: Push tokens and credentials are sent as header values at every delivery: refuse at
#: registration what could never be sent, instead of failing each delivery.
header_value = validate.Regexp(
    _HEADER_VALUE,
    error="must be sendable as an HTTP header value: Latin-1 characters, no control "
    "characters (CR, LF, NUL...), no whitespace at either end",
)
auth_scheme = validate.Regexp(
    _AUTH_SCHEME, error="must be an HTTP auth scheme such as Bearer (letters, digits, -._~+!...)"
)


class AuthenticationInfoSchema(ProtoSchema):
    scheme = fields.String(required=True, validate=auth_scheme)
    credentials = fields.String(validate=header_value)

    @post_load
    def _build(self, data: dict[str, t.Any], **kw: t.Any) -> AuthenticationInfo:
        return AuthenticationInfo(data["scheme"], data.get("credentials") or None)


class PushConfigSchema(ProtoSchema):
    """A flat TaskPushNotificationConfig; loads to a dict (the task id may still be unknown)."""

    tenant = fields.String()
    id = fields.String(validate=_KEY)
    task_id = fields.String(data_key="taskId", validate=_TASK_ID)
    url = fields.String(required=True, validate=validate.Length(min=1))
    token = fields.String(validate=header_value)
    authentication = fields.Nested(AuthenticationInfoSchema)


class SendMessageConfigurationSchema(ProtoSchema):
    accepted_output_modes = fields.List(fields.String(), data_key="acceptedOutputModes")
    task_push_notification_config = fields.Nested(
        PushConfigSchema, data_key="taskPushNotificationConfig"
    )
    history_length = ProtoInt(data_key="historyLength", validate=validate.Range(min=0))
    return_immediately = ProtoBool(data_key="returnImmediately")


class SendMessageRequestSchema(ProtoSchema):
    tenant = fields.String()
    message = fields.Nested(MessageSchema, required=True)
    configuration = fields.Nested(SendMessageConfigurationSchema)
    metadata = Struct()


class GetTaskRequestSchema(ProtoSchema):
    tenant = fields.String()
    id = fields.String(required=True, validate=_REQUIRED_TASK_ID)
    history_length = ProtoInt(data_key="historyLength", validate=validate.Range(min=0))


class ListTasksRequestSchema(ProtoSchema):
    tenant = fields.String()
    context_id = fields.String(data_key="contextId", validate=_KEY)
    status = ProtoEnum(TaskState, TASK_STATE_NUMBERS)
    page_size = ProtoInt(data_key="pageSize", validate=validate.Range(min=1, max=100))
    page_token = fields.String(data_key="pageToken")
    history_length = ProtoInt(data_key="historyLength", validate=validate.Range(min=0))
    status_timestamp_after = Timestamp(data_key="statusTimestampAfter")
    include_artifacts = ProtoBool(data_key="includeArtifacts")


class CancelTaskRequestSchema(ProtoSchema):
    tenant = fields.String()
    id = fields.String(required=True, validate=_REQUIRED_TASK_ID)
    metadata = Struct()


class SubscribeToTaskRequestSchema(ProtoSchema):
    tenant = fields.String()
    id = fields.String(required=True, validate=_REQUIRED_TASK_ID)


class PushConfigRefSchema(ProtoSchema):
    """Get/DeleteTaskPushNotificationConfigRequest."""

    tenant = fields.String()
    task_id = fields.String(data_key="taskId", required=True, validate=_REQUIRED_TASK_ID)
    id = fields.String(required=True, validate=[validate.Length(min=1), _KEY])


class ListPushConfigsRequestSchema(ProtoSchema):
    tenant = fields.String()
    task_id = fields.String(data_key="taskId", required=True, validate=_REQUIRED_TASK_ID)
    page_size = ProtoInt(data_key="pageSize", validate=validate.Range(min=0, max=100))
    page_token = fields.String(data_key="pageToken")


class GetExtendedAgentCardRequestSchema(ProtoSchema):
    tenant = fields.String()


def _violations(messages: t.Any, prefix: str = "") -> list[tuple[str, str]]:
    """Flatten marshmallow's nested error dict into (field path, description) pairs."""
    if isinstance(messages, dict):
        out: list[tuple[str, str]] = []
        for key, value in messages.items():
            if isinstance(key, int):  # a list item: AIP-193 paths say parts[0].text
                path = f"{prefix}[{key}]"
            else:
                name = _camel(str(key)) if key != "_schema" else ""
                path = ".".join(p for p in (prefix, name) if p)
            out.extend(_violations(value, path))
        return out
    if isinstance(messages, list) and all(isinstance(m, str) for m in messages):
        return [(prefix or "params", " ".join(messages))]
    if isinstance(messages, list):
        return [v for item in messages for v in _violations(item, prefix)]
    return [(prefix or "params", str(messages))]


_S = t.TypeVar("_S", bound=Schema)


@functools.cache
def schema(cls: type[_S]) -> _S:
    """One shared instance per schema class: building one deep-copies every field, per call.

    Loading keeps no state on the instance, so threads and greenlets may share it.
    """
    return cls()


def read(cls: type[Schema], params: t.Any) -> t.Any:
    """``params`` read by the shared instance of schema ``cls`` (:func:`load_params`)."""
    return load_params(schema(cls), params)


def load_params(schema: Schema, params: t.Any) -> t.Any:
    """Validate ``params`` with ``schema``; failures become -32602 with field messages."""
    try:
        return schema.load(params)
    except ValidationError as exc:
        violations = _violations(exc.messages)
        detail = "; ".join(f"{field}: {text}" for field, text in violations)
        raise InvalidParamsError(
            f"Invalid parameters: {detail}", field_violations=violations
        ) from None
