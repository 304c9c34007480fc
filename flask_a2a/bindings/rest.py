"""The HTTP+JSON (REST) binding (spec §11): a route -> the exchange's method -> an HTTP answer.

Imports nothing of Flask. A request runs through the same checks as a JSON-RPC one, by the same
functions of ``checks.py`` (Origin gate before the body, body cap, content type, strict JSON,
principal, ``A2A-Version``, extensions), then the route's path, query and body are turned into
the very params dict a JSON-RPC call carries and handed to the same method of
:class:`~flask_a2a.exchange.methods.Exchange`. So every behaviour is one piece of code for both
bindings;
only the envelope differs: results are the bare ProtoJSON objects, stream events the bare
StreamResponse objects, and errors ``google.rpc.Status`` bodies with the HTTP status of §5.4.
"""

from __future__ import annotations

import typing as t

from ..config import Settings
from ..exchange.calls import Call, HTTPRequest, Method, Reply
from ..protocol import jsonrpc
from ..protocol.errors import (
    ERROR_DOMAIN,
    ERROR_INFO_TYPE,
    STATUSES,
    A2AError,
    InvalidParamsError,
    JSONParseError,
    MalformedBodyError,
    MethodNotAllowedError,
    MethodNotFoundError,
    PayloadTooLargeError,
    UnauthenticatedError,
    statuses_of,
)
from ..protocol.extensions import Activation
from ..protocol.scrub import scrub
from .checks import (
    admit,
    check_content_type,
    check_origin,
    finish,
    internal_error,
    invoke,
    preflight,
    read_body,
)

MEDIA_TYPE: t.Final = "application/a2a+json"
JSON_HEADERS: t.Final = (("Content-Type", MEDIA_TYPE), ("Cache-Control", "no-store"))

#: ErrorInfo reasons for the errors whose JSON-RPC answer carries no ``data`` (REST answers
#: always carry an ErrorInfo, so a client can tell two 400s apart).
REASONS: t.Final[dict[type[A2AError], str]] = {
    JSONParseError: "PARSE_ERROR",
    MethodNotFoundError: "METHOD_NOT_FOUND",
    MalformedBodyError: "MALFORMED_BODY",
    MethodNotAllowedError: "METHOD_NOT_ALLOWED",
    PayloadTooLargeError: "PAYLOAD_TOO_LARGE",
}

#: Query parameters that are booleans (``true``/``false`` on the wire, spec §11.5).
_BOOLEAN_QUERY: t.Final = frozenset({"includeArtifacts", "include_artifacts"})
#: The verbs every REST path may be asked with (for the CORS preflight).
_VERBS: t.Final = "GET, POST, DELETE"

Body = t.Literal["required", "optional", "none"]


class Route(t.NamedTuple):
    """A matched route: the exchange method it calls and what the path says."""

    method: str
    #: Params taken from the path (they win over the body's and the query's).
    path_params: dict[str, str]
    #: Whether the route reads a JSON body: POST routes do (cancel and subscribe may be empty).
    body: Body


def _resource(segments: list[str]) -> tuple[dict[str, tuple[str, Body]], dict[str, str]] | None:
    """HTTP verb -> (method, body), and the path params, for a path without a tenant."""
    n = len(segments)
    head = segments[0] if segments else ""
    if n == 1 and head == "message:send":
        return {"POST": ("SendMessage", "required")}, {}
    if n == 1 and head == "message:stream":
        return {"POST": ("SendStreamingMessage", "required")}, {}
    if n == 1 and head == "extendedAgentCard":
        return {"GET": ("GetExtendedAgentCard", "none")}, {}
    if head != "tasks" or n > 4:
        return None
    if n == 1:
        return {"GET": ("ListTasks", "none")}, {}
    task = segments[1]
    if n == 2 and task.endswith(":cancel"):
        return {"POST": ("CancelTask", "optional")}, {"id": task[: -len(":cancel")]}
    if n == 2 and task.endswith(":subscribe"):
        subscribe: tuple[str, Body] = ("SubscribeToTask", "optional")
        # The proto's annotation says GET, the spec's text POST: both are served.
        return {"GET": ("SubscribeToTask", "none"), "POST": subscribe}, {
            "id": task[: -len(":subscribe")]
        }
    if n == 2:
        return {"GET": ("GetTask", "none")}, {"id": task}
    if segments[2] != "pushNotificationConfigs":
        return None
    if n == 3:
        return {
            "POST": ("CreateTaskPushNotificationConfig", "required"),
            "GET": ("ListTaskPushNotificationConfigs", "none"),
        }, {"taskId": task}
    return {
        "GET": ("GetTaskPushNotificationConfig", "none"),
        "DELETE": ("DeleteTaskPushNotificationConfig", "none"),
    }, {"taskId": task, "id": segments[3]}


def match(path: str, verb: str) -> Route:
    """The route for ``path`` (below the mount, no leading slash) and ``verb``.

    A path no route has is tried again with its first segment as the ``/{tenant}`` prefix the
    proto's ``additional_bindings`` give. Unknown path: -32601 (404); a known path asked with
    another verb: 405 naming the verbs it takes.
    """
    segments = path.split("/")
    tenant = None
    found = _resource(segments)
    # An empty first segment (``{rest}//tasks``) is no tenant: that path is no route.
    if found is None and len(segments) > 1 and segments[0]:
        tenant, found = segments[0], _resource(segments[1:])
    if found is None:
        raise MethodNotFoundError(f"No A2A route at {scrub(path)[:100]!r}")
    verbs, path_params = found
    if verb not in verbs:
        allowed = ", ".join(verbs)
        raise MethodNotAllowedError(
            f"Method not allowed; use {allowed}", metadata={"allow": allowed}
        )
    method, body = verbs[verb]
    if tenant:
        path_params = {"tenant": tenant, **path_params}
    return Route(method, path_params, body)


def query_params(query: t.Any) -> dict[str, t.Any]:
    """A GET/DELETE route's query as params: each name once (a repeated one is -32602, as a
    repeated JSON key is a parse error), booleans read from ``true``/``false``."""
    out: dict[str, t.Any] = {}
    getlist = getattr(query, "getlist", None)
    for key in query:
        values = getlist(key) if getlist is not None else [query[key]]
        if len(values) != 1:
            raise InvalidParamsError(
                f"Invalid parameters: {scrub(key)[:40]}: given {len(values)} times",
                field_violations=[(scrub(key)[:40], "must be given once")],
            )
        value: t.Any = values[0]
        if key in _BOOLEAN_QUERY and value in ("true", "false"):
            value = value == "true"
        out[key] = value
    return out


def body_params(http: HTTPRequest, settings: Settings, body: Body) -> dict[str, t.Any]:
    """A POST route's JSON body: capped, its content type checked, parsed strictly; an empty
    body is no params where the route allows one (cancel, subscribe)."""
    if body == "none":
        return {}
    raw = read_body(http, settings)
    if body == "optional" and not raw.strip():
        return {}
    check_content_type(http)
    doc = jsonrpc.decode_json(raw)
    if not isinstance(doc, dict):
        raise InvalidParamsError(
            "Invalid parameters: the body must be a JSON object",
            field_violations=[("body", "must be an object")],
        )
    if len({key.lower() for key in doc}) != len(doc):
        raise JSONParseError("Invalid JSON payload: a key is spelled in two cases")
    return doc


def handle(
    http: HTTPRequest,
    path: str,
    settings: Settings,
    methods: t.Mapping[str, Method],
    extensions: Activation | None = None,
) -> Reply:
    """Run one REST request (``path`` below the mount) through the shared checks to its method."""
    activated: tuple[str, ...] = ()
    try:
        if http.method == "OPTIONS" and http.headers.get("Origin") is not None:
            return preflight(http, settings, _VERBS, refuse=error_reply)
        check_origin(http, settings)  # before the body is read
        route = match(path, http.method)
        if route.body == "none":
            params = query_params(http.query)
        else:
            params = body_params(http, settings, route.body)
        params.update(route.path_params)
        principal, method = admit(http, methods, route.method)
        if extensions is not None:  # -32008 here: before the method writes anything
            activated = extensions.activate(http.headers, route.method)
        call = Call(None, params, principal, http, activated, binding="rest")
        result = invoke(method, route.method, call)
        if isinstance(result, Reply):  # a stream: its events are bare StreamResponses
            reply = result
        else:  # DeleteTaskPushNotificationConfig answers google.protobuf.Empty: {}
            body = jsonrpc.encode_result({} if result is None else result)
            reply = Reply(200, list(JSON_HEADERS), body)
    except A2AError as exc:
        reply = error_reply(exc)
    except Exception as exc:
        reply = error_reply(internal_error(exc))
    return finish(http, reply, activated)


def status_of(error: A2AError) -> tuple[int, str]:
    """The HTTP status and the google.rpc.Code name of a refusal (``errors.STATUSES``)."""
    http, status, _ = statuses_of(error)
    return http, status


def reason_of(error: A2AError) -> str:
    if error.reason is not None:
        return error.reason
    for cls in type(error).__mro__:
        if cls in REASONS:
            return REASONS[cls]
    return "INTERNAL_ERROR"


def error_body(error: A2AError) -> dict[str, t.Any]:
    """The ``google.rpc.Status`` JSON of spec §11.6: ErrorInfo first (the JSON-RPC reason),
    then the BadRequest field violations, as JSON-RPC's ``error.data`` has them."""
    code, status = status_of(error)
    details = error.data()
    if details is None:
        details = [{
            "@type": ERROR_INFO_TYPE,
            "reason": reason_of(error),
            "domain": ERROR_DOMAIN,
            "metadata": {k: str(v) for k, v in error.metadata.items()},
        }]  # fmt: skip
    return {"error": {"code": code, "status": status, "message": error.message,
                      "details": details}}  # fmt: skip


def error_reply(error: A2AError) -> Reply:
    """The HTTP answer to a refusal; a streaming route's too (no stream is started)."""
    code, _ = status_of(error)
    headers = list(JSON_HEADERS)
    if isinstance(error, MethodNotAllowedError):
        headers.append(("Allow", error.metadata.get("allow", _VERBS)))
    elif isinstance(error, UnauthenticatedError):
        headers.append(("WWW-Authenticate", "Bearer"))
    return Reply(code, headers, jsonrpc.encode(error_body(error)))


def error_class_for_reason(reason: str) -> type[A2AError]:
    """The error class a REST ErrorInfo reason stands for (clients, the test client)."""
    for cls in STATUSES:
        if cls.reason == reason or REASONS.get(cls) == reason:
            return cls
    return A2AError
