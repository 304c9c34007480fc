"""The client speaking A2A v0.3, for an agent whose card offers nothing newer.

:meth:`A2AClient.from_card_url` picks the card's first 1.x interface (``bindings.choose``);
when the card offers none and offers JSON-RPC in v0.3 (a v0.3 card's ``url`` /
``preferredTransport`` / ``additionalInterfaces``, or a ``supportedInterfaces`` entry whose
``protocolVersion`` is 0.3) the client keeps its v1.0 API and talks through a
:class:`V03Transport`: the method and params become v0.3's (``protocol/v03.py``), and the answer
is read back into the v1.0 JSON the client reads. ``ListTasks`` has no v0.3 method and raises.
"""

from __future__ import annotations

import typing as t
from urllib.parse import urljoin

from ..protocol import v03
from ..protocol.errors import A2AError
from .jsonrpc import JsonRpcTransport
from .sse import A2AClientError, EventStream, Timeout

#: Sent as ``A2A-Version`` by a client speaking v0.3.
VERSION: t.Final = "0.3"


def legacy_endpoint(card: t.Mapping[str, t.Any], card_url: str) -> str | None:
    """The card's v0.3 JSON-RPC URL when it offers JSON-RPC in v0.3 only; None when it offers
    a 1.x JSON-RPC interface (or JSON-RPC in no version)."""
    listed = [
        i
        for i in card.get("supportedInterfaces") or ()
        if isinstance(i, dict)
        and isinstance(i.get("url"), str)
        and str(i.get("protocolBinding", "")).upper() == "JSONRPC"
    ]
    if any(str(i.get("protocolVersion", "")).startswith("1") for i in listed):
        return None
    for interface in listed:
        if str(interface.get("protocolVersion", "")).startswith("0.3"):
            return urljoin(card_url, str(interface["url"]))
    if listed or not str(card.get("protocolVersion", "")).startswith("0.3"):
        return None
    # A v0.3 card: its main URL speaks preferredTransport; the others are listed beside it.
    candidates = [(card.get("preferredTransport") or "JSONRPC", card.get("url"))]
    candidates += [
        (i.get("transport"), i.get("url"))
        for i in card.get("additionalInterfaces") or ()
        if isinstance(i, dict)
    ]
    for transport, url in candidates:
        if str(transport).upper() == "JSONRPC" and isinstance(url, str):
            return urljoin(card_url, url)
    return None


class Dialect:
    """A v1.0 call (the client's) as the v0.3 one, and the v0.3 answer as the v1.0 one."""

    version: t.ClassVar[str] = VERSION

    def request(self, method: str, params: dict[str, t.Any]) -> tuple[str, dict[str, t.Any]]:
        name = v03.METHODS.get(method)
        if name is None:
            raise A2AClientError(f"{method} has no A2A v0.3 method; the agent serves only v0.3")
        return name, v03.request_params(method, params)

    def result(self, method: str, result: t.Any) -> t.Any:
        try:
            return v03.v1_result(method, result)
        except (A2AError, ValueError, KeyError, TypeError) as exc:
            raise A2AClientError(f"the v0.3 answer to {method} is not readable: {exc}") from None

    def event(self, result: t.Any) -> t.Any:
        """One stream event (a v0.3 result, by its ``kind``) as its model object."""
        try:
            return v03.load_event(result)
        except (A2AError, ValueError, KeyError, TypeError) as exc:
            raise A2AClientError(f"a v0.3 stream event is not readable: {exc}") from None


class V03Transport(JsonRpcTransport):
    """The JSON-RPC binding in A2A v0.3 (``A2A-Version: 0.3``; v0.3 has no tenant)."""

    headers: t.ClassVar[t.Mapping[str, str]] = {
        "Content-Type": "application/json",
        "A2A-Version": VERSION,
    }

    def __init__(self, url: str, session: t.Any, tenant: str | None = None) -> None:
        super().__init__(url, session, None)
        self.dialect = Dialect()

    def decode(self, result: t.Any) -> t.Any:
        return self.dialect.event(result)

    def call(self, method: str, params: dict[str, t.Any], timeout: Timeout) -> t.Any:
        name, legacy = self.dialect.request(method, params)
        return self.dialect.result(method, super().call(name, legacy, timeout))

    def stream(self, method: str, params: dict[str, t.Any], timeout: Timeout) -> EventStream:
        name, legacy = self.dialect.request(method, params)
        return super().stream(name, legacy, timeout)
