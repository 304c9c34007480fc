"""A test client for apps serving A2A: JSON-RPC calls and SSE streams over Flask's test client.

>>> client = A2ATestClient(app, token="alice-token")
>>> task = client.send("hello", skill="echo")["task"]
"""

from __future__ import annotations

import itertools
import json
import typing as t

from flask import Flask
from werkzeug.test import TestResponse


class RPCResponse:
    """One JSON-RPC answer: the HTTP response plus its decoded body (for a stream holding one
    event, such as a streaming method's error, that event)."""

    def __init__(self, response: TestResponse) -> None:
        self.response = response
        self.status = response.status_code
        self.headers = response.headers
        self.text = response.get_data(as_text=True)
        self._not_json: str | None = None
        try:
            if response.mimetype == "text/event-stream":
                # A streaming method's error is a stream of exactly one event: read that one.
                events = parse_sse(self.text)
                if len(events) != 1:
                    raise ValueError(f"{len(events)} events")
                self._json: t.Any = events[0]
            else:
                self._json = json.loads(self.text) if self.text else None
        except ValueError:
            # Something in front of the exchange answered (a CSRF check, an auth hook, a
            # proxy's error page): keep the answer readable and say so when it is used.
            self._json = None
            self._not_json = (
                f"HTTP {self.status} ({response.content_type or 'no content type'}), "
                f"not JSON: {self.text[:500]}"
            )

    @property
    def json(self) -> t.Any:
        """The decoded body (``None`` when empty); fails loudly, with the body, when not JSON."""
        assert self._not_json is None, self._not_json
        return self._json

    @property
    def result(self) -> t.Any:
        """The result; fails loudly (with the error) when the call was refused."""
        assert self.json is not None and "error" not in self.json, self.text
        return self.json["result"]

    @property
    def error(self) -> dict[str, t.Any]:
        assert self.json is not None and "error" in self.json, self.text
        return t.cast(dict[str, t.Any], self.json["error"])

    @property
    def code(self) -> int:
        return int(self.error["code"])


def parse_sse(text: str) -> list[t.Any]:
    """The ``data:`` payloads of an SSE body, decoded; comments (keep-alives) are skipped."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")]
        if data:
            events.append(json.loads("\n".join(data)))
    return events


class A2ATestClient:
    """Calls an app's A2A endpoint through ``app.test_client()``.

    :param token: sent as ``Authorization: Bearer <token>`` unless ``headers`` overrides it.
    """

    def __init__(
        self, app: Flask, token: str | None = None, *, path: str | None = None
    ) -> None:
        self.app = app
        self.client = app.test_client()
        self.token = token
        self.path = path or app.config.get("A2A_PATH", "/a2a")
        self._ids = itertools.count(1)

    def headers(self, token: str | None = None, extra: t.Mapping[str, str] | None = None) -> dict[
        str, str
    ]:
        out = {"Content-Type": "application/json"}
        token = token or self.token
        if token:
            out["Authorization"] = f"Bearer {token}"
        out.update(extra or {})
        return out

    def post(
        self,
        body: str | bytes,
        *,
        token: str | None = None,
        headers: t.Mapping[str, str] | None = None,
    ) -> TestResponse:
        return self.client.post(self.path, data=body, headers=self.headers(token, headers))

    def rpc(
        self,
        method: str,
        params: t.Any = None,
        *,
        token: str | None = None,
        headers: t.Mapping[str, str] | None = None,
        request_id: t.Any = None,
    ) -> RPCResponse:
        body: dict[str, t.Any] = {
            "jsonrpc": "2.0",
            "id": next(self._ids) if request_id is None else request_id,
            "method": method,
        }
        if params is not None:
            body["params"] = params
        return RPCResponse(self.post(json.dumps(body), token=token, headers=headers))

    def stream(
        self,
        method: str,
        params: t.Any,
        *,
        token: str | None = None,
        headers: t.Mapping[str, str] | None = None,
    ) -> tuple[TestResponse, list[t.Any]]:
        """Run a streaming method to its end; returns the response and the decoded events."""
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        response = self.post(json.dumps(body), token=token, headers=headers)
        return response, parse_sse(response.get_data(as_text=True))

    @staticmethod
    def message(
        text: str | None = None,
        *,
        skill: str | None = None,
        data: t.Any = None,
        task_id: str | None = None,
        context_id: str | None = None,
        message_id: str | None = None,
    ) -> dict[str, t.Any]:
        """A ROLE_USER message; ``skill`` goes in ``metadata.skill``."""
        parts: list[dict[str, t.Any]] = []
        if text is not None:
            parts.append({"text": text})
        if data is not None:
            parts.append({"data": data})
        message: dict[str, t.Any] = {
            "messageId": message_id or f"m-{next(A2ATestClient._message_ids)}",
            "role": "ROLE_USER",
            "parts": parts or [{"text": ""}],
        }
        if skill is not None:
            message["metadata"] = {"skill": skill}
        if task_id is not None:
            message["taskId"] = task_id
        if context_id is not None:
            message["contextId"] = context_id
        return message

    _message_ids = itertools.count(1)

    def send(
        self,
        text: str | None = None,
        *,
        skill: str | None = None,
        data: t.Any = None,
        task_id: str | None = None,
        configuration: dict[str, t.Any] | None = None,
        token: str | None = None,
    ) -> t.Any:
        """SendMessage and return its result (asserting it succeeded)."""
        params: dict[str, t.Any] = {
            "message": self.message(text, skill=skill, data=data, task_id=task_id)
        }
        if configuration:
            params["configuration"] = configuration
        return self.rpc("SendMessage", params, token=token).result
