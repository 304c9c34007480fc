"""Which interface of an agent card the client talks to, and the transport that speaks it.

A client picks the way the official SDK does: the card's ``supportedInterfaces`` in the card's
order (the first is the agent's preference), the first whose ``protocolBinding`` it speaks and
whose ``protocolVersion`` is 1.x; ``binding=`` narrows the choice to one binding. Each binding
is one :class:`Transport` class in a registry, :data:`TRANSPORTS` (``jsonrpc.py``, ``rest.py``,
``grpc_transport.py``) unless a client was given its own (``A2AClient(transports=...)``), so
another binding is one more entry, and nothing above the transport knows the wire. The
functions here take the registry to read; a client passes its own. gRPC is spoken with the
``grpc`` extra only: without it a card's ``GRPC`` interface is passed over (and asking for it
says what to install).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import typing as t
from urllib.parse import urljoin

from .jsonrpc import JsonRpcTransport
from .requester import Requester
from .rest import RestTransport
from .sse import A2AClientError, EventStream, Timeout

#: The A2A ``protocolBinding`` names this client speaks, in the order it prefers them.
JSONRPC: t.Final = "JSONRPC"
HTTP_JSON: t.Final = "HTTP+JSON"
GRPC: t.Final = "GRPC"

#: Other spellings a caller may use for ``binding=`` / ``--binding``.
_ALIASES: t.Final = {"jsonrpc": JSONRPC, "json-rpc": JSONRPC, "http+json": HTTP_JSON,
                     "rest": HTTP_JSON, "http-json": HTTP_JSON, "grpc": GRPC}  # fmt: skip
#: What a client without the extra is told when gRPC is asked for.
GRPC_EXTRA: t.Final = "the GRPC binding needs the grpc extra: pip install 'flask-a2a[grpc]'"


class Transport(t.Protocol):
    """One binding's wire: a method name and its ProtoJSON params in, the result out (or the
    server's error raised as its class), or a stream of typed events."""

    #: The ``protocolBinding`` it speaks.
    binding: str
    #: The interface URL.
    url: str

    def call(self, method: str, params: dict[str, t.Any], timeout: Timeout) -> t.Any: ...

    def stream(self, method: str, params: dict[str, t.Any], timeout: Timeout) -> EventStream: ...


#: Makes the transport of one interface: ``(url, requester, tenant)``.
TransportClass = t.Callable[[str, Requester, t.Optional[str]], Transport]
#: A registry: ``protocolBinding`` (the card's spelling) -> the transport class that speaks it,
#: in the order a client prefers them (its first is the binding of a client told none).
Transports = t.Mapping[str, TransportClass]


def _grpc_transport(url: str, session: Requester, tenant: str | None) -> Transport:
    """The gRPC transport, imported when first used (the ``grpc`` extra)."""
    if not grpc_spoken():
        raise A2AClientError(GRPC_EXTRA)
    from .grpc_transport import GrpcTransport

    return GrpcTransport(url, session, tenant)


@functools.cache
def grpc_spoken() -> bool:
    """grpcio, grpcio-status and the SDK's generated messages import (once, on first use)."""
    try:
        for name in ("grpc", "grpc_status.rpc_status", "a2a.types.a2a_pb2"):
            importlib.import_module(name)
    except ImportError:
        return False
    return True


#: The registry a client uses unless given its own (``A2AClient(transports=...)``).
TRANSPORTS: t.Final[dict[str, TransportClass]] = {
    JSONRPC: JsonRpcTransport,
    HTTP_JSON: RestTransport,
    GRPC: _grpc_transport,
}


def binding_name(binding: str, transports: Transports = TRANSPORTS) -> str:
    """``binding`` in the card's spelling (``JSONRPC``, ``HTTP+JSON``, ``GRPC``); ValueError
    unless ``transports`` speaks it."""
    name = _ALIASES.get(binding.strip().lower(), binding.strip().upper())
    if name not in transports:
        raise ValueError(
            f"unknown binding {binding!r}: use one of {', '.join(transports)}"
            + (" (or 'rest')" if HTTP_JSON in transports else "")
        )
    return name


@dataclasses.dataclass(frozen=True)
class Interface:
    """One ``AgentInterface`` of a card: where and how to talk to the agent."""

    url: str
    binding: str
    tenant: str | None = None
    version: str = "1.0"


def interfaces(
    card: t.Mapping[str, t.Any], card_url: str, transports: Transports = TRANSPORTS
) -> list[Interface]:
    """The card's 1.x interfaces of the bindings ``transports`` speaks, in the card's order;
    an HTTP one's URL absolute, a gRPC one's ``host:port`` as it is."""
    found = []
    for entry in card.get("supportedInterfaces") or ():
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            continue
        named = str(entry.get("protocolBinding", ""))
        binding = _ALIASES.get(named.lower(), named.upper())
        version = str(entry.get("protocolVersion", ""))
        if binding not in transports or not (version == "1" or version.startswith("1.")):
            continue
        tenant = entry.get("tenant")
        url = entry["url"] if binding == GRPC else urljoin(card_url, entry["url"])
        found.append(Interface(
            url, binding, tenant if isinstance(tenant, str) and tenant else None, version,
        ))  # fmt: skip
    return found


def choose(
    card: t.Mapping[str, t.Any],
    card_url: str,
    binding: str | None = None,
    transports: Transports = TRANSPORTS,
) -> Interface:
    """The interface to use: the card's first one ``transports`` speaks (of ``binding`` when
    given; a gRPC one, with the module's gRPC transport, only with the ``grpc`` extra).
    Raises :class:`A2AClientError` when the card offers none."""
    wanted = binding_name(binding, transports) if binding is not None else None
    listed = interfaces(card, card_url, transports)
    for interface in listed:
        if interface.binding == GRPC and not _speaks_grpc(transports):
            continue
        if wanted is None or interface.binding == wanted:
            return interface
    offered = wanted or " or ".join(transports)
    missing = any(i.binding == GRPC for i in listed) and wanted in (None, GRPC)
    hint = f" ({GRPC_EXTRA})" if missing else ""
    raise A2AClientError(f"the agent card at {card_url} offers no {offered} 1.x interface{hint}")


def _speaks_grpc(transports: Transports) -> bool:
    """A registry's gRPC transport can be used (the module's needs the ``grpc`` extra)."""
    return transports.get(GRPC) is not _grpc_transport or grpc_spoken()


def at_url(
    card: t.Mapping[str, t.Any], card_url: str, url: str, transports: Transports = TRANSPORTS
) -> Interface | None:
    """The card's interface served at ``url`` (an endpoint the caller named), if it lists one
    that ``transports`` speaks."""
    for interface in interfaces(card, card_url, transports):
        if interface.url.rstrip("/") == url.rstrip("/"):
            return interface
    return None


def transport(
    interface: Interface,
    session: Requester,
    tenant: str | None,
    transports: Transports = TRANSPORTS,
) -> Transport:
    """The transport for ``interface``, from ``transports``; ``tenant`` (the caller's, else the
    interface's) goes into every request, as spec §5.3 asks."""
    return transports[interface.binding](
        interface.url, session, tenant if tenant is not None else interface.tenant
    )
