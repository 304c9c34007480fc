"""What a streaming answer (SendStreamingMessage, SubscribeToTask) is made of: the SSE relay
(``streams.py``) fed by the exchange, the pause a stream begins on, closing one never read.

The methods (``methods.py``) check the call, take a seat and subscribe (or start the run);
:func:`stream_reply` makes the answer from there.
"""

from __future__ import annotations

import logging
import time
import typing as t

from ..config import Settings
from ..ops.log_fields import fields
from ..protocol import jsonrpc, wire
from ..protocol.errors import UnauthenticatedError
from ..protocol.model import Principal, Task, TaskStatus, TaskStatusUpdateEvent
from ..protocol.scrub import scrub
from ..store.base import Store, TaskRecord
from .bus import Bus, BusEvent, Subscription
from .calls import Call, Reply
from .runs import Runs
from .streams import HEADERS, Seat, relay
from .writer import is_final

#: The message of the error that ends a stream whose caller no longer resolves.
STREAM_REFUSED: t.Final = (
    "Authentication required: the caller no longer resolves to this stream's owner "
    "(signed out, banned, or a token revoked)"
)

log = logging.getLogger("flask_a2a")


class StreamHost(t.Protocol):
    """What a stream reads of its exchange (``methods.Exchange``: this module does not name it),
    at each use."""

    @property
    def settings(self) -> Settings: ...
    @property
    def store(self) -> Store: ...
    @property
    def bus(self) -> Bus: ...
    @property
    def runs(self) -> Runs: ...
    @property
    def replicas(self) -> object: ...


def stream_reply(
    host: StreamHost, call: Call, record: TaskRecord, subscription: Subscription, seat: Seat
) -> Reply:
    """The streaming answer on ``record``: its subscription and seat taken, held by the relay."""
    refresher = call.http.principal_refresher
    # What a stream keeps is what it needs (not the call: its params, its HTTP request),
    # in one object whose bound methods the relay calls (not a closure and cells each).
    feed = TaskFeed(
        host,
        record.task.id,
        call.principal,
        refresher() if refresher is not None else None,
        None if call.binding != "jsonrpc" else jsonrpc.encode_id(call.id),
    )
    held = record.version == 0  # the run shows the task at its first change, or replies
    # A stream that starts on a paused task waits for what comes of it (issue 14 item 5).
    pause = feed.pause = StreamPause(record.task.status) if record.state.interrupted else None
    settings = host.settings
    body = relay(
        first=None if held else wire.task_event_json(record.task),
        first_version=record.version,
        first_final=is_final(record.state) and pause is None,
        subscription=subscription,
        seat=seat,
        keepalive=settings.keepalive_interval,
        feed=feed,
        poll_interval=settings.replica_poll_interval if host.replicas else None,
        client_socket=call.http.client_socket,
        snapshot=feed.stored if held else None,
        ends=pause.ends_at if pause is not None else None,
    )
    return Reply(200, list(HEADERS), body)


def stored_event(store: Store, task_id: str, version: int = 0) -> tuple[str, int, bool] | None:
    """The stored task as a stream event (a stream's first, a replica's snapshot), when
    newer than ``version``; None when it is not stored."""
    record = store.get_task(task_id)
    if record is None or record.version <= version:
        return None
    return wire.task_event_json(record.task), record.version, is_final(record.state)


class TaskFeed:
    """What one stream asks of the exchange (``streams.Feed``): the envelope of its events, the
    caller's re-check at keep-alives, and polls of the store."""

    __slots__ = ("host", "task_id", "principal", "refresh", "head", "pause", "next_poll")

    def __init__(
        self,
        host: StreamHost,
        task_id: str,
        principal: Principal | None,
        refresh: t.Callable[[], Principal | None] | None,
        request_id_json: str | None,
    ) -> None:
        self.host = host
        self.task_id = task_id
        self.principal = principal
        self.refresh = refresh
        #: A JSON-RPC response's head; None on HTTP+JSON and gRPC (each event a bare
        #: StreamResponse).
        self.head = (
            None
            if request_id_json is None
            else '{"jsonrpc":"2.0","id":' + request_id_json + ',"result":'
        )
        self.pause: StreamPause | None = None
        self.next_poll = 0.0

    def wrap(self, result_json: str) -> str:
        """A StreamResponse's JSON as the event the binding sends."""
        if self.head is None:
            return result_json
        return self.head + result_json + "}"

    def still_allowed(self) -> bool:
        """The caller still resolves to the same owner, tenant and scope set."""
        if self.refresh is None:
            return True
        now = self.refresh()
        principal = self.principal
        return (
            now is not None
            and principal is not None
            and now.owner == principal.owner
            and now.tenant == principal.tenant
            and now.scopes == principal.scopes
        )

    def refused(self) -> str:
        """A -31401 error as the stream's last event: a JSON-RPC error response with the
        stream's id, or on HTTP+JSON the ``google.rpc.Status`` its refusals answer."""
        error = UnauthenticatedError(STREAM_REFUSED)
        if self.head is None:
            status = {"code": 401, "status": "UNAUTHENTICATED", "message": error.message,
                      "details": error.data()}  # fmt: skip
            return jsonrpc.encode({"error": status})
        return self.head[: -len('"result":')] + '"error":' + jsonrpc.encode(error.to_dict()) + "}"

    def poll(self, version: int) -> tuple[str, int, bool] | None:
        """A snapshot when the stored version moved past ``version`` without a local event."""
        exchange = self.host
        if exchange.runs.get(self.task_id) is not None:
            return None
        if exchange.bus.live():  # other replicas' events arrive one by one: a safety net only
            now = time.monotonic()
            if now < self.next_poll:
                return None
            self.next_poll = now + exchange.settings.keepalive_interval
        return self.catch_up(version)

    def catch_up(self, version: int) -> tuple[str, int, bool] | None:
        """The stored task when newer than ``version``, whoever runs it (events were lost)."""
        exchange, task_id, pause = self.host, self.task_id, self.pause
        try:
            record = exchange.store.get_task(task_id)
        except Exception as exc:  # a stream outlives a store hiccup; the next poll retries
            log.error("a2a: stream poll failed: %s", scrub(repr(exc)), extra=fields(task_id))
            return None
        if record is None:
            # Deleted (by another replica's retention, say): end this process's streams.
            exchange.bus.publish(BusEvent.removed(task_id))
            return None
        if record.version <= version:
            return None
        return (
            wire.task_event_json(record.task),
            record.version,
            pause.ends(record.task.status) if pause is not None else is_final(record.state),
        )

    def stored(self) -> tuple[str, int, bool] | None:
        """A held task's first event, once the run shows it: the stored task."""
        return stored_event(self.host.store, self.task_id)


def close_stream(reply: Reply) -> None:
    """A stream its caller will never read: free its seat and subscription."""
    close = getattr(reply.body, "close", None)
    if close is not None:
        close()


class StreamPause:
    """A stream that began on a paused (INPUT_REQUIRED/AUTH_REQUIRED) task ends at a terminal
    state or at a new pause, not at the pause it began on: the subscriber sees the resume."""

    def __init__(self, status: TaskStatus) -> None:
        self.status = status
        self.resumed = False

    def ends(self, status: TaskStatus) -> bool:
        if status.state.terminal:
            return True
        if not status.state.interrupted:
            self.resumed = True
            return False
        began = (self.status.state, self.status.timestamp)
        return self.resumed or (status.state, status.timestamp) != began

    def ends_at(self, event: BusEvent) -> bool:
        """For a bus event: only a status can end the stream (artifacts never do)."""
        if isinstance(event.event, (TaskStatusUpdateEvent, Task)):
            return self.ends(event.event.status)
        return False
