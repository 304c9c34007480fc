"""ProtoJSON for A2A v1.0: the renderers that write results, and the readers of our own JSON.

Writing is written by hand because it is the hot path: camelCase only, no keys outside the proto,
empty lists and unset fields left out, timestamps as RFC 3339 UTC with milliseconds and ``Z``.
Reading what we wrote (stored tasks and configs) trusts its shape. A caller's params are read by
the readers of :mod:`.schemas`.
"""

from __future__ import annotations

import base64
import re
import typing as t
from datetime import datetime, timezone

from .jsonrpc import encode
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
)

# --------------------------------------------------------------------------- writing


def format_timestamp(value: datetime) -> str:
    """RFC 3339 in UTC with millisecond precision and ``Z``."""
    if value.tzinfo is not timezone.utc:
        value = value.astimezone(timezone.utc)
    # isoformat zero-pads the year (strftime's %Y does not below 1000) and is faster.
    return value.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def dump_part(part: Part) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {}
    if part.text is not None:
        out["text"] = part.text
    elif part.raw is not None:
        out["raw"] = base64.b64encode(part.raw).decode("ascii")
    elif part.url is not None:
        out["url"] = part.url
    else:
        out["data"] = part.data
    if part.metadata is not None:
        out["metadata"] = part.metadata
    if part.filename:
        out["filename"] = part.filename
    if part.media_type:
        out["mediaType"] = part.media_type
    return out


def dump_message(message: Message) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {
        "messageId": message.message_id,
        "role": message.role._value_,  # Enum's own attribute: ``.value`` is a property
        "parts": [dump_part(p) for p in message.parts],
    }
    if message.context_id:
        out["contextId"] = message.context_id
    if message.task_id:
        out["taskId"] = message.task_id
    if message.metadata is not None:
        out["metadata"] = message.metadata
    if message.extensions:
        out["extensions"] = list(message.extensions)
    if message.reference_task_ids:
        out["referenceTaskIds"] = list(message.reference_task_ids)
    return out


def dump_artifact(artifact: Artifact) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {"artifactId": artifact.artifact_id}
    if artifact.name:
        out["name"] = artifact.name
    if artifact.description:
        out["description"] = artifact.description
    # Required on the wire: missing parts normalize to an empty array.
    out["parts"] = [dump_part(p) for p in artifact.parts]
    if artifact.metadata is not None:
        out["metadata"] = artifact.metadata
    if artifact.extensions:
        out["extensions"] = list(artifact.extensions)
    return out


def dump_status(status: TaskStatus) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {"state": status.state._value_}  # see dump_message
    if status.message is not None:
        out["message"] = dump_message(status.message)
    out["timestamp"] = format_timestamp(status.timestamp)
    return out


def dump_task(
    task: Task, *, history_length: int | None = None, include_artifacts: bool = True
) -> dict[str, t.Any]:
    """A Task; ``history_length`` None = all, 0 = none, N = the newest N messages."""
    out: dict[str, t.Any] = {
        "id": task.id,
        "contextId": task.context_id,
        "status": dump_status(task.status),
    }
    if include_artifacts and task.artifacts:
        out["artifacts"] = [dump_artifact(a) for a in task.artifacts]
    history = task.history
    if history_length is not None:
        history = history[-history_length:] if history_length > 0 else ()
    if history:
        out["history"] = [dump_message(m) for m in history]
    if task.metadata is not None:
        out["metadata"] = task.metadata
    return out


def task_json(task: Task) -> str:
    """The whole task as JSON (``dump_task``), encoded once per Task object: tasks are
    immutable, so the store's write and the answer about the same task share one encoding.
    Raises what ``json.dumps`` raises for data JSON cannot hold."""
    cached = task._json
    if cached is None:
        cached = encode(dump_task(task))
        object.__setattr__(task, "_json", cached)  # a cache, not a change: frozen otherwise
    return cached


def task_event_json(task: Task) -> str:
    """The StreamResponse ``{"task": ...}`` holding the whole task, from its one encoding."""
    return '{"task":' + task_json(task) + "}"


def dump_event(
    event: Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent,
) -> dict[str, t.Any]:
    """A StreamResponse: an object with exactly one of its four members."""
    if isinstance(event, Task):
        return {"task": dump_task(event)}
    if isinstance(event, Message):
        return {"message": dump_message(event)}
    if isinstance(event, TaskStatusUpdateEvent):
        status: dict[str, t.Any] = {
            "taskId": event.task_id,
            "contextId": event.context_id,
            "status": dump_status(event.status),
        }
        if event.metadata is not None:
            status["metadata"] = event.metadata
        return {"statusUpdate": status}
    update: dict[str, t.Any] = {
        "taskId": event.task_id,
        "contextId": event.context_id,
        "artifact": dump_artifact(event.artifact),
    }
    if event.append:
        update["append"] = True
    if event.last_chunk:
        update["lastChunk"] = True
    if event.metadata is not None:
        update["metadata"] = event.metadata
    return {"artifactUpdate": update}


def dump_stored_push_config(config: PushConfig) -> dict[str, t.Any]:
    """A push config as a store keeps it: its wire form, and the version it was registered
    over when not 1.0 (``push_config_from_wire`` reads it back)."""
    out = dump_push_config(config)
    if config.protocol_version != "1.0":
        out["protocolVersion"] = config.protocol_version
    return out


def dump_push_config(config: PushConfig) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {"id": config.id, "taskId": config.task_id, "url": config.url}
    if config.tenant:
        out["tenant"] = config.tenant
    if config.token:
        out["token"] = config.token
    if config.authentication is not None:
        auth: dict[str, t.Any] = {"scheme": config.authentication.scheme}
        if config.authentication.credentials:
            auth["credentials"] = config.authentication.credentials
        out["authentication"] = auth
    return out


# ------------------------------------------------------------------------- timestamps

_TIMESTAMP = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$"
)


def parse_timestamp(value: str) -> datetime:
    """RFC 3339 with any offset (normalized to UTC) and 0-9 fractional digits."""
    match = _TIMESTAMP.match(value)
    if match is None:
        raise ValueError("not an RFC 3339 timestamp")
    date, time, fraction, offset = match.groups()
    micros = (fraction or "").ljust(6, "0")[:6]
    offset = "+00:00" if offset in ("Z", "z") else offset
    try:
        return datetime.fromisoformat(f"{date}T{time}.{micros}{offset}").astimezone(timezone.utc)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise ValueError("timestamp is out of range in UTC") from None


# ------------------------------------------------- trusted reading (our own stored JSON)


def part_from_wire(data: dict[str, t.Any]) -> Part:
    raw = data.get("raw")
    return Part(
        text=data.get("text"),
        raw=base64.b64decode(raw) if raw is not None else None,
        url=data.get("url"),
        data=data["data"] if "data" in data else UNSET,
        metadata=data.get("metadata"),
        filename=data.get("filename"),
        media_type=data.get("mediaType"),
    )


def message_from_wire(data: dict[str, t.Any]) -> Message:
    return Message(
        message_id=data["messageId"],
        role=Role(data["role"]),
        parts=tuple(part_from_wire(p) for p in data.get("parts", ())),
        context_id=data.get("contextId"),
        task_id=data.get("taskId"),
        metadata=data.get("metadata"),
        extensions=tuple(data.get("extensions", ())),
        reference_task_ids=tuple(data.get("referenceTaskIds", ())),
    )


def artifact_from_wire(data: dict[str, t.Any]) -> Artifact:
    return Artifact(
        artifact_id=data["artifactId"],
        parts=tuple(part_from_wire(p) for p in data.get("parts") or ()),
        name=data.get("name"),
        description=data.get("description"),
        metadata=data.get("metadata"),
        extensions=tuple(data.get("extensions", ())),
    )


def status_from_wire(data: dict[str, t.Any]) -> TaskStatus:
    message = data.get("message")
    return TaskStatus(
        state=TaskState(data["state"]),
        timestamp=parse_timestamp(data["timestamp"]),
        message=message_from_wire(message) if message else None,
    )


def task_from_wire(data: dict[str, t.Any]) -> Task:
    """A Task from ProtoJSON this library wrote (stores, the client)."""
    return Task(
        id=data["id"],
        context_id=data.get("contextId", ""),
        status=status_from_wire(data["status"]),
        artifacts=tuple(artifact_from_wire(a) for a in data.get("artifacts", ())),
        history=tuple(message_from_wire(m) for m in data.get("history", ())),
        metadata=data.get("metadata"),
    )


def event_from_wire(data: dict[str, t.Any]) -> t.Any:
    """A StreamResponse back into its model object."""
    if "task" in data:
        return task_from_wire(data["task"])
    if "message" in data:
        return message_from_wire(data["message"])
    if "statusUpdate" in data:
        ev = data["statusUpdate"]
        return TaskStatusUpdateEvent(
            ev["taskId"], ev["contextId"], status_from_wire(ev["status"]), ev.get("metadata")
        )
    ev = data["artifactUpdate"]
    return TaskArtifactUpdateEvent(
        ev["taskId"],
        ev["contextId"],
        artifact_from_wire(ev["artifact"]),
        bool(ev.get("append")),
        bool(ev.get("lastChunk")),
        ev.get("metadata"),
    )


def push_config_from_wire(data: dict[str, t.Any]) -> PushConfig:
    auth = data.get("authentication")
    return PushConfig(
        id=data["id"],
        task_id=data["taskId"],
        url=data["url"],
        token=data.get("token"),
        authentication=AuthenticationInfo(auth["scheme"], auth.get("credentials"))
        if auth
        else None,
        tenant=data.get("tenant"),
        protocol_version=data.get("protocolVersion") or "1.0",
    )
