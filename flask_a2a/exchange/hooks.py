"""What the host gives an exchange when it is built: the seams where the app's own code runs.

The core knows no Flask: the extension (``extension.py``) fills these with the app's context,
its re-entry dispatcher and the agent's scoping; an exchange built by hand takes the defaults.
They are given once, to the constructor (``methods.Exchange``), and never set afterwards.
"""

from __future__ import annotations

import contextlib
import dataclasses
import typing as t

from ..protocol.model import Principal
from .reentry import Dispatcher

ContextFactory = t.Callable[[], t.ContextManager[object]]


def same_principal(principal: Principal) -> Principal:
    return principal


@dataclasses.dataclass(frozen=True)
class HostHooks:
    #: Entered around each handler call, on the run's own thread or greenlet (the serving
    #: app's ``app_context``, whose teardown ends the run's database session).
    run_context: ContextFactory = contextlib.nullcontext
    #: Entered around each read and write of a ``TaskUpdater`` (a handed-off task's writer).
    updater_context: ContextFactory = contextlib.nullcontext
    #: Runs a request through the app as a run's caller (``TaskContext.call_app``, entity
    #: skills); None: a run cannot re-enter.
    reenter: Dispatcher | None = None
    #: The principal the host's code sees (a named agent's handlers and extended card see the
    #: caller's own tenant, not the agent-scoped one its tasks are stored under).
    handler_principal: t.Callable[[Principal], Principal] = same_principal
    #: ``extended_card(principal)``, served by GetExtendedAgentCard; None: not configured.
    extended_card: t.Callable[[Principal], t.Any] | None = None


#: An exchange built by hand: no host code around runs, no re-entry, no extended card.
NO_HOOKS: t.Final = HostHooks()
