"""The client's side of the wire: JSON-RPC answers back into results or the server's errors,
and an SSE answer (of either binding) into typed events.

Kept apart from ``client.py`` (the method surface) so each stays small; nothing here knows
which method was called.
"""

from __future__ import annotations

import json
import socket
import typing as t

import requests
from urllib3.exceptions import ReadTimeoutError

from ..protocol import wire
from ..protocol.errors import error_from_dict
from ..protocol.model import (
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from ..protocol.pages import page_text

StreamEvent = t.Union[Task, Message, TaskStatusUpdateEvent, TaskArtifactUpdateEvent]

#: A request's timeout: seconds, or (connect, read) seconds.
Timeout = t.Union[float, tuple[float, float]]

#: One SSE event larger than this ends the stream (a server cannot make the client hoard RAM).
MAX_EVENT_BYTES: t.Final = 16 * 1024 * 1024


class Closeable(t.Protocol):
    """What an event stream closes when it ends: the HTTP response, or a gRPC call."""

    def close(self) -> None: ...


class A2AClientError(Exception):
    """The answer was not an A2A answer (not JSON-RPC, no card, a redirect, a bad stream)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        #: The HTTP status of the answer, when there was one.
        self.status = status


def json_of(response: requests.Response, kind: str) -> t.Any:
    """An answer's JSON; a redirect or a body that is not JSON raises, naming the ``kind`` of
    answer expected (the endpoint is a binding's, not a page's)."""
    status = response.status_code
    if 300 <= status < 400:
        where = response.headers.get("Location", "?")
        raise A2AClientError(f"HTTP {status}: the endpoint moved to {where}", status)
    try:
        return response.json()
    except ValueError:
        # Something in front of the agent answered (a proxy, a host app's error page): quote
        # what a person would read first of it.
        mimetype = response.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        said = page_text(response.content, mimetype)
        said = f": {said}" if said else ""
        raise A2AClientError(f"HTTP {status}: the answer is not {kind}{said}", status) from None


def answer_of(response: requests.Response, request_id: int) -> t.Any:
    """The ``result`` of a JSON-RPC answer, or the server's error raised as its class."""
    status = response.status_code
    payload = json_of(response, "JSON-RPC")
    if (
        isinstance(payload, dict)
        and isinstance(payload.get("error"), dict)
        and ("status" in payload["error"])
    ):  # a google.rpc.Status: an HTTP+JSON interface was spoken to in JSON-RPC
        raise A2AClientError(
            f"HTTP {status}: the answer is not JSON-RPC but HTTP+JSON: use binding='HTTP+JSON' "
            "(--binding rest), or A2AClient.connect(url), which reads it from the card",
            status,
        )
    return result_of(payload, request_id, status)


def result_of(payload: t.Any, request_id: int, status: int = 200) -> t.Any:
    if not isinstance(payload, dict) or payload.get("jsonrpc") != "2.0":
        raise A2AClientError(f"HTTP {status}: the answer is not JSON-RPC", status)
    if "error" in payload and isinstance(payload["error"], dict):
        raise error_from_dict(payload["error"])
    if status != 200 or "result" not in payload:
        raise A2AClientError(f"HTTP {status}: the answer holds no result", status)
    if payload.get("id") != request_id:
        raise A2AClientError("the answer is for another request", status)
    return payload["result"]


class EventStream:
    """The typed events of one SSE answer.

    Iterate it; it closes its connection when the stream ends, when :meth:`close` is called,
    when a ``with`` block around it ends, or when it is dropped mid-way. Closing the
    connection is what frees the server's stream seat.
    """

    def __init__(
        self,
        response: Closeable,
        unwrap: t.Callable[[t.Any], t.Any],
        decode: t.Callable[[t.Any], t.Any] = wire.event_from_wire,
        *,
        results: t.Iterator[t.Any] | None = None,
    ) -> None:
        """``unwrap(payload)``: one event's StreamResponse JSON out of its envelope (the
        binding's: a JSON-RPC response, or the bare object), raising a streamed error;
        ``decode``: that JSON as its model object (a v0.3 event has its own reader).
        ``results``: the payloads themselves, from a transport that reads no SSE (gRPC); then
        ``response`` is only what :meth:`close` closes."""
        #: The HTTP response (a ``requests.Response``), or what a gRPC stream closes.
        self.response: t.Any = response
        self.progress = Progress()
        # The generator must not hold ``self``: with no cycle, dropping the stream closes it.
        if results is None:
            self._events = _events(
                t.cast(requests.Response, response), unwrap, self.progress, decode
            )
        else:
            self._events = _decoded(results, response, unwrap, self.progress, decode)
        self._first: list[StreamEvent] = []

    def open(self) -> EventStream:
        """Read the first event now: a streaming method's refusal comes as a stream holding
        one error event, and is raised here (as the server's error class), at the call."""
        first = next(self._events, None)
        if first is not None:
            self._first.append(first)
        return self

    @property
    def task_id(self) -> str | None:
        """The task the stream is about, once the first event named it."""
        return self.progress.task_id

    @property
    def state(self) -> TaskState | None:
        """The task's state as of the last status the stream carried."""
        return self.progress.state

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> StreamEvent:
        if self._first:
            return self._first.pop()
        return next(self._events)

    def close(self) -> None:
        self._events.close()
        self.response.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Progress:
    """What a stream has said so far about its task."""

    def __init__(self) -> None:
        self.task_id: str | None = None
        self.state: TaskState | None = None

    def update(self, event: StreamEvent) -> None:
        if isinstance(event, Task):
            self.task_id, self.state = event.id, event.status.state
        elif isinstance(event, TaskStatusUpdateEvent):
            self.task_id, self.state = event.task_id, event.status.state
        elif isinstance(event, TaskArtifactUpdateEvent):
            self.task_id = event.task_id


def _events(
    response: requests.Response,
    unwrap: t.Callable[[t.Any], t.Any],
    progress: Progress,
    decode: t.Callable[[t.Any], t.Any] = wire.event_from_wire,
) -> t.Generator[StreamEvent, None, None]:
    """``decode``: a result as its event (``client/v03.py`` reads a v0.3 agent's events)."""
    try:
        for data in sse_data(_chunks(response)):
            try:
                payload = json.loads(data)
            except ValueError:
                raise A2AClientError("a stream event is not JSON") from None
            event = t.cast(StreamEvent, decode(unwrap(payload)))
            progress.update(event)
            yield event
    finally:
        response.close()


def _decoded(
    results: t.Iterator[t.Any],
    closing: Closeable,
    unwrap: t.Callable[[t.Any], t.Any],
    progress: Progress,
    decode: t.Callable[[t.Any], t.Any],
) -> t.Generator[StreamEvent, None, None]:
    """Payloads a transport read its own way, as events (closing it when they end)."""
    try:
        for payload in results:
            event = t.cast(StreamEvent, decode(unwrap(payload)))
            progress.update(event)
            yield event
    finally:
        closing.close()


def _read1(raw: t.Any) -> t.Callable[[], bytes] | None:
    """What reads the bytes already there of a body that is not chunked, or None.

    urllib3 2 has ``read1``. urllib3 1.26 (requests' floor) has none, and its ``read`` waits
    for the whole body: an event stream served without chunking (Werkzeug's server before 2.1
    sends ``Connection: close`` instead) would arrive only when the task ends. There the
    http.client response under it reads what has arrived, when nothing needs decoding.
    """
    if hasattr(raw, "read1"):
        return lambda: t.cast(bytes, raw.read1(65536, decode_content=True))
    underlying: t.Any = getattr(raw, "_fp", None)
    if hasattr(underlying, "read1") and not raw.headers.get("Content-Encoding"):
        return lambda: t.cast(bytes, underlying.read1(65536))
    return None


def _chunks(response: requests.Response) -> t.Iterator[bytes]:
    """Bytes as they arrive (never waiting to fill a buffer: events must not be held back)."""
    raw = response.raw
    try:
        read1 = None if getattr(raw, "chunked", False) else _read1(raw)
        if read1 is None:
            yield from response.iter_content(chunk_size=None)
            return
        while True:
            chunk = read1()
            if not chunk:
                return
            yield chunk
    except (requests.ConnectionError, ReadTimeoutError) as exc:
        # requests reports a read timeout mid-body as a ConnectionError; say what it is.
        cause = exc.args[0] if isinstance(exc, requests.ConnectionError) and exc.args else exc
        if isinstance(cause, ReadTimeoutError):
            raise requests.ReadTimeout(cause, response=response) from exc
        raise
    except socket.timeout as exc:  # the http.client read under urllib3 1.26 (_read1)
        raise requests.ReadTimeout(exc, response=response) from exc
    except OSError as exc:
        raise requests.ConnectionError(exc, response=response) from exc


def sse_data(chunks: t.Iterable[bytes]) -> t.Iterator[str]:
    """The ``data`` of each SSE event; comments (keep-alives) and other fields are skipped."""
    buffer = b""
    data: list[bytes] = []
    size = 0
    for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        if len(buffer) > MAX_EVENT_BYTES:
            raise A2AClientError("a stream event is too large")
        for line in lines:
            line = line.rstrip(b"\r")
            if not line:
                if data:
                    yield b"\n".join(data).decode("utf-8")
                data, size = [], 0
                continue
            name, _, value = line.partition(b":")
            if name == b"data":
                value = value[1:] if value.startswith(b" ") else value
                size += len(value)
                if size > MAX_EVENT_BYTES:
                    raise A2AClientError("a stream event is too large")
                data.append(value)
    if data:
        yield b"\n".join(data).decode("utf-8")
