"""The checks both bindings share, in front of the exchange. Imports nothing of Flask.

The JSON-RPC binding (``jsonrpc.py``) and the HTTP+JSON binding (``rest.py``) run the same
steps through the same functions here, in the same order (cheapest refusal first: Origin
gate before the body is read, body cap, content type, principal, ``A2A-Version``); and
:func:`finish` adds the headers every answer carries. The Flask wiring (``views.py``) only
adapts :class:`~flask_a2a.exchange.calls.HTTPRequest` and
:class:`~flask_a2a.exchange.calls.Reply`.
"""

from __future__ import annotations

import logging
import re
import typing as t
from urllib.parse import urlsplit

from ..config import Settings
from ..exchange.calls import Call, HTTPRequest, Method, Reply
from ..ops import telemetry
from ..protocol.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    ForbiddenOriginError,
    InternalError,
    MalformedBodyError,
    MethodNotFoundError,
    PayloadTooLargeError,
    UnauthenticatedError,
    VersionNotSupportedError,
)
from ..protocol.extensions import HEADER as EXTENSIONS_HEADER
from ..protocol.limits import check_principal
from ..protocol.model import Principal
from ..protocol.scrub import scrub, scrub_exception
from ..store.base import unavailable_error, unreachable

log = logging.getLogger("flask_a2a")

JSON_HEADERS: t.Final = (
    ("Content-Type", "application/json"),
    ("Cache-Control", "no-store"),
)
CONTENT_TYPES: t.Final = frozenset({"application/json", "application/a2a+json"})
_VERSION = re.compile(r"^1(\.\d+){0,2}$")
_VERSION_03 = re.compile(r"^0\.3(\.\d+)?$")


def admit(
    http: HTTPRequest,
    methods: t.Mapping[str, Method],
    name: str,
    legacy: t.Mapping[str, t.Mapping[str, Method]] | None = None,
) -> tuple[Principal, Method]:
    """What every binding checks once it knows the method's name, in this order: the caller
    (401 / -31401), the ``A2A-Version`` (-32009), the method itself (-32601).

    ``legacy``: the method tables of the other versions served (``{"0.3": ...}`` when
    ``A2A_PROTOCOL_VERSIONS`` holds it); :func:`requested_version` picks the table.
    """
    principal = authenticate(http)
    version = requested_version(http, name, legacy or {})
    table = methods if version == "1.0" else (legacy or {}).get(version, {})
    method = table.get(name)
    if method is None:
        raise MethodNotFoundError(f"Method not found: {scrub(name)[:100]}")
    return principal, method


def invoke(method: Method, name: str, call: Call) -> t.Any:
    """Run the exchange method inside its ``a2a.<name>`` span (named after ``call.binding``)."""
    with telemetry.exchange_span(name, _SPAN_BINDING[call.binding]) as span:
        result = method(call)
        telemetry.note_result(span, result)
    return result


#: ``Call.binding`` -> the binding a span names (the A2A ``protocolBinding`` spelling, lowered).
_SPAN_BINDING: t.Final = {"jsonrpc": "jsonrpc", "rest": "http+json", "grpc": "grpc"}


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
    answer = getattr(exc, "answer", None)
    if isinstance(answer, A2AError):  # a store's refusal meant for the caller; it logged why
        return answer
    log.error("a2a: request failed\n%s", scrub_exception(exc))
    if unreachable(exc):  # the store's database did not answer: the caller may try again
        return unavailable_error()
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
    methods: str,
    refuse: t.Callable[[A2AError], Reply],
) -> Reply:
    """A browser's CORS preflight from an origin the gate lets through; ``refuse`` is the
    binding's own error answer for an origin the gate stops."""
    try:
        check_origin(http, settings)
    except ForbiddenOriginError as exc:
        return refuse(exc)
    return Reply(
        204,
        [
            ("Access-Control-Allow-Origin", str(http.headers.get("Origin"))),
            ("Access-Control-Allow-Methods", methods),
            (
                "Access-Control-Allow-Headers",
                "Authorization, Content-Type, A2A-Version, A2A-Extensions, X-API-Key",
            ),
            ("Access-Control-Max-Age", "600"),
            ("Vary", "Origin"),
        ],
        "",
    )


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
    got = 0
    while got <= cap:
        chunk = _read(http, cap + 1 - got)
        if not chunk:
            break
        body += chunk
        got += len(chunk)
    if got > cap:
        raise PayloadTooLargeError()
    if http.content_length is not None and got < http.content_length:
        # gunicorn ends a Content-Length body early, silently, when the client leaves.
        log.info(
            "a2a: request body unreadable: got %d of %d bytes (the client left)",
            got,
            http.content_length,
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
        log.info("a2a: request body unreadable: %s: %s", type(exc).__name__, scrub(str(exc))[:200])
        raise MalformedBodyError() from None


def check_content_type(http: HTTPRequest) -> None:
    mimetype = (http.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
    if mimetype not in CONTENT_TYPES:
        raise ContentTypeNotSupportedError(
            "Incompatible content types: send application/json or application/a2a+json"
        )


def requested_version(http: HTTPRequest, name: str, legacy: t.Collection[str] = ()) -> str:
    """Which version a call speaks (docs/protocol-versions.md): the ``A2A-Version`` header
    (or query parameter) when given; without one, a slash-form method name (``message/send``)
    is 0.3 and any other (``SendMessage``) 1.0, so ``curl`` without the header keeps working.
    An explicit version this server does not serve is -32009; ``legacy``: the versions served
    beside 1.0."""
    version = (http.headers.get("A2A-Version") or http.query.get("A2A-Version") or "").strip()
    if not version:
        return "0.3" if "/" in name else "1.0"
    if _VERSION.match(version):
        return "1.0"
    if _VERSION_03.match(version) and "0.3" in legacy:
        return "0.3"
    supported = ", ".join(["1.0", *legacy])
    raise VersionNotSupportedError(
        f"Protocol version {scrub(version)[:20]} is not supported; this server speaks {supported}",
        metadata={"supportedVersions": supported},
    )
