"""The HTTP-level pipeline in front of the JSON-RPC method table. Imports nothing of Flask.

:func:`handle` takes an :class:`HTTPRequest` (bytes, headers and callables) and returns a
:class:`Reply` (a status, headers and a body or an SSE iterator), running the steps in the order
design.md §4 gives: method, Origin gate (before the body is read), body cap, content type,
strict JSON-RPC envelope, principal, ``A2A-Version``, method table. The Flask wiring in
``extension.py`` only adapts those two types; a server built by hand on Werkzeug can do the same.
The HTTP+JSON binding (``rest.py``) runs the same steps through the same functions here.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import typing as t
from urllib.parse import urlsplit

from . import jsonrpc, telemetry
from .agent_extensions import HEADER as EXTENSIONS_HEADER
from .agent_extensions import Activation
from .config import Settings
from .errors import (
    A2AError,
    ContentTypeNotSupportedError,
    ForbiddenOriginError,
    InternalError,
    MalformedBodyError,
    MethodNotAllowedError,
    MethodNotFoundError,
    PayloadTooLargeError,
    UnauthenticatedError,
    VersionNotSupportedError,
)
from .limits import check_principal
from .model import Principal
from .sse import HEADERS as SSE_HEADERS
from .sse import frame
from .tasks import scrub, scrub_exception

log = logging.getLogger("flask_a2a")

JSON_HEADERS: t.Final = (
    ("Content-Type", "application/json"),
    ("Cache-Control", "no-store"),
)
CONTENT_TYPES: t.Final = frozenset({"application/json", "application/a2a+json"})
#: Methods that answer a stream: once one of them is named, its JSON-RPC errors come as one
#: SSE event (clients that only read SSE, such as a browser's EventSource, can read them).
STREAMING_METHODS: t.Final = frozenset({"SendStreamingMessage", "SubscribeToTask"})
_VERSION = re.compile(r"^1(\.\d+){0,2}$")


class HeaderLookup(t.Protocol):
    """Case-insensitive header access (werkzeug's ``Headers``, or any mapping-like object)."""

    def get(self, key: str) -> t.Any: ...


@dataclasses.dataclass
class HTTPRequest:
    """What the exchange needs of an HTTP request (the web framework fills it in)."""

    method: str
    headers: HeaderLookup
    #: The request's own authority (``Host``), to compare a browser ``Origin`` against.
    host: str
    content_length: int | None
    #: Reads at most ``n`` bytes of the body.
    read_body: t.Callable[[int], bytes]
    #: Runs the host app's principal hook in the request's context.
    resolve_principal: t.Callable[[], Principal | None]
    query: t.Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: Re-resolves the caller for a long-lived stream (None: never re-checked).
    #: Called (inside the request) only for streams: returns a callable that re-resolves the
    #: caller later, at keep-alives (None: streams never re-check the caller).
    principal_refresher: t.Callable[[], t.Callable[[], Principal | None]] | None = None
    #: The connection's socket when the server exposes it (``gunicorn.socket``): a stream
    #: sees its client leave without waiting for a write to fail (``peer.py``).
    client_socket: t.Any = None


@dataclasses.dataclass
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: str | t.Iterator[str]

    @property
    def streaming(self) -> bool:
        return not isinstance(self.body, str)


class Call(t.NamedTuple):
    """One method call after the binding's checks (a JSON-RPC envelope, or a REST route)."""

    id: jsonrpc.RequestId
    params: dict[str, t.Any]
    principal: Principal
    http: HTTPRequest
    #: The card's extensions this request activated (``A2A-Extensions``), in the card's order.
    extensions: tuple[str, ...] = ()
    #: The binding the call came in on: ``"jsonrpc"``, or ``"rest"`` (``rest.py``), whose
    #: stream events are bare StreamResponse objects, not JSON-RPC responses.
    binding: str = "jsonrpc"


Method = t.Callable[[Call], t.Any]


def handle(
    http: HTTPRequest,
    settings: Settings,
    methods: t.Mapping[str, Method],
    extensions: Activation | None = None,
    streaming: t.Collection[str] = STREAMING_METHODS,
) -> Reply:
    """Run one request through the pipeline, in the order design.md §4 gives."""
    request_id: jsonrpc.RequestId | jsonrpc._NoId = jsonrpc.NO_ID
    activated: tuple[str, ...] = ()
    stream = False  # the request named a streaming method that exists
    try:
        if http.method == "OPTIONS" and http.headers.get("Origin") is not None:
            return preflight(http, settings)
        if http.method != "POST":
            raise MethodNotAllowedError()
        check_origin(http, settings)
        body = read_body(http, settings)
        check_content_type(http)
        try:
            request = jsonrpc.decode_request(body)
        except jsonrpc.RequestError as exc:
            request_id = exc.request_id
            raise exc.error from None
        request_id = request.id
        principal = authenticate(http)
        check_version(http)
        method = methods.get(request.method)
        if method is None:
            raise MethodNotFoundError(f"Method not found: {scrub(request.method)[:100]}")
        stream = request.method in streaming
        if extensions is not None:  # -32008 here: before the method writes anything
            activated = extensions.activate(http.headers, request.method)
        with telemetry.exchange_span(request.method, "jsonrpc") as span:
            result = method(Call(request.id, request.params, principal, http, activated))
            telemetry.note_result(span, result)
        reply = result if isinstance(result, Reply) else Reply(
            200, list(JSON_HEADERS), jsonrpc.success(request.id, result)
        )
    except A2AError as exc:
        reply = error_reply(request_id, exc, stream=stream)
    except Exception as exc:
        reply = error_reply(request_id, internal_error(exc), stream=stream)
    return finish(http, reply, activated)

def authenticate(http: HTTPRequest) -> Principal:
    """The caller, or 401 / -31401; an owner or tenant no store can hold is -32602."""
    principal = http.resolve_principal()
    if principal is None:
        raise UnauthenticatedError()
    check_principal(principal)
    return principal

def internal_error(exc: Exception) -> A2AError:
    """What the caller is told of an unexpected exception (logged, scrubbed, here); an HTTP
    answer already made (werkzeug's abort(), a client that left) is raised on."""
    if hasattr(exc, "get_response"):
        raise exc
    log.error("a2a: request failed\n%s", scrub_exception(exc))
    return InternalError()

def finish(http: HTTPRequest, reply: Reply, activated: t.Sequence[str]) -> Reply:
    """The headers every answer of either binding carries: activated extensions, CORS."""
    if activated:
        reply.headers.append((EXTENSIONS_HEADER, ",".join(activated)))
    origin = http.headers.get("Origin")
    if origin is not None and reply.status != 403:
        reply.headers.append(("Access-Control-Allow-Origin", origin))
        reply.headers.append(("Vary", "Origin"))
        if activated:  # a browser client may read it
            reply.headers.append(("Access-Control-Expose-Headers", EXTENSIONS_HEADER))
    return reply

def preflight(
    http: HTTPRequest,
    settings: Settings,
    methods: str = "POST",
    refuse: t.Callable[[A2AError], Reply] | None = None,
) -> Reply:
    """A browser's CORS preflight from an origin the gate lets through."""
    try:
        check_origin(http, settings)
    except ForbiddenOriginError as exc:
        return refuse(exc) if refuse is not None else error_reply(jsonrpc.NO_ID, exc)
    return Reply(
        204,
        [
            ("Access-Control-Allow-Origin", str(http.headers.get("Origin"))),
            ("Access-Control-Allow-Methods", methods),
            ("Access-Control-Allow-Headers",
             "Authorization, Content-Type, A2A-Version, A2A-Extensions, X-API-Key"),
            ("Access-Control-Max-Age", "600"),
            ("Vary", "Origin"),
        ],
        "",
    )

def error_reply(
    request_id: jsonrpc.RequestId | jsonrpc._NoId, error: A2AError, *, stream: bool = False
) -> Reply:
    """The JSON-RPC error answer. For a streaming method (``stream``) a JSON-RPC-level error
    is a stream holding exactly that response as one event; an HTTP-level refusal (401, 429…)
    keeps its status and JSON body."""
    if stream and error.http_status == 200:
        return Reply(200, list(SSE_HEADERS), frame(jsonrpc.failure(request_id, error)))
    headers = list(JSON_HEADERS)
    if isinstance(error, MethodNotAllowedError):
        headers.append(("Allow", "POST"))
    elif isinstance(error, UnauthenticatedError):
        headers.append(("WWW-Authenticate", "Bearer"))
    return Reply(error.http_status, headers, jsonrpc.failure(request_id, error))

def check_origin(http: HTTPRequest, settings: Settings) -> None:
    origin = http.headers.get("Origin")
    if origin is None:
        return  # curl and native A2A clients send none
    allowed = settings.allowed_origins
    if "*" in allowed or origin.rstrip("/").lower() in (a.rstrip("/").lower() for a in allowed):
        return
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:  # "http://[::1", "http://host:abc": no authority at all
        raise ForbiddenOriginError() from None
    if parts.scheme in ("http", "https") and parts.hostname:
        default = 443 if parts.scheme == "https" else 80
        authority = f"{parts.hostname}:{port or default}".lower()
        host = http.host.lower()
        if ":" not in host.rsplit("]", 1)[-1]:
            host = f"{host}:{default}"
        if authority == host or f"[{parts.hostname}]:{port or default}" == host:
            return
    raise ForbiddenOriginError()

def read_body(http: HTTPRequest, settings: Settings) -> bytes:
    cap = settings.max_body_bytes
    if http.content_length is not None and http.content_length > cap:
        raise PayloadTooLargeError()
    # A WSGI read may return less than asked (a body arriving in pieces): read to EOF,
    # never past one byte over the cap.
    body = bytearray()
    while len(body) <= cap:
        chunk = _read(http, cap + 1 - len(body))
        if not chunk:
            break
        body += chunk
    if len(body) > cap:
        raise PayloadTooLargeError()
    if http.content_length is not None and len(body) < http.content_length:
        # gunicorn ends a Content-Length body early, silently, when the client leaves.
        log.info(
            "a2a: request body unreadable: got %d of %d bytes (the client left)",
            len(body), http.content_length,
        )
        raise MalformedBodyError()
    return bytes(body)

def _read(http: HTTPRequest, size: int) -> bytes:
    """One read of the body; whatever the server's input stream raises is the transport's
    fault (a bad chunk size, a client gone mid-body): one short line and a 400."""
    try:
        return http.read_body(size)
    except Exception as exc:
        if hasattr(exc, "get_response") and getattr(exc, "code", None) != 400:
            raise  # another HTTP answer of the host's (werkzeug's 413 for MAX_CONTENT_LENGTH)
        log.info(
            "a2a: request body unreadable: %s: %s", type(exc).__name__, scrub(str(exc))[:200]
        )
        raise MalformedBodyError() from None

def check_content_type(http: HTTPRequest) -> None:
    mimetype = (http.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
    if mimetype not in CONTENT_TYPES:
        raise ContentTypeNotSupportedError(
            "Incompatible content types: send application/json"
        )

def check_version(http: HTTPRequest) -> None:
    version = (http.headers.get("A2A-Version") or http.query.get("A2A-Version") or "").strip()
    if version and not _VERSION.match(version):
        raise VersionNotSupportedError(
            f"Protocol version {scrub(version)[:20]} is not supported; this server speaks 1.0",
            metadata={"supportedVersions": "1.0"},
        )
