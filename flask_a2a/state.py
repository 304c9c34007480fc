"""One agent's state on one app (``app.extensions["a2a"]``): :class:`A2AState`.

It sits below the modules that hold or read it — ``agents`` (the registry of an app's agents),
``extension`` (which builds it), ``views``, ``csrf``, ``cli`` and the console — so each imports
it from here and none of them names another for its type. What it holds of ``agents`` it
describes with :class:`AgentScope` (``agents.Scoping`` fits it).
"""

from __future__ import annotations

import typing as t

from .bindings import rest_v03 as rest_v03_binding
from .bindings import v03 as v03_binding
from .card.document import AGENT_CARD_PATH, AgentCard, CardPublisher
from .entities.registry import EntityRegistry
from .exchange.methods import Exchange
from .protocol.model import Principal
from .protocol.scrub import scrub
from .push.secrets import PushSecrets
from .store.base import Store
from .store.choice import ChosenStore, chosen_store

if t.TYPE_CHECKING:
    from .card.signing import SigningKey
    from .wiring import LastOut

PrincipalHook = t.Callable[[], "Principal | str | int | None"]
OwnerLookup = t.Callable[[str], "str | int | None"]
OwnerName = t.Callable[[str], "str | None"]


class AgentsOfApp(t.Protocol):
    """Every agent of one app, by name (``agents.Agents``)."""

    @property
    def states(self) -> t.Mapping[str, A2AState]: ...


class AgentScope(t.Protocol):
    """One agent's view of principals (``agents.Scoping``): the tenant it stores a caller
    under, the caller's own tenant its handlers see, and the app's agents it scopes among."""

    @property
    def registry(self) -> AgentsOfApp: ...

    def stored(self, principal: Principal) -> Principal: ...

    def host(self, principal: Principal) -> Principal: ...


class A2AState:
    """Per-app state in ``app.extensions["a2a"]``."""

    def __init__(
        self,
        exchange: Exchange,
        principal: PrincipalHook,
        card: AgentCard,
        signing_keys: t.Sequence[SigningKey] = (),
    ) -> None:
        self.exchange = exchange
        self.settings = exchange.settings
        self.principal_hook = principal
        self.card = card
        #: Flask-WTF's CSRFProtect exempts the exchange views (done once it is registered).
        self.csrf_exempted = False
        #: The entity tools (None without entities); set by ``init_app``.
        self.entities: EntityRegistry | None = None
        #: Seals push secrets at rest (the memory store keeps them as given, in memory).
        self.push_secrets: PushSecrets | None = None
        #: The endpoint names this agent serves (``A2A.endpoints``); set by ``init_app``.
        self.endpoints: tuple[str, ...] = ()
        #: The host's ``owner_lookup`` (a user name to an owner id, for ``flask a2a``).
        self.owner_lookup: OwnerLookup | None = None
        #: The host's ``owner_name`` (an owner id to the name the console shows).
        self.owner_name: OwnerName | None = None
        #: Serves the card, the JWKS, RFC 9728 metadata and (agent role) the health route.
        self.cards = CardPublisher(card, exchange.settings, exchange, signing_keys)
        #: The agent's name (``A2A(name=...)``) and where its card is served.
        self.name = exchange.settings.agent
        self.card_path = AGENT_CARD_PATH
        #: The agent's tenant scoping (set by ``init_app``; the default agent's changes nothing).
        self.scoping: AgentScope | None = None
        #: The store as ``store_for`` made it (agents of one app share it).
        self.store_handle: ChosenStore | None = None
        #: Close the bus and the store with the last of the app's agents sharing them.
        self.close_bus: LastOut | None = None
        self.close_store: LastOut | None = None
        #: The method tables of the versions served beside 1.0 (A2A_PROTOCOL_VERSIONS).
        self.legacy: dict[str, t.Mapping[str, t.Any]] | None = (
            {"0.3": v03_binding.methods(exchange.methods)}
            if "0.3" in exchange.settings.protocol_versions
            else None
        )
        #: The v0.3 HTTP+JSON routes (``{A2A_REST_PATH}/v1/...``), when 0.3 is served.
        self.legacy_rest: t.Mapping[str, t.Any] | None = (
            rest_v03_binding.methods(exchange.methods) if self.legacy is not None else None
        )

    def store(self) -> Store:
        """The task store (chosen now if it was not yet: see ``store_choice``)."""
        return chosen_store(self.exchange.store)

    def resolve_principal(self) -> Principal | None:
        """Run the host's hook in the current request; a plain string or int (``user.id``) is
        taken as the owner. Anything else fails the request naming the hook (a log ERROR,
        -32603 to the caller)."""
        found: object = self.principal_hook()
        if found is None:
            return None
        if isinstance(found, Principal):
            return self._scoped(found)
        if isinstance(found, (str, int)) and not isinstance(found, bool) and found != "":
            return self._scoped(Principal(owner=str(found)))
        hook = self.principal_hook
        name = f"{getattr(hook, '__module__', '?')}.{getattr(hook, '__qualname__', hook)}"
        raise TypeError(
            f"the principal hook {name} returned {type(found).__name__} "
            f"{scrub(repr(found))[:80]}: return a "
            "flask_a2a.Principal, an owner id (a non-empty str or an int) or None"
        )

    def _scoped(self, principal: Principal) -> Principal:
        """The principal as this agent stores and checks tasks with (``flask_a2a.agents``)."""
        return principal if self.scoping is None else self.scoping.stored(principal)
