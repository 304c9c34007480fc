"""What passes between a binding and the exchange: the request, one method call, the reply.

A binding (``bindings/jsonrpc.py``, ``bindings/rest.py``) turns an HTTP request into a
:class:`Call` (params, the principal, the activated extensions) for one exchange method; the
method returns a result, or a :class:`Reply` when it answers a stream. The web framework only
fills in an :class:`HTTPRequest` and writes out a :class:`Reply`. Imports nothing of Flask.
"""

from __future__ import annotations

import dataclasses
import typing as t

from ..protocol import jsonrpc
from ..protocol.model import Principal


class HeaderLookup(t.Protocol):
    """Case-insensitive header access (werkzeug's ``Headers``, or any mapping-like object)."""

    def get(self, key: str) -> t.Any: ...


class HTTPRequest:
    """What the exchange needs of an HTTP request (the web framework fills it in).

    ``host``, ``query`` and ``client_socket`` are read through properties, so an adapter may
    compute them only when a binding asks (most requests never need them).
    """

    def __init__(
        self,
        method: str,
        headers: HeaderLookup,
        host: str,
        content_length: int | None,
        read_body: t.Callable[[int], bytes],
        resolve_principal: t.Callable[[], Principal | None],
        query: t.Mapping[str, str] | None = None,
        principal_refresher: t.Callable[[], t.Callable[[], Principal | None]] | None = None,
        client_socket: t.Any = None,
        environ: t.Mapping[str, t.Any] | None = None,
    ) -> None:
        self.method = method
        self.headers = headers
        self.content_length = content_length
        #: Reads at most ``n`` bytes of the body.
        self.read_body = read_body
        #: Runs the host app's principal hook in the request's context.
        self.resolve_principal = resolve_principal
        #: Called (inside the request) only for streams: returns a callable that re-resolves the
        #: caller later, at keep-alives (None: streams never re-check the caller).
        self.principal_refresher = principal_refresher
        self._host = host
        self._query = query
        self._client_socket = client_socket
        self._environ = environ

    @property
    def host(self) -> str:
        """The request's own authority (``Host``), to compare a browser ``Origin`` against."""
        return self._host

    @property
    def query(self) -> t.Mapping[str, str]:
        return self._query if self._query is not None else {}

    @property
    def environ(self) -> t.Mapping[str, t.Any]:
        """The request's WSGI environ (empty when there is none): where the call came from,
        for a run that re-enters the app as its caller (``reentry.origin_environ``)."""
        return self._environ if self._environ is not None else {}

    @property
    def client_socket(self) -> t.Any:
        """The connection's socket when the server exposes it (``gunicorn.socket``): a stream
        sees its client leave without waiting for a write to fail (``peer.py``)."""
        return self._client_socket


@dataclasses.dataclass
class Reply:
    status: int
    headers: list[tuple[str, str]]
    #: The answer, or a stream's events (encoded: the server writes them as they come).
    body: str | t.Iterator[bytes]

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
    #: The binding the call came in on: ``"jsonrpc"``, ``"rest"`` (``rest.py``) or ``"grpc"``
    #: (``grpc_binding.py``), whose stream events are bare StreamResponse objects, not JSON-RPC
    #: responses.
    binding: str = "jsonrpc"
    #: The A2A version the binding speaks (``"1.0"``, or ``"0.3"`` from ``bindings/v03.py``).
    #: The exchange never reads it; it only hands it to what outlives the call: a push
    #: config remembers the shape its webhooks are sent in.
    protocol_version: str = "1.0"


Method = t.Callable[[Call], t.Any]
