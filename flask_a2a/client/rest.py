"""The client's HTTP+JSON (REST) transport: each method is a verb and a path (spec §11.3, the
``google.api.http`` annotations of ``a2a.proto``); results are bare ProtoJSON, errors
``google.rpc.Status`` bodies whose ErrorInfo reason names the error class."""

from __future__ import annotations

import json
import typing as t
from urllib.parse import quote

import requests

from ..bindings.rest import error_class_for_reason
from ..protocol.errors import ERROR_INFO_TYPE, A2AError, error_from_dict
from .requester import Requester
from .sse import A2AClientError, EventStream, Timeout, json_of

MEDIA_TYPE: t.Final = "application/a2a+json"
_HEADERS: t.Final = {"Content-Type": MEDIA_TYPE}

#: method -> (verb, path with ``{param}`` holes, the params that go in the path); the other
#: params are the body of a POST, the query of a GET or DELETE.
ROUTES: t.Final[dict[str, tuple[str, str, tuple[str, ...]]]] = {
    "SendMessage": ("POST", "/message:send", ()),
    "SendStreamingMessage": ("POST", "/message:stream", ()),
    "GetTask": ("GET", "/tasks/{id}", ("id",)),
    "ListTasks": ("GET", "/tasks", ()),
    "CancelTask": ("POST", "/tasks/{id}:cancel", ("id",)),
    "SubscribeToTask": ("GET", "/tasks/{id}:subscribe", ("id",)),
    "CreateTaskPushNotificationConfig": (
        "POST",
        "/tasks/{taskId}/pushNotificationConfigs",
        ("taskId",),
    ),
    "GetTaskPushNotificationConfig": (
        "GET",
        "/tasks/{taskId}/pushNotificationConfigs/{id}",
        ("taskId", "id"),
    ),
    "ListTaskPushNotificationConfigs": (
        "GET",
        "/tasks/{taskId}/pushNotificationConfigs",
        ("taskId",),
    ),
    "DeleteTaskPushNotificationConfig": (
        "DELETE",
        "/tasks/{taskId}/pushNotificationConfigs/{id}",
        ("taskId", "id"),
    ),
    "GetExtendedAgentCard": ("GET", "/extendedAgentCard", ()),
}


class RestTransport:
    """Speaks the HTTP+JSON binding below ``url``; ``tenant`` is the ``/{tenant}`` path prefix."""

    binding = "HTTP+JSON"

    def __init__(self, url: str, session: Requester, tenant: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.session = session
        self.tenant = tenant

    def call(self, method: str, params: dict[str, t.Any], timeout: Timeout) -> t.Any:
        response = self._send(method, params, timeout, False)
        result = rest_answer(response)
        # DeleteTaskPushNotificationConfig answers google.protobuf.Empty ({}): JSON-RPC's null.
        return None if method == "DeleteTaskPushNotificationConfig" else result

    def stream(self, method: str, params: dict[str, t.Any], timeout: Timeout) -> EventStream:
        response = self._send(method, params, timeout, True)
        content_type = response.headers.get("Content-Type", "")
        if response.status_code == 200 and content_type.startswith("text/event-stream"):
            return EventStream(response, stream_result).open()  # a streamed error raises
        with response:
            rest_answer(response)  # raises the server's error, if it sent one
        raise A2AClientError(f"{method} answered without a stream", response.status_code)

    def _send(
        self, method: str, params: dict[str, t.Any], timeout: Timeout, stream: bool
    ) -> requests.Response:
        verb, path, in_path = ROUTES[method]
        rest = {k: v for k, v in params.items() if k not in in_path and k != "tenant"}
        for name in in_path:
            path = path.replace("{" + name + "}", quote(str(params.get(name, "")), safe=""))
        if self.tenant:
            path = "/" + quote(self.tenant, safe="") + path
        options: dict[str, t.Any] = {}
        if verb == "POST":
            data = json.dumps(rest, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            options = {"data": data.encode("utf-8"), "headers": _HEADERS}
        else:
            options = {"params": {k: _query_value(v) for k, v in rest.items()}}
        return self.session.request(
            verb,
            self.url + path,
            timeout=timeout,
            stream=stream,
            allow_redirects=False,
            **options,
        )


def _query_value(value: t.Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def rest_answer(response: requests.Response) -> t.Any:
    """The bare result of a 200, or the server's ``google.rpc.Status`` raised as its class."""
    status = response.status_code
    payload = json_of(response, "A2A HTTP+JSON")
    if status == 200:
        return payload
    raise status_error(payload, status)


def stream_result(payload: t.Any) -> t.Any:
    """A REST stream event: a bare StreamResponse (an ``{"error": …}`` event raises)."""
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        raise status_error(payload, 200)
    return payload


def status_error(payload: t.Any, status: int) -> Exception:
    """The error a ``google.rpc.Status`` body stands for: the class its ErrorInfo reason
    names, with its message, metadata and field violations."""
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        return A2AClientError(f"HTTP {status}: the answer is not A2A HTTP+JSON", status)
    details = error.get("details")
    details = details if isinstance(details, list) else []
    reason = next(
        (d.get("reason") for d in details
         if isinstance(d, dict) and d.get("@type") == ERROR_INFO_TYPE),
        None,
    )  # fmt: skip
    cls = error_class_for_reason(reason) if isinstance(reason, str) else A2AError
    message = error.get("message")
    return error_from_dict({
        "code": cls.code,
        "message": message if isinstance(message, str) else cls.message,
        "data": details,
    })  # fmt: skip
