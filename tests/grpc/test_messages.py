"""``bindings/grpc_messages.py``: ProtoJSON into the SDK's messages by hand gives exactly what
``json_format`` gives, for every shape the exchange answers, and falls back to it for the rest."""

from __future__ import annotations

import typing as t

import pytest
from a2a.types import a2a_pb2
from google.protobuf import json_format

from flask_a2a.bindings import grpc_messages

TASK: dict[str, t.Any] = {
    "id": "t-1",
    "contextId": "c-1",
    "status": {
        "state": "TASK_STATE_INPUT_REQUIRED",
        "timestamp": "2026-12-06T08:27:22.523Z",
        "message": {
            "messageId": "m-2",
            "role": "ROLE_AGENT",
            "parts": [{"text": "and then?"}],
            "contextId": "c-1",
            "taskId": "t-1",
        },
    },
    "artifacts": [
        {
            "artifactId": "a-1",
            "name": "out",
            "description": "every kind of part",
            "parts": [
                {"text": "hi", "metadata": {"k": [1, 2.5, None, True, {"x": "y"}]}},
                {"raw": "dGNr", "mediaType": "text/plain", "filename": "output.txt"},
                {"url": "https://example.com/output.txt", "mediaType": "text/plain"},
                {"data": {"key": "value", "count": 42, "list": [1, "two"]}},
                {"data": "a bare string"},
                {"data": None},
            ],
            "extensions": ["https://example.com/ext"],
            "metadata": {"a": 1},
        }
    ],
    "history": [
        {
            "messageId": "m-1",
            "role": "ROLE_USER",
            "parts": [{"text": "hello"}],
            "metadata": {"skill": "echo"},
            "extensions": ["https://example.com/ext"],
            "referenceTaskIds": ["t-0"],
        }
    ],
    "metadata": {"flask_a2a.skill": "echo"},
}

CASES: list[tuple[type[t.Any], dict[str, t.Any]]] = [
    (a2a_pb2.Task, TASK),
    (a2a_pb2.SendMessageResponse, {"task": TASK}),
    (a2a_pb2.SendMessageResponse, {"message": TASK["history"][0]}),
    (a2a_pb2.StreamResponse, {"statusUpdate": {"taskId": "t-1", "contextId": "c-1",
                                               "status": TASK["status"], "metadata": {}}}),
    (a2a_pb2.StreamResponse, {"artifactUpdate": {"taskId": "t-1", "contextId": "c-1",
                                                 "artifact": TASK["artifacts"][0],
                                                 "append": True, "lastChunk": False}}),
    (a2a_pb2.ListTasksResponse, {"tasks": [TASK, TASK], "nextPageToken": "abc",
                                 "pageSize": 2, "totalSize": 7}),
    (a2a_pb2.TaskPushNotificationConfig, {"id": "c1", "taskId": "t-1", "url": "https://x/h",
                                          "token": "t0k", "authentication":
                                          {"scheme": "Bearer", "credentials": "s3cret"}}),
    (a2a_pb2.ListTaskPushNotificationConfigsResponse, {"configs": [], "nextPageToken": "2"}),
    (a2a_pb2.Task, {"id": "t", "status": {"state": 3, "timestamp": "2026-01-02T03:04:05+02:00"}}),
    (a2a_pb2.Task, {"id": "t", "status": {"timestamp": "2026-01-02T03:04:05.123456789Z"}}),
    (a2a_pb2.Task, {"id": "t", "status": {"timestamp": "1969-12-31T23:59:59.5Z"}}),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "data"), CASES)
def test_by_hand_is_what_json_format_gives(kind: type[t.Any], data: dict[str, t.Any]) -> None:
    by_hand = kind()
    grpc_messages.fill(by_hand, data)  # no fallback: the hand path itself
    assert by_hand == json_format.ParseDict(data, kind())


def test_what_the_hand_path_leaves_falls_back_to_json_format() -> None:
    card = {
        "name": "x",
        "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
        "url": "http://example.com/a2a",  # a v0.3 field, beside the 1.0 ones
    }
    with pytest.raises(json_format.ParseError):
        grpc_messages.parse(card, a2a_pb2.AgentCard())
    lenient = grpc_messages.parse(card, a2a_pb2.AgentCard(), lenient=True)
    assert lenient.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    strict = {k: v for k, v in card.items() if k != "url"}
    assert grpc_messages.parse(strict, a2a_pb2.AgentCard()) == json_format.ParseDict(
        strict, a2a_pb2.AgentCard()
    )
    urlsafe = {"parts": [{"raw": "-_8"}], "messageId": "m", "role": "ROLE_USER"}
    assert grpc_messages.parse(urlsafe, a2a_pb2.Message()).parts[0].raw == b"\xfb\xff"
    with pytest.raises(json_format.ParseError):
        grpc_messages.parse({"id": 5}, a2a_pb2.Task())
    with pytest.raises(json_format.ParseError):
        grpc_messages.parse({"status": {"state": "NO_SUCH_STATE"}}, a2a_pb2.Task())


def test_whole_numbers_are_ints_again() -> None:
    value = {"a": 1.0, "b": [2.0, 2.5, True, None, "3"], "c": {"d": -0.0, "e": 1e300}}
    assert grpc_messages.json_numbers(value) == {
        "a": 1, "b": [2, 2.5, True, None, "3"], "c": {"d": 0, "e": 1e300}
    }  # fmt: skip
    assert isinstance(grpc_messages.json_numbers(1.0), int)
    assert isinstance(grpc_messages.json_numbers(1e300), float)  # past 2**53: left a double
