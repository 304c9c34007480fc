"""The client's gRPC transport: each method one RPC of ``lf.a2a.v1.A2AService`` (the official
SDK's generated messages), its ProtoJSON params parsed into the request, the answer back into
ProtoJSON, so nothing above the transport knows the wire. Needs the ``grpc`` extra.

The session's headers go as metadata (``authorization``, ``a2a-version``, the caller's own), as
the spec's gRPC binding carries its service parameters. An address is ``host:port`` (the card's
form), spoken in plaintext; ``grpcs://host:port``, or port 443, over TLS with the system's
roots. Whole numbers in data come back as ints, as JSON-RPC hands them (a protobuf ``Value``
holds doubles). A refusal's ``google.rpc.Status`` comes back as the server's error class, read
from its ErrorInfo as over HTTP+JSON; a server that is not there is ``requests.ConnectionError``
and a deadline ``requests.Timeout``, as on the other transports.
"""

from __future__ import annotations

import base64
import typing as t

import grpc
import requests
from google.protobuf import json_format
from grpc_status import rpc_status

from ..bindings.grpc_binding import RPCS, SERVICE
from ..bindings.grpc_messages import json_numbers
from ..bindings.rest import error_class_for_reason
from ..protocol.errors import ERROR_DOMAIN, ERROR_INFO_TYPE, error_from_dict
from .requester import BearerAuth, Requester
from .sse import A2AClientError, EventStream, Timeout

#: Session headers that are HTTP/1.1's own and no gRPC metadata (HTTP/2 forbids some).
_NOT_METADATA: t.Final = frozenset(
    {"accept", "accept-encoding", "connection", "content-length", "content-type", "host",
     "keep-alive", "te", "transfer-encoding", "upgrade", "user-agent"}
)  # fmt: skip
_TLS_SCHEME: t.Final = "grpcs://"


class GrpcTransport:
    """Speaks the gRPC binding to ``url`` (``host:port``); ``tenant`` goes into every request."""

    binding = "GRPC"

    def __init__(self, url: str, session: Requester, tenant: str | None = None) -> None:
        self.url = url
        self.session = session
        self.tenant = tenant
        target = url[len(_TLS_SCHEME) :] if url.startswith(_TLS_SCHEME) else url
        if url.startswith(_TLS_SCHEME) or target.endswith(":443"):
            self.channel = grpc.secure_channel(target, grpc.ssl_channel_credentials())
        else:
            self.channel = grpc.insecure_channel(target)

    def call(self, method: str, params: dict[str, t.Any], timeout: Timeout) -> t.Any:
        rpc = RPCS[method]
        stub = self.channel.unary_unary(
            f"/{SERVICE}/{method}",
            request_serializer=rpc.request.SerializeToString,
            response_deserializer=rpc.response.FromString,
        )
        request = self._request(method, params)
        try:
            response = stub(request, metadata=self._metadata(), timeout=_seconds(timeout))
        except grpc.RpcError as exc:
            raise error_of(exc) from None
        if method == "DeleteTaskPushNotificationConfig":
            return None  # google.protobuf.Empty: JSON-RPC's null
        return json_numbers(json_format.MessageToDict(response))

    def stream(self, method: str, params: dict[str, t.Any], timeout: Timeout) -> EventStream:
        """A server stream. It has no deadline: gRPC has no bound on the silence between two
        messages (the read part of ``timeout``), and the stream ends with its task."""
        rpc = RPCS[method]
        stub = self.channel.unary_stream(
            f"/{SERVICE}/{method}",
            request_serializer=rpc.request.SerializeToString,
            response_deserializer=rpc.response.FromString,
        )
        call = stub(self._request(method, params), metadata=self._metadata())
        return EventStream(_Cancel(call), _as_is, results=_results(call)).open()

    def close(self) -> None:
        self.channel.close()

    def _request(self, method: str, params: dict[str, t.Any]) -> t.Any:
        if self.tenant is not None:
            params = {"tenant": self.tenant, **params}
        try:
            return json_format.ParseDict(params, RPCS[method].request())
        except json_format.ParseError as exc:
            raise ValueError(f"{method}: {exc}") from None

    def _metadata(self) -> list[tuple[str, str]]:
        """The session's headers as metadata (keys lowercased, as gRPC wants them)."""
        # The session's headers under the client's own (``requester.Requester``), and its
        # credentials: the client's token, else the session's auth.
        headers = {**self.session.session.headers, **self.session.headers}
        metadata = [
            (str(key).lower(), str(value))
            for key, value in headers.items()
            if value is not None and str(key).lower() not in _NOT_METADATA
        ]
        auth = self.session.auth if self.session.auth is not None else self.session.session.auth
        if isinstance(auth, BearerAuth):
            metadata.append(("authorization", f"Bearer {auth.token}"))
        elif isinstance(auth, tuple) and len(auth) == 2:  # requests' basic auth
            pair = f"{auth[0]}:{auth[1]}".encode("latin-1")
            metadata.append(("authorization", "Basic " + base64.b64encode(pair).decode()))
        elif auth is not None:
            raise A2AClientError(
                "the gRPC binding sends headers only: give the client token= or headers= "
                "(or auth=(user, password)), not a requests auth object"
            )
        return metadata


class _Cancel:
    """What the event stream closes: the call, cancelled (the server frees its seat)."""

    def __init__(self, call: t.Any) -> None:
        self.call = call

    def close(self) -> None:
        self.call.cancel()


def _as_is(payload: t.Any) -> t.Any:
    return payload


def _results(call: t.Any) -> t.Iterator[dict[str, t.Any]]:
    try:
        for message in call:
            yield json_numbers(json_format.MessageToDict(message))
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.CANCELLED:  # closed by us: the stream simply ends
            return
        raise error_of(exc) from None


def _seconds(timeout: Timeout) -> float:
    """A call's deadline: (connect, read) add up, as a whole call's bound."""
    return float(sum(timeout)) if isinstance(timeout, tuple) else float(timeout)


def error_of(exc: grpc.RpcError) -> Exception:
    """The error a refused call stands for: the server's error class, read from the ErrorInfo
    (domain ``a2a-protocol.org``) of its ``google.rpc.Status``, with its message, metadata and
    field violations; a transport failure as the ``requests`` exception it is elsewhere."""
    code = exc.code()
    message = exc.details() or ""
    try:
        status = rpc_status.from_call(exc)
    except ValueError:  # a status whose code disagrees with the call's
        status = None
    if status is not None:
        details = [json_format.MessageToDict(detail) for detail in status.details]
        for detail in details:
            if detail.get("@type") == ERROR_INFO_TYPE and detail.get("domain") == ERROR_DOMAIN:
                cls = error_class_for_reason(str(detail.get("reason", "")))
                return error_from_dict(
                    {"code": cls.code, "message": status.message, "data": details}
                )
    if code == grpc.StatusCode.UNAVAILABLE:
        return requests.ConnectionError(f"gRPC UNAVAILABLE: {message}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return requests.Timeout(f"gRPC DEADLINE_EXCEEDED: {message}")
    return A2AClientError(f"gRPC {code.name}: {message}")
