"""A2A v0.3's HTTP+JSON shapes: the ProtoJSON of its ``a2a.proto``, read and written.

v0.3's REST binding carries the proto's JSON, not the JSON-RPC objects of ``v03.py``: a message
holds ``content`` (not ``parts``), a part is ``{text}``, ``{file: {fileWithUri|fileWithBytes,
mimeType, name}}`` or ``{data: {data}}``, states and roles are enum names (``TASK_STATE_CANCELLED``
spelled with two Ls), a send's push config is ``configuration.pushNotification``, and a push
config is ``{name: "tasks/{id}/pushNotificationConfigs/{configId}", pushNotificationConfig}``.
The official v0.3 client reads answers with a strict proto parser, so nothing here writes a key
the v0.3 proto lacks. The model objects are the pivot, as in ``v03.py``.
"""

from __future__ import annotations

import base64
import binascii
import typing as t

from . import v03, wire
from .errors import InvalidParamsError
from .model import (
    UNSET,
    Message,
    Part,
    PushConfig,
    Role,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from .v03 import Spelling, push_config_params

_ROLES_IN: t.Final = {"ROLE_USER": Role.USER, "ROLE_AGENT": Role.AGENT, 1: Role.USER, 2: Role.AGENT}


# --------------------------------------------------------------------------- writing


def dump_part(part: Part) -> dict[str, t.Any]:
    out: dict[str, t.Any]
    if part.text is not None:
        out = {"text": part.text}
    elif part.data is not UNSET:
        out = {"data": {"data": v03.data_object(part)}}
    else:
        out = {"file": v03.file_object(part, "fileWithBytes", "fileWithUri")}
    if part.metadata is not None:
        out["metadata"] = part.metadata
    return out


REST: t.Final = Spelling(
    kinds=False,
    parts="content",
    roles={role: role.value for role in Role},
    states={
        **{state: state.value for state in TaskState},
        TaskState.CANCELED: "TASK_STATE_CANCELLED",
    },
    references=False,
    part=dump_part,
)


def dump_task(task: Task) -> dict[str, t.Any]:
    return v03.dump_task(task, REST)


def dump_event(event: t.Any) -> dict[str, t.Any]:
    """A SendMessageResponse / StreamResponse: ``{task}``, ``{message}``, ``{statusUpdate}``
    (with ``final``) or ``{artifactUpdate}``."""
    if isinstance(event, Task):
        return {"task": dump_task(event)}
    if isinstance(event, Message):
        return {"message": v03.dump_message(event, REST)}
    member = "statusUpdate" if isinstance(event, TaskStatusUpdateEvent) else "artifactUpdate"
    return {member: v03.dump_update(event, REST)}


def dump_push_config(config: PushConfig) -> dict[str, t.Any]:
    return {
        "name": f"tasks/{config.task_id}/pushNotificationConfigs/{config.id}",
        "pushNotificationConfig": v03.push_config_inner(config),
    }


# --------------------------------------------------------------------------- reading


def _invalid(field: str, why: str) -> InvalidParamsError:
    return InvalidParamsError(
        f"Invalid parameters: {field}: {why}", field_violations=[(field, why)]
    )


def _object(value: t.Any, field: str) -> dict[str, t.Any]:
    """A proto message's JSON object, its fields under their JSON names: ProtoJSON readers
    accept the proto's own snake_case names too (``message_id``), so those are renamed here,
    one level deep (a Struct's keys, in ``metadata`` or a data part, are the caller's)."""
    if not isinstance(value, dict):
        raise _invalid(field, "must be an object")
    if not any("_" in key for key in value):
        return value
    out: dict[str, t.Any] = {}
    for key, item in value.items():
        head, *rest = key.split("_")
        camel = head + "".join(word.title() for word in rest)
        if camel not in out or camel == key:  # the JSON name wins
            out[camel] = item
    return out


def _enum(value: t.Any) -> str | int:
    """An enum field's value as ProtoJSON spells it, a name or its number; anything else (a
    list or an object would not even hash, ``true`` would equal 1) as ``""``, no value."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return ""


def _str(data: dict[str, t.Any], key: str, field: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise _invalid(f"{field}.{key}", "must be a string")
    return value or None


def load_part(raw: t.Any, field: str) -> Part:
    data = _object(raw, field)
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _invalid(f"{field}.metadata", "must be an object")
    if isinstance(data.get("text"), str):
        return Part(text=data["text"], metadata=metadata)
    if "data" in data:
        inner = _object(data["data"], f"{field}.data")
        if not isinstance(inner.get("data"), dict):
            raise _invalid(f"{field}.data.data", "must be an object")
        return Part(data=inner["data"], metadata=metadata)
    if "file" in data:
        file = _object(data["file"], f"{field}.file")
        name = _str(file, "name", f"{field}.file")
        mime = _str(file, "mimeType", f"{field}.file")
        # A proto3 string's default ("") is unset: only one member of the oneof has a value.
        has_bytes, has_uri = bool(file.get("fileWithBytes")), bool(file.get("fileWithUri"))
        if has_bytes and not has_uri and isinstance(file["fileWithBytes"], str):
            try:
                content = base64.b64decode(file["fileWithBytes"], validate=True)
            except (binascii.Error, ValueError):
                raise _invalid(f"{field}.file.fileWithBytes", "must be base64") from None
            return Part(raw=content, filename=name, media_type=mime, metadata=metadata)
        if has_uri and not has_bytes and isinstance(file["fileWithUri"], str):
            return Part(url=file["fileWithUri"], filename=name, media_type=mime, metadata=metadata)
        raise _invalid(f"{field}.file", "must hold exactly one of fileWithBytes or fileWithUri")
    raise _invalid(field, "must hold one of text, file, data")


def load_message(raw: t.Any, field: str = "message") -> Message:
    data = _object(raw, field)
    message_id = data.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        raise _invalid(f"{field}.messageId", "must be a non-empty string")
    role = _ROLES_IN.get(_enum(data.get("role")))
    if role is None:
        raise _invalid(f"{field}.role", "must be ROLE_USER or ROLE_AGENT")
    content = data.get("content", [])
    if not isinstance(content, list):
        raise _invalid(f"{field}.content", "must be an array")
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _invalid(f"{field}.metadata", "must be an object")
    extensions = data.get("extensions") or []
    if not isinstance(extensions, list) or not all(isinstance(e, str) for e in extensions):
        raise _invalid(f"{field}.extensions", "must be an array of strings")
    return Message(
        message_id=message_id,
        role=role,
        parts=tuple(load_part(p, f"{field}.content[{i}]") for i, p in enumerate(content)),
        context_id=_str(data, "contextId", field),
        task_id=_str(data, "taskId", field),
        metadata=metadata,
        extensions=tuple(extensions),
    )


def send_params(body: dict[str, t.Any]) -> dict[str, t.Any]:
    """A v0.3 ``SendMessageRequest`` body as v1.0 ``SendMessageRequest`` params."""
    body = _object(body, "body")
    raw = body.get("message", body.get("request"))
    out: dict[str, t.Any] = {"message": wire.dump_message(load_message(raw))}
    if body.get("metadata") is not None:
        out["metadata"] = body["metadata"]
    if body.get("configuration") is not None:
        config = _object(body["configuration"], "configuration")
        v1: dict[str, t.Any] = {}
        for key in ("acceptedOutputModes", "historyLength"):
            if config.get(key) is not None:
                v1[key] = config[key]
        # A proto3 bool: absent is false, so a configuration without ``blocking`` does not
        # block (as the a2a-sdk 0.3 server reads it); no configuration at all blocks.
        blocking = config.get("blocking", False)
        if not isinstance(blocking, bool):
            raise _invalid("configuration.blocking", "must be a boolean")
        v1["returnImmediately"] = not blocking
        if config.get("pushNotification") is not None:
            v1["taskPushNotificationConfig"] = push_config_params(
                config["pushNotification"], "configuration.pushNotification"
            )
        out["configuration"] = v1
    return out


def create_push_params(body: dict[str, t.Any], task_id: str) -> dict[str, t.Any]:
    """A ``CreateTaskPushNotificationConfigRequest`` body (``{parent, configId, config:
    {name, pushNotificationConfig}}``; a bare TaskPushNotificationConfig is read too) as the
    flat v1.0 config params for ``task_id``."""
    body = _object(body, "body")
    config = _object(body.get("config", body), "config")
    params = push_config_params(
        config.get("pushNotificationConfig"), "config.pushNotificationConfig", task_id
    )
    config_id = body.get("configId")
    if "id" not in params:
        params["id"] = config_id if isinstance(config_id, str) and config_id else task_id
    return params
