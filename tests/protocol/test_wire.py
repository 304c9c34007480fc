"""The wire model: ProtoJSON as the wire sheet (§2-§3) pins it, written and read.

Writing: camelCase only, proto enum names, RFC 3339 UTC with milliseconds, flat parts, no keys
outside the proto, empty lists and unset fields left out. Reading: both spellings, enums by name
or number, null as unset, strict oneofs, lenient base64 and timestamps.
"""

from __future__ import annotations

import re
import typing as t
from datetime import datetime, timedelta, timezone

import pytest
from flask import Flask

from flask_a2a import Part, Skill, TaskContext
from flask_a2a.protocol import schemas, wire
from flask_a2a.protocol.errors import InvalidParamsError
from flask_a2a.protocol.model import (
    Artifact,
    Message,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from flask_a2a.testing import A2ATestClient

STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
WHEN = datetime(2026, 3, 4, 5, 6, 7, 891000, tzinfo=timezone.utc)

#: The wire sheet's field lists (§2), per message.
TASK_KEYS = {"id", "contextId", "status", "artifacts", "history", "metadata"}
STATUS_KEYS = {"state", "message", "timestamp"}
MESSAGE_KEYS = {
    "messageId",
    "contextId",
    "taskId",
    "role",
    "parts",
    "metadata",
    "extensions",
    "referenceTaskIds",
}
PART_CONTENT = {"text", "raw", "url", "data"}
PART_KEYS = PART_CONTENT | {"metadata", "filename", "mediaType"}
ARTIFACT_KEYS = {"artifactId", "name", "description", "parts", "metadata", "extensions"}
STATUS_UPDATE_KEYS = {"taskId", "contextId", "status", "metadata"}
ARTIFACT_UPDATE_KEYS = {"taskId", "contextId", "artifact", "append", "lastChunk", "metadata"}


def full_message(role: Role = Role.USER, mid: str = "m-1") -> Message:
    return Message(
        message_id=mid,
        role=role,
        parts=(
            Part(text="hello", media_type="text/plain", metadata={"lang": "en"}),
            Part(raw=b"\x00\x01\xff\xfb", filename="blob.bin", media_type="application/x-bin"),
            Part(url="https://files.example/a.pdf", filename="a.pdf"),
            Part(data={"skill": "echo", "n": [1, 2.5, None, True]}),
            Part(data=None),
        ),
        context_id="ctx-1",
        task_id="task-1",
        metadata={"k": "v", "nested": {"x": 1}},
        extensions=("https://ext.example/one",),
        reference_task_ids=("task-0",),
    )


def full_task() -> Task:
    """A task with every field set, at millisecond precision (what the wire carries)."""
    artifact = Artifact(
        artifact_id="a-1",
        parts=(Part(text="out"), Part(data=[1, {"y": None}])),
        name="result",
        description="the result",
        metadata={"size": 2},
        extensions=("https://ext.example/two",),
    )
    status = TaskStatus(TaskState.INPUT_REQUIRED, WHEN, full_message(Role.AGENT, "m-2"))
    return Task(
        id="task-1",
        context_id="ctx-1",
        status=status,
        artifacts=(artifact, Artifact("a-2")),
        history=(full_message(), full_message(Role.AGENT, "m-2")),
        metadata={"flask_a2a.skill": "echo"},
    )


def load(schema: t.Any, params: t.Any) -> t.Any:
    return schemas.load_params(schema, params)


def refused(schema: t.Any, params: t.Any) -> list[str]:
    """Load must fail with -32602; returns the violated field paths."""
    with pytest.raises(InvalidParamsError) as info:
        schemas.load_params(schema, params)
    assert info.value.code == -32602
    return [field for field, _ in info.value.field_violations]


def msg(**fields: t.Any) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    out.update(fields)
    return out


# --------------------------------------------------------------------------- writing


def test_full_task_renders_exactly_the_proto_keys() -> None:
    out = wire.dump_task(full_task())
    assert set(out) == TASK_KEYS
    assert set(out["status"]) == STATUS_KEYS
    assert out["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    for message in [out["status"]["message"], *out["history"]]:
        assert set(message) == MESSAGE_KEYS
        assert message["role"] in ("ROLE_USER", "ROLE_AGENT")
        for part in message["parts"]:
            assert set(part) <= PART_KEYS
            assert len(set(part) & PART_CONTENT) == 1, part
    full, empty = out["artifacts"]
    assert set(full) == ARTIFACT_KEYS
    assert empty == {"artifactId": "a-2", "parts": []}  # required: normalized, never absent


def test_parts_are_flat_with_one_content_member() -> None:
    parts = wire.dump_message(full_message())["parts"]
    assert parts == [
        {"text": "hello", "metadata": {"lang": "en"}, "mediaType": "text/plain"},
        {"raw": "AAH/+w==", "filename": "blob.bin", "mediaType": "application/x-bin"},
        {"url": "https://files.example/a.pdf", "filename": "a.pdf"},
        {"data": {"skill": "echo", "n": [1, 2.5, None, True]}},
        {"data": None},  # JSON null is a value of a data part, kept
    ]


def test_minimal_objects_leave_out_empty_lists_and_unset_fields() -> None:
    message = Message("m", Role.USER, (Part(text=""),))
    assert wire.dump_message(message) == {
        "messageId": "m",
        "role": "ROLE_USER",
        "parts": [{"text": ""}],
    }
    task = Task("t", "c", TaskStatus(TaskState.SUBMITTED, WHEN))
    assert wire.dump_task(task) == {
        "id": "t",
        "contextId": "c",
        "status": {"state": "TASK_STATE_SUBMITTED", "timestamp": "2026-03-04T05:06:07.891Z"},
    }
    assert wire.dump_task(full_task(), history_length=0).keys() == TASK_KEYS - {"history"}
    assert wire.dump_task(full_task(), include_artifacts=False).keys() == TASK_KEYS - {"artifacts"}
    assert len(wire.dump_task(full_task(), history_length=1)["history"]) == 1


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), "2026-01-02T03:04:05.000Z"),
        (datetime(2026, 1, 2, 3, 4, 5, 999999, tzinfo=timezone.utc), "2026-01-02T03:04:05.999Z"),
        (
            datetime(2026, 1, 2, 5, 4, 5, 120000, tzinfo=timezone(timedelta(hours=2))),
            "2026-01-02T03:04:05.120Z",
        ),
        (
            datetime(2026, 1, 1, 23, 30, tzinfo=timezone(timedelta(hours=-1))),
            "2026-01-02T00:30:00.000Z",
        ),
    ],
)
def test_timestamps_are_utc_with_three_fraction_digits(value: datetime, text: str) -> None:
    assert wire.format_timestamp(value) == text
    assert STAMP.match(text)


def test_events_render_exactly_the_proto_keys() -> None:
    status = TaskStatus(TaskState.WORKING, WHEN, Message.agent("busy", context_id="c", task_id="t"))
    plain = wire.dump_event(TaskStatusUpdateEvent("t", "c", status))
    assert set(plain) == {"statusUpdate"}
    assert set(plain["statusUpdate"]) == STATUS_UPDATE_KEYS - {"metadata"}
    full = wire.dump_event(TaskStatusUpdateEvent("t", "c", status, {"m": 1}))
    assert set(full["statusUpdate"]) == STATUS_UPDATE_KEYS
    chunk = TaskArtifactUpdateEvent(
        "t", "c", Artifact("a"), append=True, last_chunk=True, metadata={"m": 1}
    )
    out = wire.dump_event(chunk)
    assert set(out) == {"artifactUpdate"}
    assert set(out["artifactUpdate"]) == ARTIFACT_UPDATE_KEYS
    assert out["artifactUpdate"]["artifact"] == {"artifactId": "a", "parts": []}
    bare = wire.dump_event(TaskArtifactUpdateEvent("t", "c", Artifact("a", (Part(text="x"),))))
    assert set(bare["artifactUpdate"]) == {"taskId", "contextId", "artifact"}
    assert set(wire.dump_event(full_task())) == {"task"}
    assert set(wire.dump_event(full_message())) == {"message"}


def test_round_trip_keeps_every_field() -> None:
    task = full_task()
    assert wire.task_from_wire(wire.dump_task(task)) == task
    for event in (
        TaskStatusUpdateEvent("t", "c", task.status, {"m": [1]}),
        TaskArtifactUpdateEvent("t", "c", task.artifacts[0], True, True, {"m": 2}),
        task,
        full_message(),
    ):
        assert wire.event_from_wire(wire.dump_event(event)) == event


def _walk(value: t.Any, path: str = "") -> t.Iterator[tuple[str, dict[str, t.Any]]]:
    """Every object in a rendered task, with the proto message it is, by its parent key."""
    if isinstance(value, list):
        for item in value:
            yield from _walk(item, path)
    elif isinstance(value, dict):
        yield path, value
        for key, inner in value.items():
            if key not in ("metadata", "data"):  # Struct and Value hold free JSON
                yield from _walk(inner, key)


KEYS_BY_PARENT = {
    "task": TASK_KEYS,
    "status": STATUS_KEYS,
    "message": MESSAGE_KEYS,
    "history": MESSAGE_KEYS,
    "parts": PART_KEYS,
    "artifacts": ARTIFACT_KEYS,
}


def test_results_over_the_wire_hold_no_keys_outside_the_proto(
    make_app: t.Callable[..., Flask],
) -> None:
    def handler(task: TaskContext) -> None:
        task.working("thinking")
        task.artifact([Part(raw=b"\xfb\xff", media_type="application/octet-stream")], name="b")
        task.artifact(None, name="empty")
        task.complete("done")

    app = make_app(skills=[Skill(id="s", name="S", description="S.", handler=handler)])
    client = A2ATestClient(app, token="alice")
    params = {
        "message": {
            "message_id": "m-9",
            "role": 1,
            "parts": [{"raw": "-_8", "media_type": "x/y"}, {"data": None}],
        }
    }
    task = client.rpc("SendMessage", params).result["task"]
    seen = set()
    for parent, obj in _walk(task, "task"):
        if parent in KEYS_BY_PARENT:
            seen.add(parent)
            assert set(obj) <= KEYS_BY_PARENT[parent], (parent, obj)
    assert seen == set(KEYS_BY_PARENT)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert STAMP.match(task["status"]["timestamp"])
    user = task["history"][0]
    assert user["role"] == "ROLE_USER"
    assert user["parts"] == [{"raw": "+/8=", "mediaType": "x/y"}, {"data": None}]
    by_name = {a["name"]: a for a in task["artifacts"]}
    assert by_name["b"]["parts"] == [{"raw": "+/8=", "mediaType": "application/octet-stream"}]
    assert by_name["empty"]["parts"] == []
    listed = client.rpc("ListTasks", {"includeArtifacts": True}).result
    assert set(listed) == {"tasks", "nextPageToken", "pageSize", "totalSize"}
    assert listed["tasks"][0] == client.rpc("GetTask", {"id": task["id"]}).result


# --------------------------------------------------------------------------- reading


@pytest.mark.parametrize(
    ("role", "expected"),
    [("ROLE_USER", Role.USER), ("ROLE_AGENT", Role.AGENT), (1, Role.USER), (2, Role.AGENT)],
)
def test_enums_read_by_name_or_number(role: t.Any, expected: Role) -> None:
    assert load(schemas.MessageSchema(), msg(role=role)).role is expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("TASK_STATE_COMPLETED", TaskState.COMPLETED),
        (3, TaskState.COMPLETED),
        (6, TaskState.INPUT_REQUIRED),
        (8, TaskState.AUTH_REQUIRED),
    ],
)
def test_task_state_reads_by_name_or_number(status: t.Any, expected: TaskState) -> None:
    assert load(schemas.ListTasksRequestSchema(), {"status": status})["status"] is expected


@pytest.mark.parametrize(
    "role", ["user", "ROLE_USER ", "role_user", "ROLE_UNSPECIFIED", 0, 9, True, ["ROLE_USER"]]
)
def test_unknown_or_unspecified_role_is_refused(role: t.Any) -> None:
    assert refused(schemas.MessageSchema(), msg(role=role)) == ["role"]


@pytest.mark.parametrize("status", ["BOGUS", "COMPLETED", "task_state_completed", 42, False])
def test_unknown_task_state_is_refused(status: t.Any) -> None:
    assert refused(schemas.ListTasksRequestSchema(), {"status": status}) == ["status"]


@pytest.mark.parametrize(
    "parts",
    [
        [{"text": "a", "data": None}],
        [{"text": "a", "url": "https://x.example"}],
        [{"raw": "AA==", "data": {"k": 1}}],
        [{}],
        [{"mediaType": "text/plain", "metadata": {}}],
        [{"text": None}],
        [{"text": "ok"}, {"text": "a", "raw": "AA=="}],
    ],
)
def test_a_part_needs_exactly_one_content_member(parts: list[t.Any]) -> None:
    fields = refused(schemas.MessageSchema(), msg(parts=parts))
    assert fields and all(f.startswith("parts[") for f in fields), fields


@pytest.mark.parametrize("parts", [[], None, "text"])
def test_parts_must_be_a_non_empty_list(parts: t.Any) -> None:
    assert refused(schemas.MessageSchema(), msg(parts=parts)) == ["parts"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("AAH/+w==", b"\x00\x01\xff\xfb"),
        ("AAH_-w", b"\x00\x01\xff\xfb"),
        ("AAH/+w", b"\x00\x01\xff\xfb"),
        ("AAH_-w==", b"\x00\x01\xff\xfb"),
        ("", b""),
    ],
)
def test_raw_accepts_standard_and_url_safe_base64_with_or_without_padding(
    text: str, expected: bytes
) -> None:
    part = load(schemas.MessageSchema(), msg(parts=[{"raw": text}])).parts[0]
    assert part.raw == expected
    assert wire.dump_part(part)["raw"] == wire.dump_part(Part(raw=expected))["raw"]


@pytest.mark.parametrize("text", ["!!!!", "A", "AAH/ +w==", 12])
def test_raw_refuses_what_is_not_base64(text: t.Any) -> None:
    assert refused(schemas.MessageSchema(), msg(parts=[{"raw": text}])) == ["parts[0].raw"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-02T03:04:05Z", datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)),
        ("2026-01-02T05:04:05+02:00", datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)),
        ("2026-01-01T22:04:05.5-05:00", datetime(2026, 1, 2, 3, 4, 5, 500000, tzinfo=timezone.utc)),
        (
            "2026-01-02T03:04:05.123456789Z",
            datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc),
        ),
        ("2026-01-02t03:04:05.1z", datetime(2026, 1, 2, 3, 4, 5, 100000, tzinfo=timezone.utc)),
    ],
)
def test_timestamps_read_any_offset_into_utc(text: str, expected: datetime) -> None:
    got = load(schemas.ListTasksRequestSchema(), {"statusTimestampAfter": text})
    value = got["status_timestamp_after"]
    assert value == expected and value.utcoffset() == timedelta(0)
    assert wire.parse_timestamp(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-02T03:04:05",
        "2026-01-02 03:04:05Z",
        "2026-01-02T03:04:05.1234567890Z",
        "2026-13-02T03:04:05Z",
        "2026-01-02",
        "yesterday",
        1767322245,
    ],
)
def test_naive_or_malformed_timestamps_are_refused(text: t.Any) -> None:
    fields = refused(schemas.ListTasksRequestSchema(), {"statusTimestampAfter": text})
    assert fields == ["statusTimestampAfter"]


def test_null_means_unset_except_for_data() -> None:
    params = {
        "message": msg(
            contextId=None,
            taskId=None,
            metadata=None,
            extensions=None,
            referenceTaskIds=None,
            parts=[
                {"text": "a", "mediaType": None, "metadata": None, "filename": None},
                {"data": None},
            ],
        ),
        "configuration": None,
        "metadata": None,
        "tenant": None,
    }
    loaded = load(schemas.SendMessageRequestSchema(), params)
    message = loaded["message"]
    assert message == Message("m", Role.USER, (Part(text="a"), Part(data=None)))
    assert "configuration" not in loaded and "metadata" not in loaded
    assert refused(schemas.SendMessageRequestSchema(), {"message": msg(messageId=None)}) == [
        "message.messageId"
    ]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"pageSize": "2"}, {"page_size": 2}),
        ({"pageSize": 2.0, "historyLength": "0"}, {"page_size": 2, "history_length": 0}),
        ({"page_size": 7, "include_artifacts": True}, {"page_size": 7, "include_artifacts": True}),
        ({"pageSize": 3, "page_size": 9}, {"page_size": 3}),  # the camelCase spelling wins
        ({"page_size": 9, "pageSize": 3}, {"page_size": 3}),
        ({"contextId": "c", "unknown": {"deep": 1}, "kind": "x"}, {"context_id": "c"}),
    ],
)
def test_ints_as_strings_both_spellings_and_unknown_fields(
    params: dict[str, t.Any], expected: dict[str, t.Any]
) -> None:
    assert load(schemas.ListTasksRequestSchema(), params) == expected


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"pageSize": 2.5}, "pageSize"),
        ({"pageSize": "2.5"}, "pageSize"),
        ({"pageSize": " 2"}, "pageSize"),
        ({"pageSize": True}, "pageSize"),
        ({"pageSize": 0}, "pageSize"),
        ({"pageSize": 101}, "pageSize"),
        ({"historyLength": -1}, "historyLength"),
        ({"historyLength": 2**31}, "historyLength"),
        ({"includeArtifacts": "true"}, "includeArtifacts"),
        ({"includeArtifacts": 1}, "includeArtifacts"),
        ({"contextId": 5}, "contextId"),
        ({"pageToken": ["a"]}, "pageToken"),
    ],
)
def test_bad_scalars_are_refused_with_their_field(params: dict[str, t.Any], field: str) -> None:
    assert refused(schemas.ListTasksRequestSchema(), params) == [field]


def test_params_must_be_an_object() -> None:
    assert refused(schemas.GetTaskRequestSchema(), ["t-1"]) == ["params"]
    assert refused(schemas.GetTaskRequestSchema(), {}) == ["id"]
    assert refused(schemas.GetTaskRequestSchema(), {"id": ""}) == ["id"]


@pytest.mark.parametrize(
    "message",
    [
        msg(parts=[{"text": "a", "raw": "AA=="}]),
        msg(parts=[{"mediaType": "text/plain"}]),
        msg(parts=[]),
        msg(role="ROLE_UNSPECIFIED"),
        msg(role=0),
        msg(role="user"),
        msg(parts=[{"raw": "!!"}]),
    ],
)
def test_refused_messages_write_nothing(
    make_app: t.Callable[..., Flask], message: dict[str, t.Any]
) -> None:
    ran: list[str] = []
    skill = Skill(id="s", name="S", description="S.", handler=lambda task: ran.append(task.id))
    app = make_app(skills=[skill])
    response = A2ATestClient(app, token="alice").rpc("SendMessage", {"message": message})
    assert response.status == 200 and response.code == -32602
    assert response.error["data"][1]["fieldViolations"][0]["field"].startswith("message.")
    assert ran == []
    assert app.extensions["a2a"].exchange.store.export_owner("alice")["tasks"] == []


SEND_PARAMS = [
    {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
    {
        "message": {
            "messageId": "m",
            "role": "ROLE_AGENT",
            "parts": [{"data": None}],
            "contextId": "",
            "taskId": "t",
            "metadata": {"skill": "echo"},
            "extensions": ["urn:x"],
            "referenceTaskIds": ["a", "b"],
        }
    },
    {
        "message": {
            "messageId": "m",
            "role": "ROLE_USER",
            "parts": [
                {"url": "https://x/y", "mediaType": "text/html", "filename": "y"},
                {"data": {"skill": "s", "n": [1, 2.5]}, "metadata": {"k": "v"}},
                {"text": "", "filename": "", "mediaType": ""},
            ],
        },
        "configuration": {
            "returnImmediately": True,
            "historyLength": 0,
            "acceptedOutputModes": ["text/plain"],
        },
        "metadata": {"a": 1},
        "tenant": "t1",
    },
    {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
        "configuration": {},
    },
]

SLOW_PARAMS = [
    {"message": {"message_id": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
    {"message": {"messageId": "m", "role": 1, "parts": [{"text": "hi"}]}},
    {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "AAH/"}]}},
    {
        "message": {
            "messageId": "m",
            "role": "ROLE_USER",
            "parts": [{"text": "hi"}],
            "contextId": None,
        }
    },
    {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        "configuration": {"historyLength": "2"},
    },
]


@pytest.mark.parametrize("params", SEND_PARAMS + SLOW_PARAMS)
def test_hot_path_reader_agrees_with_the_schema(params: dict[str, t.Any]) -> None:
    from flask_a2a.protocol.params import read_send_params

    expected = schemas.load_params(schemas.schema(schemas.SendMessageRequestSchema), params)
    assert read_send_params(params) == expected


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"message": {"messageId": "", "role": "ROLE_USER", "parts": [{"text": "x"}]}},
        {"message": {"messageId": "m", "role": "ROLE_UNSPECIFIED", "parts": [{"text": "x"}]}},
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}},
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": 1}]}},
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a", "url": "b"}]}},
        {
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}]},
            "configuration": {"historyLength": -1},
        },
        {
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}]},
            "configuration": {"returnImmediately": "yes"},
        },
    ],
)
def test_hot_path_reader_refuses_exactly_as_the_schema(params: dict[str, t.Any]) -> None:
    from flask_a2a.protocol.errors import InvalidParamsError
    from flask_a2a.protocol.params import read_send_params

    with pytest.raises(InvalidParamsError) as fast:
        read_send_params(params)
    with pytest.raises(InvalidParamsError) as slow:
        schemas.load_params(schemas.schema(schemas.SendMessageRequestSchema), params)
    assert fast.value.to_dict() == slow.value.to_dict()


@pytest.mark.parametrize("params", SEND_PARAMS)
def test_plain_params_never_reach_the_schema_reader(
    params: dict[str, t.Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from flask_a2a.protocol import params as message_params

    def refuse(*args: t.Any) -> t.NoReturn:
        raise AssertionError("the plain shape must take the direct reader")

    monkeypatch.setattr(schemas, "load_params", refuse)
    assert message_params.read_send_params(params)["message"].message_id == "m"


def test_new_ids_are_random_version_4_uuids_in_their_usual_spelling() -> None:
    import uuid

    from flask_a2a.protocol.model import new_id

    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text  # lower-case hex, 8-4-4-4-12
