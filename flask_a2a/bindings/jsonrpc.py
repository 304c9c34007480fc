"""The JSON-RPC binding: one POST with a JSON-RPC envelope -> one exchange method -> the answer.

:func:`handle` runs the steps in one fixed order, cheapest refusal first, so that what needs no
body is refused before any is read and what needs no caller before the host's hook runs:
method, Origin gate (before the body is read), body cap, content type, strict JSON-RPC
envelope, principal, ``A2A-Version``, method table (docs/errors.md lists it for users). The
checks themselves live in ``checks.py``, shared with the HTTP+JSON binding
(``rest.py``). Imports nothing of Flask.
"""

from __future__ import annotations

import typing as t

from ..config import Settings
from ..exchange.calls import Call, HTTPRequest, Method, Reply
from ..exchange.streams import HEADERS as SSE_HEADERS
from ..exchange.streams import frame
from ..protocol import jsonrpc
from ..protocol.errors import (
    A2AError,
    MethodNotAllowedError,
    UnauthenticatedError,
)
from ..protocol.extensions import Activation
from . import v03
from .checks import (
    JSON_HEADERS,
    admit,
    check_content_type,
    check_origin,
    finish,
    internal_error,
    invoke,
    preflight,
    read_body,
    requested_version,
)

#: Methods that answer a stream: once one of them is named, its JSON-RPC errors come as one
#: SSE event (clients that only read SSE, such as a browser's EventSource, can read them).
STREAMING_METHODS: t.Final = frozenset({"SendStreamingMessage", "SubscribeToTask"})


def handle(
    http: HTTPRequest,
    settings: Settings,
    methods: t.Mapping[str, Method],
    extensions: Activation | None = None,
    streaming: t.Collection[str] = STREAMING_METHODS,
    legacy: t.Mapping[str, t.Mapping[str, Method]] | None = None,
) -> Reply:
    """Run one request through the pipeline, in the module's order (cheapest refusal first).

    ``legacy``: the method tables of the older versions served beside 1.0 (``{"0.3":
    v03.methods(...)}``), chosen per call by ``checks.requested_version``.
    """
    request_id: jsonrpc.RequestId | jsonrpc._NoId = jsonrpc.NO_ID
    activated: tuple[str, ...] = ()
    stream = False  # the request named a streaming method that exists
    try:
        if http.method == "OPTIONS" and http.headers.get("Origin") is not None:
            return preflight(http, settings, "POST", _refuse_origin)
        if http.method != "POST":
            raise MethodNotAllowedError()
        check_origin(http, settings)
        body = read_body(http, settings)
        check_content_type(http)
        try:
            request = jsonrpc.decode_request(body, _id_required(http, legacy))
        except jsonrpc.RequestError as exc:
            request_id = exc.request_id
            raise exc.error from None
        request_id = request.id
        principal, method = admit(http, methods, request.method, legacy)
        stream = request.method in streaming or request.method in v03.STREAMING_METHODS
        if request.id is jsonrpc.NO_ID:  # a v0.3 method named without an id: never run
            raise v03.no_id_error()
        if extensions is not None:  # -32008 here: before the method writes anything
            activated = extensions.activate(http.headers, request.method)
        call = Call(request.id, request.params, principal, http, activated)
        result = invoke(method, request.method, call)
        reply = (
            result
            if isinstance(result, Reply)
            else Reply(200, list(JSON_HEADERS), jsonrpc.success(request.id, result))
        )
    except A2AError as exc:
        reply = error_reply(request_id, exc, stream=stream)
    except Exception as exc:
        reply = error_reply(request_id, internal_error(exc), stream=stream)
    return finish(http, reply, activated)


def _id_required(
    http: HTTPRequest, legacy: t.Mapping[str, t.Mapping[str, Method]] | None
) -> t.Callable[[t.Any], bool]:
    """Whether a request naming ``method`` must carry an ``id``: always in v1.0 (-32600, as
    before); a v0.3 call without one is read on, so that an unknown method is -32601 as the
    v0.3 suite expects, and a known one -32602 (``v03.no_id_error``), as the a2a-sdk 0.3
    server answers it."""

    def required(method: t.Any) -> bool:
        if not legacy or v03.VERSION not in legacy:
            return True
        try:
            name = method if isinstance(method, str) else ""
            return requested_version(http, name, legacy) != v03.VERSION
        except A2AError:
            return True  # a version not served: -32600 first, as before

    return required


def error_reply(
    request_id: jsonrpc.RequestId | jsonrpc._NoId, error: A2AError, *, stream: bool = False
) -> Reply:
    """The JSON-RPC error answer. For a streaming method (``stream``) a JSON-RPC-level error
    is a stream holding exactly that response as one event; an HTTP-level refusal (401, 429…)
    and an error raised ``before_stream`` keep their status and JSON body."""
    if stream and error.http_status == 200 and not error.before_stream:
        return Reply(200, list(SSE_HEADERS), frame(jsonrpc.failure(request_id, error)))
    headers = list(JSON_HEADERS)
    if isinstance(error, MethodNotAllowedError):
        headers.append(("Allow", "POST"))
    elif isinstance(error, UnauthenticatedError):
        headers.append(("WWW-Authenticate", "Bearer"))
    return Reply(error.http_status, headers, jsonrpc.failure(request_id, error))


def _refuse_origin(error: A2AError) -> Reply:
    """A preflight from an origin the gate stops: the JSON-RPC error answer, no id."""
    return error_reply(jsonrpc.NO_ID, error)
