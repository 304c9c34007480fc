"""A test client for apps serving A2A: JSON-RPC calls and SSE streams over Flask's test client.

>>> client = A2ATestClient(app, token="alice-token")
>>> task = client.send("hello", skill="echo")["task"]

With ``binding="rest"`` the same ``rpc()`` and ``stream()`` calls go over the HTTP+JSON
binding (``rest.py``) and its answers are read back into the JSON-RPC shape (the result, or
``error.code`` from the ErrorInfo reason), so one test runs over both bindings.
"""

from __future__ import annotations

import itertools
import json
import typing as t
from urllib.parse import quote

from flask import Flask
from werkzeug.test import TestResponse

#: Public (docs/api.md, "Where names live"); the rest of this module is private.
__all__ = ["A2ATestClient", "RPCResponse", "parse_sse"]


class RPCResponse:
    """One JSON-RPC answer: the HTTP response plus its decoded body (for a stream holding one
    event, such as a streaming method's error, that event)."""

    #: The binding that answered (REST statuses differ: 400, 404 … where JSON-RPC says 200).
    binding: t.ClassVar[str] = "jsonrpc"

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


class RESTResponse(RPCResponse):
    """A REST answer read as the JSON-RPC answer it stands for: a 2xx body (or a stream's one
    event) is the ``result``; a ``google.rpc.Status`` body is an ``error`` whose ``code`` is
    the JSON-RPC code of its ErrorInfo reason and whose ``data`` is its ``details``."""

    binding = "rest"

    def __init__(self, response: TestResponse, request_id: int, method: str) -> None:
        super().__init__(response)
        if self._not_json is None:
            self._json = as_jsonrpc(self._json, request_id, method, ok=response.status_code < 300)


def as_jsonrpc(body: t.Any, request_id: int, method: str, *, ok: bool) -> t.Any:
    """One REST answer (or stream event) as the JSON-RPC response it stands for."""
    from .bindings.rest import error_class_for_reason

    out: dict[str, t.Any] = {"jsonrpc": "2.0", "id": request_id}
    error = body.get("error") if isinstance(body, dict) and not ok else None
    if not isinstance(error, dict):
        if method == "DeleteTaskPushNotificationConfig" and body == {}:
            body = None  # google.protobuf.Empty is JSON-RPC's null
        out["result"] = body
        return out
    details = error.get("details") or []
    reasons = [d.get("reason") for d in details if isinstance(d, dict) and "reason" in d]
    code = error_class_for_reason(str(reasons[0])).code if reasons else -32603
    out["error"] = {"code": code, "message": error.get("message"), "data": details}
    out["rest"] = {"status": error.get("status"), "code": error.get("code")}
    return out


#: JSON-RPC method -> (HTTP verb, path template, params the path carries).
REST_ROUTES: t.Final[dict[str, tuple[str, str, tuple[str, ...]]]] = {
    "SendMessage": ("POST", "/message:send", ()),
    "SendStreamingMessage": ("POST", "/message:stream", ()),
    "GetTask": ("GET", "/tasks/{id}", ("id",)),
    "ListTasks": ("GET", "/tasks", ()),
    "CancelTask": ("POST", "/tasks/{id}:cancel", ("id",)),
    "SubscribeToTask": ("POST", "/tasks/{id}:subscribe", ("id",)),
    "CreateTaskPushNotificationConfig": (
        "POST", "/tasks/{taskId}/pushNotificationConfigs", ("taskId",)
    ),
    "GetTaskPushNotificationConfig": (
        "GET", "/tasks/{taskId}/pushNotificationConfigs/{id}", ("taskId", "id")
    ),
    "ListTaskPushNotificationConfigs": (
        "GET", "/tasks/{taskId}/pushNotificationConfigs", ("taskId",)
    ),
    "DeleteTaskPushNotificationConfig": (
        "DELETE", "/tasks/{taskId}/pushNotificationConfigs/{id}", ("taskId", "id")
    ),
    "GetExtendedAgentCard": ("GET", "/extendedAgentCard", ()),
}  # fmt: skip


def _query_value(value: t.Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


class A2ATestClient:
    """Calls an app's A2A endpoint through ``app.test_client()``.

    :param token: sent as ``Authorization: Bearer <token>`` unless ``headers`` overrides it.
    :param binding: ``"jsonrpc"`` or ``"rest"`` (the HTTP+JSON binding at ``A2A_REST_PATH``);
        by default :attr:`default_binding`.
    :param agent: the name of the agent to call, when the app serves several (its path and
        REST binding); by default the first.
    """

    #: The binding of clients made without ``binding=`` (the test suite sets it per case).
    default_binding: t.ClassVar[str] = "jsonrpc"

    def __init__(
        self,
        app: Flask,
        token: str | None = None,
        *,
        path: str | None = None,
        binding: str | None = None,
        agent: str | None = None,
    ) -> None:
        self.app = app
        self.client = app.test_client()
        self.token = token
        self.agent = agent
        if path is None and agent is not None:
            path = self._state().settings.path
        self.path = path or app.config.get("A2A_PATH", "/a2a")
        self.binding = binding or self.default_binding
        self._ids = itertools.count(1)

    @property
    def rest_path(self) -> str:
        """Where the app serves the HTTP+JSON binding."""
        mount = self._state().settings.rest_mount
        assert mount is not None, "this app serves no REST binding (A2A_REST_PATH is '')"
        return t.cast(str, mount)

    def _state(self) -> t.Any:
        if self.agent is None:
            return self.app.extensions["a2a"]
        return self.app.extensions["a2a_agents"].get(self.agent)

    def rest(
        self,
        method: str,
        params: t.Any = None,
        *,
        token: str | None = None,
        headers: t.Mapping[str, str] | None = None,
        buffered: bool = True,
    ) -> TestResponse:
        """Call ``method`` over the REST binding: the params that its route carries go in the
        path, the others in the query (GET, DELETE) or the JSON body (POST). A method no
        route has is POSTed to ``/<method>`` (the REST form of an unknown method)."""
        verb, template, in_path = REST_ROUTES.get(method, ("POST", "/" + method, ()))
        rest_params = dict(params) if isinstance(params, dict) else params
        path = template
        if isinstance(rest_params, dict):
            for name in in_path:
                value = rest_params.pop(name, "")
                path = path.replace("{" + name + "}", quote(str(value), safe=""))
            tenant = rest_params.get("tenant")
            if isinstance(tenant, str) and tenant:  # any other value stays where it was
                path = "/" + quote(rest_params.pop("tenant"), safe="") + path
        url = self.rest_path + path
        sent = self.headers(token, headers)
        if verb in ("GET", "DELETE"):
            query = {k: _query_value(v) for k, v in (rest_params or {}).items() if v is not None}
            return self.client.open(
                url, method=verb, query_string=query, headers=sent, buffered=buffered
            )
        if method in ("CancelTask", "SubscribeToTask") and not rest_params:  # no body at all
            sent.pop("Content-Type", None)
            return self.client.open(url, method=verb, headers=sent, buffered=buffered)
        body = json.dumps({} if rest_params is None else rest_params)
        return self.client.open(url, method=verb, data=body, headers=sent, buffered=buffered)

    def call(
        self,
        method: str,
        params: t.Any = None,
        *,
        token: str | None = None,
        headers: t.Mapping[str, str] | None = None,
        buffered: bool = True,
    ) -> TestResponse:
        """One call over this client's binding; the raw response (``buffered=False``: a stream
        to iterate as it comes)."""
        if self.binding == "rest":
            return self.rest(method, params, token=token, headers=headers, buffered=buffered)
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        return self.client.post(
            self.path,
            data=json.dumps(body),
            headers=self.headers(token, headers),
            buffered=buffered,
        )

    def event(self, data: t.Any) -> t.Any:
        """One decoded stream event in the JSON-RPC shape (see :func:`stream_event`)."""
        return stream_event(data, self.binding)

    def headers(
        self, token: str | None = None, extra: t.Mapping[str, str] | None = None
    ) -> dict[str, str]:
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
        if self.binding == "rest":
            response = self.rest(method, params, token=token, headers=headers)
            return RESTResponse(response, next(self._ids), method)
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
        if self.binding == "rest":
            request_id = next(self._ids)
            response = self.rest(method, params, token=token, headers=headers)
            if response.mimetype == "text/event-stream":
                events = parse_sse(response.get_data(as_text=True))
            else:  # a refusal is an HTTP answer, where JSON-RPC streams one error event
                events = [json.loads(response.get_data(as_text=True))]
            ok = response.status_code < 300
            return response, [as_jsonrpc(e, request_id, method, ok=ok) for e in events]
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


def stream_event(data: t.Any, binding: str | None = None) -> t.Any:
    """One decoded stream event in the JSON-RPC shape: a REST event (the bare StreamResponse)
    becomes ``{"result": ...}``; ``binding`` defaults to :attr:`A2ATestClient.default_binding`."""
    if (binding or A2ATestClient.default_binding) == "rest":
        assert "jsonrpc" not in data, data  # REST events carry no JSON-RPC envelope
        return as_jsonrpc(data, 0, "", ok=True)
    return data
