"""SendMessage params on the hot path: a direct reader for the common, plainly valid shape.

``schemas.SendMessageRequestSchema`` is the validator, a general reader field by field. This one
is the echo path's shortcut: it accepts only a strict subset of what the schema accepts
(camelCase keys, no nulls, no raw bytes, no push config, the usual types) and builds exactly the
same result. Anything outside that subset — including every invalid request — goes to the schema,
so refusals and their field messages have one source. ``tests/protocol/test_wire.py`` checks
both agree.
"""

from __future__ import annotations

import typing as t

from . import schemas
from .limits import MAX_KEY, MAX_TASK_ID
from .model import UNSET, Message, Part, Role

_ROLES: t.Final = {"ROLE_USER": Role.USER, "ROLE_AGENT": Role.AGENT}
_PART_KEYS: t.Final = frozenset({"text", "url", "data", "metadata", "filename", "mediaType"})
_MESSAGE_KEYS: t.Final = frozenset(
    {
        "messageId",
        "role",
        "parts",
        "contextId",
        "taskId",
        "metadata",
        "extensions",
        "referenceTaskIds",
    }
)
_CONFIG_KEYS: t.Final = frozenset({"returnImmediately", "historyLength", "acceptedOutputModes"})
_PARAM_KEYS: t.Final = frozenset({"message", "configuration", "metadata", "tenant"})


class _Slow(Exception):
    """Not the plain shape: let the schema read it."""


def _str(value: t.Any) -> str:
    if type(value) is not str:
        raise _Slow
    return value


def _key(value: t.Any, limit: int) -> str:
    """An id bound for a store column: over its length or holding a NUL, the schema says why."""
    if type(value) is not str or len(value) > limit or "\x00" in value:
        raise _Slow
    return value


def _strings(value: t.Any) -> list[str]:
    if type(value) is not list or any(type(v) is not str for v in value):
        raise _Slow
    return value


def _struct(value: t.Any) -> dict[str, t.Any]:
    if type(value) is not dict:
        raise _Slow
    return value


def _part(raw: t.Any) -> Part:
    if type(raw) is not dict or not raw.keys() <= _PART_KEYS:
        raise _Slow
    content = ("text" in raw) + ("url" in raw) + ("data" in raw)
    if content != 1 or any(v is None for k, v in raw.items() if k != "data"):
        raise _Slow
    metadata = raw.get("metadata")
    return Part(
        text=_str(raw["text"]) if "text" in raw else None,
        url=_str(raw["url"]) if "url" in raw else None,
        data=raw["data"] if "data" in raw else UNSET,
        metadata=_struct(metadata) if metadata is not None else None,
        filename=_str(raw["filename"]) or None if "filename" in raw else None,
        media_type=_str(raw["mediaType"]) or None if "mediaType" in raw else None,
    )


def _message(raw: t.Any) -> Message:
    if type(raw) is not dict or not raw.keys() <= _MESSAGE_KEYS:
        raise _Slow
    if any(v is None for v in raw.values()):
        raise _Slow
    role = _ROLES.get(_str(raw.get("role")))
    message_id = raw.get("messageId")
    parts = raw.get("parts")
    if role is None or type(message_id) is not str or not message_id:
        raise _Slow
    if type(parts) is not list or not parts:
        raise _Slow
    metadata = raw.get("metadata")
    return Message(
        message_id=message_id,
        role=role,
        parts=tuple(_part(p) for p in parts),
        context_id=_key(raw["contextId"], MAX_KEY) or None if "contextId" in raw else None,
        task_id=_key(raw["taskId"], MAX_TASK_ID) or None if "taskId" in raw else None,
        metadata=_struct(metadata) if metadata is not None else None,
        extensions=tuple(_strings(raw["extensions"])) if "extensions" in raw else (),
        reference_task_ids=(
            tuple(_strings(raw["referenceTaskIds"])) if "referenceTaskIds" in raw else ()
        ),
    )


def _configuration(raw: t.Any) -> dict[str, t.Any]:
    if type(raw) is not dict or not raw.keys() <= _CONFIG_KEYS:
        raise _Slow
    out: dict[str, t.Any] = {}
    if "returnImmediately" in raw:
        if type(raw["returnImmediately"]) is not bool:
            raise _Slow
        out["return_immediately"] = raw["returnImmediately"]
    if "historyLength" in raw:
        value = raw["historyLength"]
        if type(value) is not int or not 0 <= value <= 2**31 - 1:
            raise _Slow
        out["history_length"] = value
    if "acceptedOutputModes" in raw:
        out["accepted_output_modes"] = list(_strings(raw["acceptedOutputModes"]))
    return out


def read_send_params(params: dict[str, t.Any]) -> dict[str, t.Any]:
    """SendMessageRequest params as the schema would load them (-32602 when invalid)."""
    try:
        if not params.keys() <= _PARAM_KEYS or any(v is None for v in params.values()):
            raise _Slow
        out: dict[str, t.Any] = {"message": _message(params.get("message"))}
        if "configuration" in params:
            out["configuration"] = _configuration(params["configuration"])
        if "metadata" in params:
            out["metadata"] = _struct(params["metadata"])
        if "tenant" in params:
            out["tenant"] = _str(params["tenant"])
        return out
    except _Slow:
        return t.cast(
            dict[str, t.Any],
            schemas.read(schemas.SendMessageRequestSchema, params),
        )
