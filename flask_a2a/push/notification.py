"""A notification on its way to one push config: what both delivery paths (the in-process lanes of
:mod:`.dispatcher`, the queue of :mod:`.queue`) carry."""

from __future__ import annotations

import dataclasses
import typing as t

from ..protocol.model import PushConfig


@dataclasses.dataclass(frozen=True)
class Notification:
    """One notification for one config: the body to POST and what orders and identifies it."""

    config: PushConfig
    version: int
    body: bytes
    #: The trace context that queued it (the delivery's span is its child).
    trace: t.Any = None
    #: The notification's id, the ``jti`` of its signed token (made when it is first signed:
    #: one attempt per job in process; a queued notification carries its own across retries).
    jti: str = ""
    #: Whose task it is (the queue counts each owner's queued bytes).
    owner: str = ""
