"""A2A v0.3 shapes: its JSON read into the model's objects, and the model's objects written as it.

v0.3 (tag ``v0.3.0`` of the A2A repository, ``specification/json/a2a.json``) carries the same
task as v1.0 in other clothes: a ``kind`` on every object (``task``, ``message``,
``status-update``, ``artifact-update``; ``text``, ``file``, ``data`` on parts), lower-case kebab
states (``input-required``), ``user``/``agent`` roles, a file part that nests ``{bytes|uri,
mimeType, name}``, a data part that holds an object, a push config nested in
``{taskId, pushNotificationConfig}`` with ``authentication.schemes``, and a ``final`` flag on
status updates. Nothing here knows the exchange: the v0.3 binding (``bindings/v03.py``) reads a
request with these functions, hands the exchange the v1.0 params, and writes its answer back.
"""

from __future__ import annotations

import base64
import binascii
import json
import typing as t

from . import wire
from .errors import InvalidParamsError
from .model import (
    UNSET,
    Artifact,
    AuthenticationInfo,
    Message,
    Part,
    PushConfig,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    utcnow,
)
from .wire import format_timestamp

#: What the card says a v0.3 interface speaks (``AgentCard.protocolVersion``).
PROTOCOL_VERSION: t.Final = "0.3.0"

STATES: t.Final[dict[TaskState, str]] = {
    TaskState.UNSPECIFIED: "unknown",
    TaskState.SUBMITTED: "submitted",
    TaskState.WORKING: "working",
    TaskState.COMPLETED: "completed",
    TaskState.FAILED: "failed",
    TaskState.CANCELED: "canceled",
    TaskState.INPUT_REQUIRED: "input-required",
    TaskState.REJECTED: "rejected",
    TaskState.AUTH_REQUIRED: "auth-required",
}
ROLES: t.Final[dict[Role, str]] = {Role.USER: "user", Role.AGENT: "agent"}
_STATES_IN: t.Final = {name: state for state, name in STATES.items()}
_ROLES_IN: t.Final = {"user": Role.USER, "agent": Role.AGENT}


# --------------------------------------------------------------------------- writing


def data_object(part: Part) -> dict[str, t.Any]:
    """A v0.3 data part holds an object; any other JSON value travels as ``{"value": ...}``."""
    return part.data if isinstance(part.data, dict) else {"value": part.data}


def file_object(part: Part, bytes_key: str, uri_key: str) -> dict[str, t.Any]:
    """A raw or url part as a v0.3 file (the JSON-RPC and REST shapes name the content apart)."""
    file: dict[str, t.Any] = (
        {bytes_key: base64.b64encode(part.raw).decode("ascii")}
        if part.raw is not None
        else {uri_key: part.url}
    )
    if part.media_type:
        file["mimeType"] = part.media_type
    if part.filename:
        file["name"] = part.filename
    return file


def dump_part(part: Part) -> dict[str, t.Any]:
    out: dict[str, t.Any]
    if part.text is not None:
        out = {"kind": "text", "text": part.text}
    elif part.data is not UNSET:
        out = {"kind": "data", "data": data_object(part)}
    else:
        out = {"kind": "file", "file": file_object(part, "bytes", "uri")}
    if part.metadata is not None:
        out["metadata"] = part.metadata
    return out


class Spelling(t.NamedTuple):
    """How a v0.3 binding spells what both write: JSON-RPC's objects (``kind`` tags, kebab
    states, ``user``) or HTTP+JSON's proto JSON (``v03_rest.py``: enum names, ``content``)."""

    kinds: bool
    #: The key of a message's parts.
    parts: str
    roles: t.Mapping[Role, str]
    states: t.Mapping[TaskState, str]
    #: Whether a message carries ``referenceTaskIds`` (the v0.3 proto has no such field).
    references: bool
    part: t.Callable[[Part], dict[str, t.Any]]


JSONRPC: t.Final = Spelling(True, "parts", ROLES, STATES, True, dump_part)


def dump_message(message: Message, spelling: Spelling = JSONRPC) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {"kind": "message"} if spelling.kinds else {}
    out["messageId"] = message.message_id
    out["role"] = spelling.roles.get(message.role, "agent")
    out[spelling.parts] = [spelling.part(p) for p in message.parts]
    if message.context_id:
        out["contextId"] = message.context_id
    if message.task_id:
        out["taskId"] = message.task_id
    if message.metadata is not None:
        out["metadata"] = message.metadata
    if message.extensions:
        out["extensions"] = list(message.extensions)
    if spelling.references and message.reference_task_ids:
        out["referenceTaskIds"] = list(message.reference_task_ids)
    return out


def dump_artifact(artifact: Artifact, spelling: Spelling = JSONRPC) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {
        "artifactId": artifact.artifact_id,
        "parts": [spelling.part(p) for p in artifact.parts],
    }
    if artifact.name:
        out["name"] = artifact.name
    if artifact.description:
        out["description"] = artifact.description
    if artifact.metadata is not None:
        out["metadata"] = artifact.metadata
    if artifact.extensions:
        out["extensions"] = list(artifact.extensions)
    return out


def dump_status(status: TaskStatus, spelling: Spelling = JSONRPC) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {"state": spelling.states[status.state]}
    if status.message is not None:
        out["message"] = dump_message(status.message, spelling)
    out["timestamp"] = format_timestamp(status.timestamp)
    return out


def dump_task(task: Task, spelling: Spelling = JSONRPC) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {"kind": "task"} if spelling.kinds else {}
    out["id"] = task.id
    out["contextId"] = task.context_id
    out["status"] = dump_status(task.status, spelling)
    if task.artifacts:
        out["artifacts"] = [dump_artifact(a, spelling) for a in task.artifacts]
    if task.history:
        out["history"] = [dump_message(m, spelling) for m in task.history]
    if task.metadata is not None:
        out["metadata"] = task.metadata
    return out


def task_json(task: Task) -> str:
    """The task as v0.3 JSON text (a webhook's body for a config registered over v0.3)."""
    return json.dumps(dump_task(task), separators=(",", ":"), ensure_ascii=False)


def dump_update(
    event: TaskStatusUpdateEvent | TaskArtifactUpdateEvent, spelling: Spelling = JSONRPC
) -> dict[str, t.Any]:
    """A status or artifact update's fields (its ``kind``, or its StreamResponse member, is
    the caller's)."""
    out: dict[str, t.Any] = {"taskId": event.task_id, "contextId": event.context_id}
    if isinstance(event, TaskStatusUpdateEvent):
        state = event.status.state
        out["status"] = dump_status(event.status, spelling)
        # v1.0 dropped the flag: a stream ends at a terminal or paused state.
        out["final"] = state.terminal or state.interrupted
    else:
        out["artifact"] = dump_artifact(event.artifact, spelling)
        if event.append:
            out["append"] = True
        if event.last_chunk:
            out["lastChunk"] = True
    if event.metadata is not None:
        out["metadata"] = event.metadata
    return out


def dump_event(event: t.Any) -> dict[str, t.Any]:
    """One stream event (a Task, a Message, or an update) as its v0.3 object."""
    if isinstance(event, Task):
        return dump_task(event)
    if isinstance(event, Message):
        return dump_message(event)
    kind = "status-update" if isinstance(event, TaskStatusUpdateEvent) else "artifact-update"
    return {"kind": kind, **dump_update(event)}


def push_config_inner(config: PushConfig) -> dict[str, t.Any]:
    """A PushNotificationConfig (``{id, url, token, authentication: {schemes}}``)."""
    return _push_inner(wire.dump_push_config(config))


def dump_push_config(config: PushConfig) -> dict[str, t.Any]:
    """A TaskPushNotificationConfig: ``{taskId, pushNotificationConfig}``."""
    return {"taskId": config.task_id, "pushNotificationConfig": push_config_inner(config)}


# --------------------------------------------------------------------------- reading
# Reading turns v0.3 params into the v1.0 params the exchange reads (which checks what both
# versions share: limits, ids, URLs). A shape only v0.3 has is checked here, as -32602.


def _invalid(field: str, why: str) -> InvalidParamsError:
    return InvalidParamsError(
        f"Invalid parameters: {field}: {why}", field_violations=[(field, why)]
    )


def _object(value: t.Any, field: str) -> dict[str, t.Any]:
    if not isinstance(value, dict):
        raise _invalid(field, "must be an object")
    return value


def _optional_str(data: dict[str, t.Any], key: str, field: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise _invalid(f"{field}.{key}", "must be a string")
    return value


def load_part(raw: t.Any, field: str) -> Part:
    data = _object(raw, field)
    kind = data.get("kind")
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _invalid(f"{field}.metadata", "must be an object")
    if kind == "text":
        text = data.get("text")
        if not isinstance(text, str):
            raise _invalid(f"{field}.text", "must be a string")
        return Part(text=text, metadata=metadata)
    if kind == "data":
        if not isinstance(data.get("data"), dict):
            raise _invalid(f"{field}.data", "must be an object")
        return Part(data=data["data"], metadata=metadata)
    if kind == "file":
        file = _object(data.get("file"), f"{field}.file")
        name = _optional_str(file, "name", f"{field}.file")
        mime = _optional_str(file, "mimeType", f"{field}.file")
        if isinstance(file.get("bytes"), str) and "uri" not in file:
            try:
                raw_bytes = base64.b64decode(file["bytes"], validate=True)
            except (binascii.Error, ValueError):
                raise _invalid(f"{field}.file.bytes", "must be base64") from None
            return Part(raw=raw_bytes, filename=name, media_type=mime, metadata=metadata)
        if isinstance(file.get("uri"), str) and "bytes" not in file:
            return Part(url=file["uri"], filename=name, media_type=mime, metadata=metadata)
        raise _invalid(f"{field}.file", "must hold exactly one of bytes or uri")
    raise _invalid(f"{field}.kind", "must be one of text, file, data")


def load_message(raw: t.Any, field: str = "message") -> Message:
    data = _object(raw, field)
    if data.get("kind", "message") != "message":
        raise _invalid(f"{field}.kind", "must be message")
    message_id = data.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        raise _invalid(f"{field}.messageId", "must be a non-empty string")
    role = data.get("role")  # a list or an object would not even hash: no name
    role = _ROLES_IN.get(role) if isinstance(role, str) else None
    if role is None:
        raise _invalid(f"{field}.role", "must be user or agent")
    parts = data.get("parts")
    if not isinstance(parts, list):
        raise _invalid(f"{field}.parts", "must be an array")
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _invalid(f"{field}.metadata", "must be an object")
    extensions = data.get("extensions") or []
    references = data.get("referenceTaskIds") or []
    for key, values in (("extensions", extensions), ("referenceTaskIds", references)):
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise _invalid(f"{field}.{key}", "must be an array of strings")
    return Message(
        message_id=message_id,
        role=role,
        parts=tuple(load_part(p, f"{field}.parts[{i}]") for i, p in enumerate(parts)),
        context_id=_optional_str(data, "contextId", field),
        task_id=_optional_str(data, "taskId", field),
        metadata=metadata,
        extensions=tuple(extensions),
        reference_task_ids=tuple(references),
    )


def push_config_params(raw: t.Any, field: str, task_id: t.Any = None) -> dict[str, t.Any]:
    """A v0.3 PushNotificationConfig as the flat v1.0 config params (``taskId`` added)."""
    data = _object(raw, field)
    out: dict[str, t.Any] = {"url": data.get("url")}
    for key in ("id", "token"):
        if data.get(key) is not None:
            out[key] = data[key]
    if task_id is not None:
        out["taskId"] = task_id
    auth = data.get("authentication")
    if isinstance(auth, dict) and not auth.get("schemes") and not auth.get("credentials"):
        auth = None  # an empty AuthenticationInfo (proto3 defaults) asks for nothing
    if auth is not None:
        auth = _object(auth, f"{field}.authentication")
        schemes = auth.get("schemes")
        if not isinstance(schemes, list) or not schemes or not isinstance(schemes[0], str):
            raise _invalid(f"{field}.authentication.schemes", "must be a non-empty array")
        # v1.0 keeps one scheme: the first is the one the Authorization header names.
        out["authentication"] = {"scheme": schemes[0]}
        if auth.get("credentials") is not None:
            out["authentication"]["credentials"] = auth["credentials"]
    return out


def send_params(params: dict[str, t.Any]) -> dict[str, t.Any]:
    """``MessageSendParams`` as v1.0 ``SendMessageRequest`` params."""
    out: dict[str, t.Any] = {"message": wire.dump_message(load_message(params.get("message")))}
    if params.get("metadata") is not None:
        out["metadata"] = params["metadata"]
    raw = params.get("configuration")
    if raw is not None:
        config = _object(raw, "configuration")
        v1: dict[str, t.Any] = {}
        if config.get("acceptedOutputModes") is not None:
            v1["acceptedOutputModes"] = config["acceptedOutputModes"]
        if config.get("historyLength") is not None:
            v1["historyLength"] = config["historyLength"]
        if config.get("blocking") is not None:
            if not isinstance(config["blocking"], bool):
                raise _invalid("configuration.blocking", "must be a boolean")
            v1["returnImmediately"] = not config["blocking"]
        if config.get("pushNotificationConfig") is not None:
            v1["taskPushNotificationConfig"] = push_config_params(
                config["pushNotificationConfig"], "configuration.pushNotificationConfig"
            )
        out["configuration"] = v1
    return out


def task_id_param(params: dict[str, t.Any]) -> t.Any:
    """The ``id`` of TaskIdParams / TaskQueryParams (the v1.0 schema checks it)."""
    return params.get("id")


# ----------------------------------------------------------- reading answers (the client)
# A v0.3 server's answers read back into the model's objects, for a client speaking v0.3 to
# an agent that serves nothing newer (``client/v03.py``). A shape this module cannot read is
# -32602 as for params (the client raises it as the server's fault).


def load_status(raw: t.Any, field: str = "status") -> TaskStatus:
    data = _object(raw, field)
    state = data.get("state")
    state = _STATES_IN.get(state) if isinstance(state, str) else None
    if state is None:
        raise _invalid(f"{field}.state", "is no v0.3 task state")
    stamp = data.get("timestamp")
    message = data.get("message")
    return TaskStatus(
        state,
        wire.parse_timestamp(stamp) if isinstance(stamp, str) else utcnow(),
        load_message(message, f"{field}.message") if message is not None else None,
    )


def load_artifact(raw: t.Any, field: str = "artifact") -> Artifact:
    data = _object(raw, field)
    parts = data.get("parts") or []
    if not isinstance(parts, list):
        raise _invalid(f"{field}.parts", "must be an array")
    return Artifact(
        artifact_id=str(data.get("artifactId") or ""),
        parts=tuple(load_part(p, f"{field}.parts[{i}]") for i, p in enumerate(parts)),
        name=_optional_str(data, "name", field),
        description=_optional_str(data, "description", field),
        metadata=data.get("metadata") if isinstance(data.get("metadata"), dict) else None,
        extensions=tuple(e for e in data.get("extensions") or () if isinstance(e, str)),
    )


def load_task(raw: t.Any, field: str = "task") -> Task:
    data = _object(raw, field)
    if not isinstance(data.get("id"), str):
        raise _invalid(f"{field}.id", "must be a string")
    artifacts = data.get("artifacts") or []
    history = data.get("history") or []
    return Task(
        id=data["id"],
        context_id=str(data.get("contextId") or ""),
        status=load_status(data.get("status"), f"{field}.status"),
        artifacts=tuple(
            load_artifact(a, f"{field}.artifacts[{i}]") for i, a in enumerate(artifacts)
        ),
        history=tuple(load_message(m, f"{field}.history[{i}]") for i, m in enumerate(history)),
        metadata=data.get("metadata") if isinstance(data.get("metadata"), dict) else None,
    )


def load_event(raw: t.Any) -> t.Any:
    """A v0.3 result or stream event (by its ``kind``) as its model object."""
    data = _object(raw, "result")
    kind = data.get("kind")
    if kind == "task":
        return load_task(data)
    if kind == "message":
        return load_message(data, "result")
    if kind == "status-update":
        return TaskStatusUpdateEvent(
            str(data.get("taskId") or ""),
            str(data.get("contextId") or ""),
            load_status(data.get("status")),
            data.get("metadata") if isinstance(data.get("metadata"), dict) else None,
        )
    if kind == "artifact-update":
        return TaskArtifactUpdateEvent(
            str(data.get("taskId") or ""),
            str(data.get("contextId") or ""),
            load_artifact(data.get("artifact")),
            bool(data.get("append")),
            bool(data.get("lastChunk")),
            data.get("metadata") if isinstance(data.get("metadata"), dict) else None,
        )
    raise _invalid("result.kind", "is no v0.3 result kind")


def load_push_config(raw: t.Any) -> PushConfig:
    """A v0.3 TaskPushNotificationConfig (``{taskId, pushNotificationConfig}``)."""
    data = _object(raw, "result")
    flat = push_config_params(data.get("pushNotificationConfig"), "pushNotificationConfig")
    auth = flat.get("authentication")
    return PushConfig(
        id=str(flat.get("id") or ""),
        task_id=str(data.get("taskId") or ""),
        url=str(flat.get("url") or ""),
        token=flat.get("token"),
        authentication=AuthenticationInfo(auth["scheme"], auth.get("credentials"))
        if auth
        else None,
    )


def request_params(method: str, params: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """A v1.0 method's params (``A2AClient``'s) as the v0.3 method's (see :data:`METHODS`)."""
    if method in ("SendMessage", "SendStreamingMessage"):
        out: dict[str, t.Any] = {
            "message": dump_message(wire.message_from_wire(params["message"])),
        }
        if params.get("metadata") is not None:
            out["metadata"] = params["metadata"]
        v1 = params.get("configuration") or {}
        config: dict[str, t.Any] = {}
        for key in ("historyLength", "acceptedOutputModes"):
            if key in v1:
                config[key] = v1[key]
        if "returnImmediately" in v1:
            config["blocking"] = not v1["returnImmediately"]
        inline = v1.get("taskPushNotificationConfig")
        if inline is not None:
            config["pushNotificationConfig"] = _push_inner(inline)
        if config:
            out["configuration"] = config
        return out
    if method == "CreateTaskPushNotificationConfig":
        return {"taskId": params.get("taskId"), "pushNotificationConfig": _push_inner(params)}
    if method in ("GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"):
        return {"id": params.get("taskId"), "pushNotificationConfigId": params.get("id")}
    if method == "ListTaskPushNotificationConfigs":
        return {"id": params.get("taskId")}
    return {k: v for k, v in params.items() if k in ("id", "historyLength", "metadata")}


def _push_inner(flat: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    inner = {k: flat[k] for k in ("id", "url", "token") if flat.get(k) is not None}
    auth = flat.get("authentication")
    if auth:
        inner["authentication"] = {"schemes": [auth["scheme"]]}
        if auth.get("credentials"):
            inner["authentication"]["credentials"] = auth["credentials"]
    return inner


#: A v1.0 method -> the v0.3 method that does the same (ListTasks has none in v0.3).
METHODS: t.Final = {
    "SendMessage": "message/send",
    "SendStreamingMessage": "message/stream",
    "GetTask": "tasks/get",
    "CancelTask": "tasks/cancel",
    "SubscribeToTask": "tasks/resubscribe",
    "CreateTaskPushNotificationConfig": "tasks/pushNotificationConfig/set",
    "GetTaskPushNotificationConfig": "tasks/pushNotificationConfig/get",
    "ListTaskPushNotificationConfigs": "tasks/pushNotificationConfig/list",
    "DeleteTaskPushNotificationConfig": "tasks/pushNotificationConfig/delete",
    "GetExtendedAgentCard": "agent/getAuthenticatedExtendedCard",
}


def v1_result(method: str, result: t.Any) -> t.Any:
    """A v0.3 method's result as the v1.0 method's (the JSON ``A2AClient`` reads)."""
    if method == "SendMessage":
        return wire.dump_event(load_event(result))
    if method in ("GetTask", "CancelTask"):
        return wire.dump_task(load_task(result))
    if method in ("CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig"):
        return wire.dump_push_config(load_push_config(result))
    if method == "ListTaskPushNotificationConfigs":
        configs = result if isinstance(result, list) else []
        return {"configs": [wire.dump_push_config(load_push_config(c)) for c in configs]}
    return result
