"""Push notifications: webhook delivery, the secrets of push configs, the SSRF guard, signed
notifications, and (for receivers) :func:`verify_notification`.

The receiver's names load on first use, so this package imports without ``cryptography``.
"""

from __future__ import annotations

import importlib
import typing as t

if t.TYPE_CHECKING:
    from .verify import NotificationRejected as NotificationRejected
    from .verify import NotificationVerifier as NotificationVerifier
    from .verify import ReplayedNotification as ReplayedNotification
    from .verify import VerifiedNotification as VerifiedNotification
    from .verify import verify_notification as verify_notification

#: Public name -> the submodule defining it.
_SOURCES: t.Final[dict[str, str]] = {
    "NotificationRejected": "verify",
    "NotificationVerifier": "verify",
    "ReplayedNotification": "verify",
    "VerifiedNotification": "verify",
    "verify_notification": "verify",
}

__all__ = list(_SOURCES)

if not t.TYPE_CHECKING:

    def __getattr__(name: str) -> t.Any:
        """Import the module defining ``name`` the first time it is asked for."""
        if name not in _SOURCES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{_SOURCES[name]}", __name__), name)
        globals()[name] = value
        return value
