"""Several agents in one app: their names, their registry, and how their tasks are kept apart.

Every ``A2A`` instance registered on an app is one agent with its own name, path, card,
skills, entities and settings. They share the app's store, run pool, bus and metrics; what keeps
agent B from reading agent A's tasks is the store's existing visibility tier (owner, tenant,
scope set): a named agent's tasks are stored under an agent-scoped **tenant**, ``@<agent>`` (or
``@<agent>/<tenant>`` when the caller acts in a tenant), so another agent's task is
indistinguishable from none (-32001) in every method that reads, lists, cancels, subscribes to
or configures pushes for a task, without a new column or a migration. The agent named
:data:`DEFAULT_AGENT` (the one an ``A2A(app, ...)`` without ``name=`` is) stores the caller's
tenant as it is, so an app with one agent keeps exactly the rows it had.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import typing as t

from .config import ConfigError
from .protocol.limits import refusal
from .protocol.model import Principal
from .protocol.scrub import scrub

if t.TYPE_CHECKING:
    from flask import Flask

    from .state import A2AState

#: Public (docs/api.md, "Where names live"); the rest of this module is private.
__all__ = ["Agents", "agents"]

log = logging.getLogger("flask_a2a")

#: The name of an agent made without ``name=``; its tasks are stored as they always were.
DEFAULT_AGENT: t.Final = "default"
#: ``app.extensions`` key of the registry of every agent on the app (``app.extensions["a2a"]``
#: stays the first agent registered).
REGISTRY_KEY: t.Final = "a2a_agents"
#: What an agent name may be (it labels metrics, names a blueprint and scopes a tenant).
AGENT_NAME: t.Final = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
#: Leads a stored tenant that an agent scoped; a host tenant may not start with it while a
#: named agent shares the default agent's store (it could read that agent's tasks).
SCOPE_MARK: t.Final = "@"


def check_name(name: str) -> str:
    if not isinstance(name, str) or not AGENT_NAME.match(name):
        raise ConfigError(f"A2A name= {name!r} must match {AGENT_NAME.pattern}")
    return name


def stored_tenant(agent: str, tenant: str | None) -> str | None:
    """The tenant an agent's task is stored under (the host's own for the default agent)."""
    if agent == DEFAULT_AGENT:
        return tenant
    return f"{SCOPE_MARK}{agent}" if tenant is None else f"{SCOPE_MARK}{agent}/{tenant}"


def host_tenant(agent: str, stored: str | None) -> str | None:
    """The host's tenant back from a stored one (the inverse of :func:`stored_tenant`)."""
    if agent == DEFAULT_AGENT or stored is None:
        return stored
    _, _, tenant = stored.partition("/")
    return tenant if "/" in stored else None


def agent_of(stored: str | None) -> str:
    """The agent a stored tenant belongs to."""
    if stored is None or not stored.startswith(SCOPE_MARK):
        return DEFAULT_AGENT
    return stored[1:].partition("/")[0]


@dataclasses.dataclass
class Agents:
    """Every agent registered on one app (``app.extensions["a2a_agents"]``), in order."""

    states: dict[str, A2AState] = dataclasses.field(default_factory=dict)
    #: Endpoints the agent role serves (every agent's exchange, card, health, metrics).
    role_endpoints: set[str] = dataclasses.field(default_factory=set)
    #: The blueprint name -> the agent's state, for the views.
    by_blueprint: dict[str, A2AState] = dataclasses.field(default_factory=dict)
    #: The agent role's guard is installed (once, for every agent).
    guarded: bool = False

    def __len__(self) -> int:
        return len(self.states)

    def first(self) -> A2AState | None:
        return next(iter(self.states.values()), None)

    def get(self, name: str) -> A2AState:
        try:
            return self.states[name]
        except KeyError:
            raise KeyError(
                f"no agent named {name!r} on this app; agents: {', '.join(self.states)}"
            ) from None

    def several(self) -> bool:
        return len(self.states) > 1


def agents(app: Flask) -> Agents:
    """The agents registered on ``app`` (an empty registry when there is none)."""
    found = app.extensions.get(REGISTRY_KEY)
    return found if isinstance(found, Agents) else Agents()


class Scoping:
    """One agent's view of principals: the tenant it stores a caller under, and the caller's
    own tenant its handlers see."""

    __slots__ = ("agent", "registry")

    def __init__(self, agent: str, registry: Agents) -> None:
        self.agent = agent
        self.registry = registry

    def stored(self, principal: Principal) -> Principal:
        """The principal the exchange checks and stores with (the agent-scoped tenant)."""
        if self.agent == DEFAULT_AGENT:
            tenant = principal.tenant
            if tenant is not None and tenant.startswith(SCOPE_MARK) and self.registry.several():
                # Hosts take the tenant from the request (a header, a subdomain): the caller's
                # fault, refused like a bad param (-32602 / 400), never -32603.
                why = f"must not start with {SCOPE_MARK!r} while several agents share the store"
                log.warning(
                    "a2a: the principal hook returned the tenant %s, which %s; refused",
                    scrub(repr(tenant))[:60],
                    why,
                )
                raise refusal("principal.tenant", why)
            return principal
        return Principal(
            principal.owner, principal.scopes, stored_tenant(self.agent, principal.tenant)
        )

    def host(self, principal: Principal) -> Principal:
        """The principal a handler sees: the caller's own tenant."""
        if self.agent == DEFAULT_AGENT:
            return principal
        return Principal(
            principal.owner, principal.scopes, host_tenant(self.agent, principal.tenant)
        )
