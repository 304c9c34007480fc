"""The gRPC binding (spec §10): one RPC of ``lf.a2a.v1.A2AService`` -> the exchange's method ->
its protobuf answer. Imports nothing of Flask; needs the ``grpc`` extra.

The message types are the spec's own, generated from ``a2a.proto`` and shipped by the official
SDK (``a2a.types.a2a_pb2``): no copy of the proto lives in this package. A request is read into
the very params dict its JSON-RPC call carries (ProtoJSON is the proto's own JSON), goes through
the same checks (``checks.admit``: the caller, ``a2a-version``; then the ``a2a-extensions`` it
activates) to the same method of :class:`~flask_a2a.exchange.methods.Exchange`, and the
method's ProtoJSON answer is parsed back into the RPC's response message; a stream's events one
by one, as the relay of ``exchange/streams.py`` yields them. A refusal is a
``google.rpc.Status`` (its ErrorInfo in domain ``a2a-protocol.org``, then the BadRequest of a
-32602) with the status code of the v1.0.1 mapping (``protocol/errors.py``'s ``STATUSES``, one
table with the HTTP+JSON binding's statuses), sent the gRPC way, in the
``grpc-status-details-bin`` trailer. The server that runs it is ``grpc_server.py``'s.
"""

from __future__ import annotations

import json
import typing as t

import grpc
from a2a.types import a2a_pb2
from google.protobuf import any_pb2, empty_pb2, json_format, message_factory
from google.protobuf.message import Message
from google.rpc import (
    error_details_pb2,  # noqa: F401 (ErrorInfo, BadRequest: packed by @type)
    status_pb2,
)

from ..exchange.calls import Call, HTTPRequest, Method, Reply
from ..protocol.errors import (
    A2AError,
    statuses_of,
)
from ..protocol.extensions import HEADER as EXTENSIONS_HEADER
from ..protocol.extensions import Activation
from . import grpc_messages, rest
from .checks import admit, internal_error, invoke

#: The service every RPC belongs to (``/lf.a2a.v1.A2AService/SendMessage``).
SERVICE: t.Final = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].full_name
#: The metadata key of the activated extensions in an answer (gRPC keys are lowercase).
EXTENSIONS_KEY: t.Final = EXTENSIONS_HEADER.lower()


class Rpc(t.NamedTuple):
    """One RPC of the service: its name (the exchange method's), message types, and whether it
    answers a stream (SendStreamingMessage, SubscribeToTask)."""

    name: str
    request: type[Message]
    response: type[Message]
    streaming: bool


def _rpcs() -> dict[str, Rpc]:
    service = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
    return {
        method.name: Rpc(
            method.name,
            message_factory.GetMessageClass(method.input_type),
            message_factory.GetMessageClass(method.output_type),
            method.server_streaming,
        )
        for method in service.methods
    }


#: Every RPC of ``lf.a2a.v1.A2AService`` by name, read from the SDK's descriptors.
RPCS: t.Final[dict[str, Rpc]] = _rpcs()


class Refusal(Exception):
    """An RPC refused: the gRPC status code and the ``google.rpc.Status`` the caller gets,
    and the initial metadata that goes with it (the extensions the call had activated)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        status: status_pb2.Status,
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(status.message)
        self.code = code
        self.status = status
        self.metadata = metadata


class Answer(t.NamedTuple):
    """What an RPC answers: its response message (unary) or the stream's body, and the
    initial metadata (the activated extensions)."""

    message: Message | None
    stream: Reply | None
    metadata: tuple[tuple[str, str], ...]


def params_of(request: Message) -> dict[str, t.Any]:
    """The request as the params dict a JSON-RPC call of the same method carries (its ProtoJSON:
    camelCase names, enums by name, bytes in base64, unset fields left out, whole numbers of
    data and metadata ints again: ``grpc_messages.json_numbers``)."""
    params = grpc_messages.json_numbers(json_format.MessageToDict(request))
    return t.cast(dict[str, t.Any], params)


def handle(
    http: HTTPRequest,
    methods: t.Mapping[str, Method],
    extensions: Activation | None,
    rpc: Rpc,
    request: Message,
) -> Answer:
    """Run one RPC through the checks to its exchange method; raises :class:`Refusal`.

    The order is the other bindings' (cheapest refusal first) for what gRPC has of it: the caller
    (UNAUTHENTICATED), ``a2a-version`` (-32009), the method, the activated extensions
    (-32008), then the method's own checks. grpcio already capped the message's size
    (``A2A_MAX_BODY_BYTES``) and decoded it: no Origin, body or content type is left to check.
    """
    activated: tuple[str, ...] = ()
    try:
        principal, method = admit(http, methods, rpc.name)
        activated = extensions.activate(http.headers, rpc.name) if extensions is not None else ()
        call = Call(None, params_of(request), principal, http, activated, binding="grpc")
        result = invoke(method, rpc.name, call)
    except A2AError as exc:  # a refusal of a method the call reached says what it activated
        raise refusal(exc, activated) from None
    except Exception as exc:
        raise refusal(internal_error(exc), activated) from None
    metadata = ((EXTENSIONS_KEY, ",".join(activated)),) if activated else ()
    if isinstance(result, Reply):
        return Answer(None, result, metadata)
    try:
        return Answer(response_of(rpc, result), None, metadata)
    except json_format.ParseError as exc:  # our own answer does not fit the proto: a bug here
        raise refusal(internal_error(exc), activated) from None


def response_of(rpc: Rpc, result: t.Any) -> Message:
    """A method's ProtoJSON answer (data, or already encoded) as the RPC's response message.
    Delete answers ``google.protobuf.Empty``; a card keeps what the proto has of it (a card
    serving v0.3 beside 1.0 carries v0.3's fields too)."""
    out = rpc.response()
    if result is None or isinstance(out, empty_pb2.Empty):
        return out
    if isinstance(result, str):  # jsonrpc.Encoded: a stored task's own encoding
        result = json.loads(result)
    return grpc_messages.parse(result, out, lenient=isinstance(out, a2a_pb2.AgentCard))


def events_of(body: t.Iterable[bytes]) -> t.Iterator[a2a_pb2.StreamResponse]:
    """A stream's SSE frames (each a bare StreamResponse's JSON: ``Call.binding`` is grpc) as
    StreamResponse messages; the relay's keep-alive comments have no gRPC form and are
    dropped (HTTP/2 keeps the connection alive; the relay still re-checks the caller). The
    error a stream may end with (a caller who no longer resolves: the ``google.rpc.Status``
    of HTTP+JSON) raises :class:`Refusal`: the call ends with that status."""
    for frame in body:
        if not frame.startswith(b"data: "):
            continue
        event = json.loads(frame[6:])
        if "error" in event:
            raise streamed_refusal(event["error"])
        yield grpc_messages.parse(event, a2a_pb2.StreamResponse())


def streamed_refusal(error: t.Mapping[str, t.Any]) -> Refusal:
    """A stream's error event (the HTTP+JSON binding's ``google.rpc.Status`` JSON) as the
    gRPC status the call ends with: its code by name, its message and details."""
    name = str(error.get("status", "INTERNAL"))
    code = getattr(grpc.StatusCode, name, grpc.StatusCode.INTERNAL)
    details = error.get("details")
    status = status_pb2.Status(
        code=code.value[0],
        message=str(error.get("message", "")),
        details=[_packed(d) for d in details if isinstance(d, dict)]
        if isinstance(details, list)
        else [],
    )
    return Refusal(code, status)


def code_of(error: A2AError) -> grpc.StatusCode:
    """The gRPC status code of a refusal (``errors.STATUSES``)."""
    return grpc.StatusCode[statuses_of(error).grpc]


def status_of(error: A2AError) -> status_pb2.Status:
    """The ``google.rpc.Status`` of a refusal: the gRPC code, the error's message, and the
    details the HTTP+JSON binding sends (ErrorInfo first, then BadRequest), packed."""
    code = code_of(error)
    details = rest.error_body(error)["error"]["details"]
    return status_pb2.Status(
        code=code.value[0],
        message=error.message,
        details=[_packed(detail) for detail in details],
    )


def _packed(detail: dict[str, t.Any]) -> any_pb2.Any:
    packed = any_pb2.Any()
    json_format.ParseDict(detail, packed)
    return packed


def refusal(error: A2AError, activated: t.Sequence[str] = ()) -> Refusal:
    metadata = ((EXTENSIONS_KEY, ",".join(activated)),) if activated else ()
    return Refusal(code_of(error), status_of(error), metadata)
