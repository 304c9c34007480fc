"""The client's JSON-RPC transport: one POST per call, the envelope around the params."""

from __future__ import annotations

import functools
import itertools
import json
import typing as t

import requests

from ..protocol import wire
from .requester import Requester
from .sse import A2AClientError, EventStream, Timeout, answer_of, result_of

_HEADERS: t.Final = {"Content-Type": "application/json"}


class JsonRpcTransport:
    """Speaks the JSON-RPC binding at ``url``; ``tenant`` goes into every request's params."""

    binding = "JSONRPC"
    #: The headers of every request (a v0.3 transport adds its ``A2A-Version``).
    headers: t.ClassVar[t.Mapping[str, str]] = _HEADERS

    def __init__(self, url: str, session: Requester, tenant: str | None = None) -> None:
        self.url = url
        self.session = session
        self.tenant = tenant
        self._ids = itertools.count(1)

    def decode(self, result: t.Any) -> t.Any:
        """One stream event's result as its model object."""
        return wire.event_from_wire(result)

    def call(self, method: str, params: dict[str, t.Any], timeout: Timeout) -> t.Any:
        request_id, response = self._post(method, params, timeout, False)
        return answer_of(response, request_id)

    def stream(self, method: str, params: dict[str, t.Any], timeout: Timeout) -> EventStream:
        request_id, response = self._post(method, params, timeout, True)
        content_type = response.headers.get("Content-Type", "")
        if response.status_code == 200 and content_type.startswith("text/event-stream"):
            # A streamed refusal (its one error event) raises at open().
            unwrap = functools.partial(result_of, request_id=request_id)
            return EventStream(response, unwrap, self.decode).open()
        with response:
            answer_of(response, request_id)  # raises the server's error, if it sent one
        raise A2AClientError(f"{method} answered without a stream", response.status_code)

    def _post(
        self, method: str, params: dict[str, t.Any], timeout: Timeout, stream: bool
    ) -> tuple[int, requests.Response]:
        request_id = next(self._ids)
        if self.tenant is not None:
            params = {"tenant": self.tenant, **params}
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        response = self.session.post(
            self.url,
            data=data.encode("utf-8"),
            headers=self.headers,
            timeout=timeout,
            stream=stream,
            allow_redirects=False,
        )
        return request_id, response
