"""Push notifications: webhook delivery, the secrets of push configs, the SSRF guard, signed
notifications, and (for receivers) :func:`verify_notification`.

The public names are ``__all__``: the receiver's, and the fixed bounds docs/push.md names. They
load on first use, so this package imports without ``cryptography``. ``NotificationRejected``
lives in ``flask_a2a`` (one class for every refused notification; here too, the same object,
for old imports).
"""

from __future__ import annotations

import importlib
import typing as t

if t.TYPE_CHECKING:
    from .dispatcher import MAX_IN_FLIGHT as MAX_IN_FLIGHT
    from .dispatcher import MAX_PER_OWNER as MAX_PER_OWNER
    from .dispatcher import MAX_WAITING as MAX_WAITING
    from .dispatcher import SHARED_IN_FLIGHT as SHARED_IN_FLIGHT
    from .dispatcher import SHARED_WAITING as SHARED_WAITING
    from .jwks import MAX_JWKS_BYTES as MAX_JWKS_BYTES
    from .tokens import token_hash as token_hash
    from .verify import MAX_SEGMENT_CHARS as MAX_SEGMENT_CHARS
    from .verify import NotificationRejected as NotificationRejected  # kept: see _KEPT
    from .verify import NotificationVerifier as NotificationVerifier
    from .verify import ReplayedNotification as ReplayedNotification
    from .verify import VerifiedNotification as VerifiedNotification
    from .verify import verify_notification as verify_notification
    from .webhooks import MAX_REPLY_BYTES as MAX_REPLY_BYTES

#: Public name -> the submodule defining it.
_SOURCES: t.Final[dict[str, str]] = {
    "NotificationVerifier": "verify",
    "ReplayedNotification": "verify",
    "VerifiedNotification": "verify",
    "verify_notification": "verify",
    "token_hash": "tokens",
    "MAX_SEGMENT_CHARS": "verify",
    "MAX_JWKS_BYTES": "jwks",
    "MAX_REPLY_BYTES": "webhooks",
    "MAX_IN_FLIGHT": "dispatcher",
    "MAX_WAITING": "dispatcher",
    "MAX_PER_OWNER": "dispatcher",
    "SHARED_IN_FLIGHT": "dispatcher",
    "SHARED_WAITING": "dispatcher",
}

__all__ = list(_SOURCES)
#: Kept for old imports, not public here: their home is ``flask_a2a``.
_KEPT: t.Final[dict[str, str]] = {"NotificationRejected": "verify"}

if not t.TYPE_CHECKING:

    def __getattr__(name: str) -> t.Any:
        """Import the module defining ``name`` the first time it is asked for."""
        source = _SOURCES.get(name) or _KEPT.get(name)
        if source is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{source}", __name__), name)
        globals()[name] = value
        return value
