"""Where the ``flask_a2a`` logger's lines go when the host configured no logging.

With nothing configured, Python drops INFO records and writes the others bare on stderr
(``logging.lastResort``). gunicorn configures only its own ``gunicorn.*`` loggers, so under
``flask run`` and under gunicorn's default logging an operator never saw the startup line
``flask_a2a: task store: SQLStore(...)``. Flask gives ``app.logger`` a default handler when no
handler would take its records (``flask.logging.create_logger``); :func:`show_by_default` does
the same for the exchange's logger at ``init_app``, decided per record rather than once, since
a host may configure logging after ``init_app`` (in ``create_app``, or gunicorn's
``--log-config`` in the worker):

- the fallback handler writes a record only when no other handler on the way to the root would
  take it, so once the host has handlers (``logging.basicConfig``, dictConfig, a handler on
  ``flask_a2a`` as in docs/operations.md) theirs is the only output, never doubled;
- the logger's level is set to :data:`FALLBACK_LEVEL` (one below INFO, so that it tells from a
  level the host sets) and INFO passes it only while the host has no handler: once it has one,
  the levels the host chose apply again (``basicConfig()`` at WARNING shows no INFO line).

Nothing is installed when the host already set the logger's level, gave it a handler, or has
any handler on its way to the root.
"""

from __future__ import annotations

import logging

from flask.logging import wsgi_errors_stream

#: The level the exchange's logger gets with the fallback: INFO passes, and it tells from any
#: level a host sets (then the host's level rules alone).
FALLBACK_LEVEL = logging.INFO - 1

LOGGER = logging.getLogger("flask_a2a")


def _host_takes(record: logging.LogRecord, logger: logging.Logger) -> bool:
    """Would a handler other than ours, from ``logger`` up to the root, take ``record``?"""
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if not isinstance(handler, FallbackHandler) and record.levelno >= handler.level:
                return True
        if not current.propagate:
            return False
        current = current.parent
    return False


def _has_handlers(logger: logging.Logger) -> bool:
    """Has the host any handler (of any level) from ``logger`` up to the root?"""
    current: logging.Logger | None = logger
    while current is not None:
        if any(not isinstance(h, FallbackHandler) for h in current.handlers):
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


class FallbackHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the request's ``wsgi.errors`` (gunicorn's error log) or stderr, only the
    records no handler of the host's takes."""

    def __init__(self) -> None:
        super().__init__(wsgi_errors_stream)
        self.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(message)s"))

    def filter(self, record: logging.LogRecord) -> bool:
        return not _host_takes(record, LOGGER) and bool(super().filter(record))


class HostLevel(logging.Filter):
    """On the logger: below the level the host's loggers set, a record passes only while the
    host has no handler at all (the fallback is then its only way out)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if LOGGER.level != FALLBACK_LEVEL:
            return True  # the host set the level since: it alone decides
        parent = LOGGER.parent
        host_level = parent.getEffectiveLevel() if parent is not None else logging.WARNING
        return record.levelno >= host_level or not _has_handlers(LOGGER)


def show_by_default() -> bool:
    """Give the ``flask_a2a`` logger its fallback if the host configured no logging at all;
    True if it has one (idempotent)."""
    if any(isinstance(h, FallbackHandler) for h in LOGGER.handlers):
        return True
    if LOGGER.level != logging.NOTSET or _has_handlers(LOGGER):
        return False
    LOGGER.setLevel(FALLBACK_LEVEL)
    LOGGER.addFilter(HostLevel())
    LOGGER.addHandler(FallbackHandler())
    return True
