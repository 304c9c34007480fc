"""The receiving end of push notifications, for a host that is a client too.

A host that registered a webhook with an agent (``push_config=`` on a send, or
``create_task_push_notification_config``) gets each of the task's events as a POST whose body
is one StreamResponse and whose ``A2A-Notification-Token`` (or ``X-A2A-Notification-Token``)
header carries the token it registered. :func:`parse_notification` checks that token and turns
the body into a typed event. It reads any request with ``headers`` and ``get_data()`` (a Flask
or werkzeug request), so it imports no Flask.
"""

from __future__ import annotations

import hmac
import json
import typing as t

from ..protocol import wire
from .sse import A2AClientError, StreamEvent

#: The headers an agent puts the registered token in (the product spec's, the SDKs').
TOKEN_HEADERS: t.Final = ("A2A-Notification-Token", "X-A2A-Notification-Token")
#: The members of a StreamResponse (exactly one is set).
_KINDS: t.Final = frozenset({"task", "message", "statusUpdate", "artifactUpdate"})
#: A notification larger than this is refused unread (flask_a2a caps request bodies at 1 MiB).
MAX_NOTIFICATION_BYTES: t.Final = 1024 * 1024


class NotificationRejected(A2AClientError):
    """A webhook POST that is not a notification this host asked for, whichever check refused
    it: :func:`parse_notification` here, or ``flask_a2a.push.verify_notification`` (which
    raises this very class, so one ``except`` catches both).

    ``reason`` says why in a word a receiver can log (``token``, ``authorization``,
    ``too_large``, ``malformed``; ``verify_notification`` lists its own), ``detail`` says more,
    and ``status`` is the HTTP status to answer with: 401 for a notification that does not
    prove where it came from, 413 too large, 400 not a StreamResponse, 503 when the agent's
    JWKS cannot be read now (its sender retries later), 200 for a replay (acknowledged, not
    acted on again).
    """

    status: int

    def __init__(self, reason: str, detail: str = "", status: int = 401) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason, status)
        self.reason = reason
        self.detail = detail


class _Request(t.Protocol):
    @property
    def headers(self) -> t.Any: ...
    @property
    def content_length(self) -> int | None: ...

    def get_data(self) -> bytes: ...


def parse_notification(
    request: _Request,
    *,
    token: str | None,
    authorization: str | None = None,
    max_bytes: int = MAX_NOTIFICATION_BYTES,
) -> StreamEvent:
    """The event a push notification carries, once its token matched.

    :param token: the token registered with the push config; ``None`` only for a config
        registered without one (then no token header may be required, and none is checked).
    :param authorization: the exact ``Authorization`` value expected (``"Bearer s3cret"``),
        when the config was registered with ``authentication``.
    :raises NotificationRejected: a missing or wrong token or Authorization (401), a body
        over ``max_bytes`` (413), or a body that is no StreamResponse (400).
    """
    if token is not None and not any(
        _same(request.headers.get(name), token) for name in TOKEN_HEADERS
    ):
        raise NotificationRejected("token", "the notification token does not match")
    if authorization is not None and not _same(request.headers.get("Authorization"), authorization):
        raise NotificationRejected("authorization", "the Authorization does not match")
    if request.content_length is not None and request.content_length > max_bytes:
        raise NotificationRejected("too_large", f"over {max_bytes} bytes", 413)
    body = request.get_data()
    if len(body) > max_bytes:
        raise NotificationRejected("too_large", f"over {max_bytes} bytes", 413)
    try:
        payload = json.loads(body)
        if not isinstance(payload, dict) or len(payload) != 1 or not _KINDS & payload.keys():
            raise ValueError("not one of task, message, statusUpdate, artifactUpdate")
        event = wire.event_from_wire(payload)
    except Exception as exc:  # JSON, shape, a field the model refuses: the body is wrong
        raise NotificationRejected(
            "malformed", f"not a StreamResponse: {type(exc).__name__}", 400
        ) from None
    return t.cast(StreamEvent, event)


def _same(got: str | None, expected: str) -> bool:
    """Constant-time comparison (a token is a secret)."""
    return got is not None and hmac.compare_digest(got.encode(), expected.encode())
