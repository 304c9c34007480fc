"""What the v0.3 binding tests share (``test_v03_jsonrpc``, ``test_v03_push``, ``test_v03_rest``):
the v0.3 app and its skills, a JSON-RPC caller as a v0.3 client sends, v0.3 and ProtoJSON
messages, and the v0.3 HTTP+JSON routes.

``skills``, ``app`` and ``caller`` are fixtures: a test module names them at module level
(``caller = v03_support.caller``) for pytest to find, as they would override the root conftest's
``app`` for every other module of ``tests/bindings`` if they were in a conftest here.
"""

from __future__ import annotations

import json
import typing as t

import pytest
from flask import Flask

from flask_a2a import Part, Skill, TaskContext
from tests.conftest import Gate, echo

V03 = {"A2A_PROTOCOL_VERSIONS": ["1.0", "0.3"], "A2A_ALLOW_PRIVATE_PUSH": True}


def replier(task: TaskContext) -> None:
    task.reply("quick answer")


def files(task: TaskContext) -> None:
    task.artifact(
        [
            Part(raw=b"\x00\x01", media_type="application/octet-stream", filename="b.bin"),
            Part(url="https://example.com/f.pdf", media_type="application/pdf"),
            Part(data=[1, 2]),
            Part(data={"k": "v"}),
        ],
        name="files",
    )


@pytest.fixture
def skills(gate: Gate) -> list[Skill]:
    return [
        Skill(id="echo", name="Echo", description="Echo.", handler=echo),
        Skill(id="gate", name="Gate", description="Held.", handler=gate.handler),
        Skill(id="reply", name="Reply", description="Replies.", handler=replier),
        Skill(id="files", name="Files", description="Files.", handler=files),
    ]


@pytest.fixture
def app(make_app: t.Callable[..., Flask], skills: list[Skill]) -> Flask:
    return make_app(skills=skills, config=V03)


class Caller:
    """JSON-RPC over the Flask test client, as a v0.3 client sends it (no A2A-Version)."""

    def __init__(self, app: Flask, token: str = "alice") -> None:
        self.http = app.test_client()
        self.token = token

    def post(
        self,
        method: str,
        params: t.Any,
        *,
        token: str | None = None,
        headers: t.Mapping[str, str] | None = None,
    ) -> t.Any:
        body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
        return self.http.post(
            "/a2a",
            data=json.dumps(body),
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {token or self.token}",
                **(headers or {}),
            },
        )

    def call(self, method: str, params: t.Any, **kw: t.Any) -> dict[str, t.Any]:
        response = self.post(method, params, **kw)
        assert response.status_code == 200, response.get_data(as_text=True)
        doc = t.cast(dict[str, t.Any], response.get_json())
        assert doc["id"] == 7 and doc["jsonrpc"] == "2.0"
        return doc

    def result(self, method: str, params: t.Any, **kw: t.Any) -> t.Any:
        doc = self.call(method, params, **kw)
        assert "error" not in doc, doc
        return doc["result"]

    def code(self, method: str, params: t.Any, **kw: t.Any) -> int:
        doc = self.call(method, params, **kw)
        assert "result" not in doc, doc
        return int(doc["error"]["code"])

    def events(self, method: str, params: t.Any, **kw: t.Any) -> list[dict[str, t.Any]]:
        response = self.post(method, params, **kw)
        assert response.headers["Content-Type"].startswith("text/event-stream")
        text = response.get_data(as_text=True)
        return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


@pytest.fixture
def caller(app: Flask) -> Caller:
    return Caller(app)


def message(text: str = "hi", skill: str = "echo", **extra: t.Any) -> dict[str, t.Any]:
    return {
        "kind": "message",
        "role": "user",
        "messageId": f"m-{text}-{skill}",
        "parts": [{"kind": "text", "text": text}],
        "metadata": {"skill": skill},
        **extra,
    }


def send(caller: Caller, msg: dict[str, t.Any] | None = None, **config: t.Any) -> t.Any:
    params: dict[str, t.Any] = {"message": msg or message()}
    if config:
        params["configuration"] = config
    return caller.result("message/send", params)


def task_count(caller: Caller, token: str = "alice") -> int:
    result = caller.result("ListTasks", {}, token=token)
    return int(result["totalSize"])


# ------------------------------------------------------------------ HTTP+JSON v0.3 routes

REST = "/a2a/rest/v1"


def rest(
    caller: Caller, verb: str, path: str, body: t.Any = None, token: str = "alice", **headers: str
) -> t.Any:
    return caller.http.open(
        REST + path,
        method=verb,
        json=body,
        headers={
            "Authorization": f"Bearer {token}",
            **headers,
        },
    )


def proto_message(text: str = "hi", skill: str = "echo") -> dict[str, t.Any]:
    return {
        "messageId": f"p-{text}",
        "role": "ROLE_USER",
        "content": [{"text": text}],
        "metadata": {"skill": skill},
    }
