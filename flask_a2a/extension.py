"""The Flask extension: mounts the exchange and the agent card on an app.

``A2A(app, skills=[...], principal=...)`` or ``A2A(...).init_app(app)``. State lives in
``app.extensions["a2a"]`` (a ``state.A2AState``); the extension object never holds the app.
Several instances with their own ``name=`` are several agents on one app
(``flask_a2a.agents``): ``app.extensions["a2a"]`` is the first, ``app.extensions["a2a_agents"]``
holds them all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import typing as t
import weakref

from flask import Flask, current_app, has_app_context

from .agents import DEFAULT_AGENT, REGISTRY_KEY, Scoping, agents, check_name
from .card.document import (
    AGENT_CARD_PATH,
    AgentCard,
    check_card_config,
)
from .cli_entry import a2a_cli as lazy_a2a_cli
from .config import DEFAULTS, ConfigError, ConfigRuntimeError, ConfigTypeError, Settings
from .csrf import endpoints_of, exempt_from_csrf, exempt_from_csrf_hook
from .entities.dispatch import AppDispatcher
from .entities.entity import Entity, EntityGate
from .entities.registry import EntityRegistry
from .exchange.bus import Bus
from .exchange.hooks import HostHooks
from .exchange.methods import Exchange
from .exchange.reentry import ReentryHook
from .exchange.router import Skill
from .exchange.runner import Runner, default_runner
from .exchange.tasks import TaskUpdater
from .logs import show_by_default
from .ops.metrics import recorder
from .protocol.extensions import declared_extensions
from .protocol.model import Principal
from .push.secrets import PushSecrets
from .push.webhooks import PushSender
from .state import A2AState, OwnerLookup, OwnerName, PrincipalHook
from .store.base import ListQuery, Store, holds_nothing_at_rest
from .store.choice import chosen_store, store_for
from .versions import check_versions
from .views import agent_blueprint
from .wiring import (
    default_bus,
    extended_card,
    fleet_caps,
    last_out,
    mounted,
    push_sender,
    register_exit,
    share_bus,
)

if t.TYPE_CHECKING:
    import requests

    from .card.signing import SigningKey

ExtendedCardHook = t.Callable[[Principal], t.Any]

#: The views of an agent's blueprint the agent role serves.
_ROLE_VIEWS: t.Final = (
    "exchange", "rest", "rest_root", "agent_card", "agent_card_root", "jwks",
    "protected_resource", "protected_resource_for_path", "healthz", "metrics",
)  # fmt: skip


class A2A:
    """Serve the A2A v1.0 task exchange from a Flask app.

    :param skills: the hand-written skills (at least one skill overall, or startup fails).
    :param principal: called inside each request after the app's own auth; returns the
        caller's :class:`Principal` (or owner id), or ``None`` to refuse with 401 / -31401.
    :param store: where tasks live. Not given: a SQL store on ``A2A_DATABASE_URL``, else on
        Flask-SQLAlchemy's engine when it is registered on the app (before or after ``A2A``:
        the choice is made at first use), else the memory store (one process only).
    :param runner: where handlers run; a gevent pool when the process is monkey-patched,
        threads otherwise.
    :param extended_card: ``extended_card(principal) -> dict | AgentCard`` served by
        GetExtendedAgentCard (an AgentCard is rendered as a full card, signed like the public one).
    :param card: what the public agent card says about the agent.
    :param signing_keys: :class:`flask_a2a.card.signing.SigningKey` objects (the ``signing`` extra);
        each signs the card (several = key rotation) and is published in the JWKS.
    :param push_client: a ``requests.Session`` for push deliveries; a plain one is cloned with
        the dial-time address guard, any other is wrapped with a resolve-then-check guard.
    :param push_resolver: ``resolver(host) -> [address, ...]`` used by the push address checks
        (a test seam; the system resolver when not given).

    :param entities: :class:`Entity` declarations served as ``entity.<name>`` skills (off with
        ``A2A_DISABLE_ENTITY_SKILLS``), re-entering the app with the caller's credentials.
    :param entity_gate: ``gate(principal_or_None, entity, operation) -> bool``; a refused tool
        fails with ``tool unavailable``, and the card lists what an anonymous caller may list.
    :param bus: the event bus; a :class:`flask_a2a.fleet.redis_bus.RedisBus` on ``A2A_REDIS_URL``
        when that is set, else the in-process bus.
    :param console_admin: ``console_admin(principal) -> bool``, run in the request: who sees
        the console's operators panel besides the owners in ``A2A_CONSOLE_ADMIN``.

    :param name: the agent's name, when an app serves several agents (docs/several-agents.md);
        ``"default"`` when not given. Names the blueprint, labels the metrics, selects the
        agent in ``flask a2a --agent NAME``, and scopes its tasks in the shared store.
    :param url_prefix: mounts every route of the agent under this prefix (its ``A2A_PATH``,
        REST binding, card, JWKS and health route), as ``register_blueprint(url_prefix=)`` does.
    :param config: ``A2A_*`` settings of this agent alone, over the app's config.
    :param well_known_card: also serve this agent's card at ``/.well-known/agent-card.json``
        (an agent without ``url_prefix`` always does; at most one agent may).

    A second instance on an app shares the first one's store, run pool and bus unless given
    its own (``store=``, ``runner=``, ``bus=``).
    :param owner_lookup: ``lookup(name) -> owner id | None``, run in the app context: lets an
        operator name a user (``flask a2a tasks susan``) where owners are ids.
    :param owner_name: ``owner_name(owner_id) -> str | None``, run in the request: the name the
        console shows for its user ("Signed in as alice", not "2"); the reverse of
        ``owner_lookup``.
    :param reentry: ``hook(reentry)``, run on every request a run re-enters the app with
        (entity skills, ``TaskContext.call_app``): adds the headers or WSGI environ keys the
        host's own hooks need (:class:`flask_a2a.Reentry`); an ``Entity``'s own runs after it.

    Settings are ``A2A_*`` config keys read once in :meth:`init_app` (docs/configuration.md).
    """

    def __init__(
        self,
        app: Flask | None = None,
        *,
        skills: t.Iterable[Skill] = (),
        principal: PrincipalHook | None = None,
        store: Store | None = None,
        runner: Runner | None = None,
        extended_card: ExtendedCardHook | None = None,
        card: AgentCard | None = None,
        signing_keys: t.Sequence[SigningKey] = (),
        push_client: requests.Session | None = None,
        push_resolver: t.Callable[[str], t.Sequence[str]] | None = None,
        entities: t.Iterable[Entity] = (),
        entity_gate: EntityGate | None = None,
        bus: Bus | None = None,
        console_admin: t.Callable[[Principal], bool] | None = None,
        name: str | None = None,
        url_prefix: str | None = None,
        config: t.Mapping[str, t.Any] | None = None,
        well_known_card: bool | None = None,
        owner_lookup: OwnerLookup | None = None,
        reentry: ReentryHook | None = None,
        owner_name: OwnerName | None = None,
    ) -> None:
        self._name = check_name(name) if name is not None else DEFAULT_AGENT
        self._prefix = (url_prefix or "").rstrip("/")
        if self._prefix and not self._prefix.startswith("/"):
            raise ConfigError(f"A2A url_prefix= must start with '/', got {url_prefix!r}")
        self._config = dict(config or {})
        unknown = sorted(key for key in self._config if key not in DEFAULTS)
        if unknown:
            raise ConfigError(f"A2A config= takes A2A_* settings; unknown: {unknown}")
        self._well_known = well_known_card
        self._bus = bus
        self._console_admin = console_admin
        self._owner_lookup = owner_lookup
        self._owner_name = owner_name
        hooks = {
            "principal": principal,
            "extended_card": extended_card,
            "entity_gate": entity_gate,
            "console_admin": console_admin,
            "owner_lookup": owner_lookup,
            "owner_name": owner_name,
            "reentry": reentry,
        }
        for hook_name, hook in hooks.items():
            if hook is not None and not callable(hook):
                raise ConfigTypeError(
                    f"A2A {hook_name}= must be a function, not {type(hook).__name__} "
                    "(docs/api.md says what it is called with)"
                )
        self._reentry = reentry
        self._entities = list(entities)
        self._entity_gate = entity_gate
        self._push_client = push_client
        self._push_resolver = push_resolver
        self._skills = list(skills)
        if isinstance(signing_keys, (str, bytes, dict)) or not isinstance(signing_keys, t.Iterable):
            raise ConfigTypeError(
                f"A2A signing_keys= takes a list of SigningKey, not {type(signing_keys).__name__}"
            )
        self._signing_keys = tuple(signing_keys)
        self._principal = principal
        self._store = store
        self._runner = runner
        self._extended_card = extended_card
        self._card = card or AgentCard()
        self._states: weakref.WeakKeyDictionary[Flask, A2AState] = weakref.WeakKeyDictionary()
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Mount the exchange and the card on ``app``; fails loudly on a misconfiguration."""
        check_versions()  # a library below its floor: one ConfigError, not a TypeError later
        registry = agents(app)
        if app in self._states or self._name in registry.states:
            raise ConfigRuntimeError(
                f"A2A is already registered on this app as the agent {self._name!r}; "
                "register each instance once, and give a second agent its own name= "
                "(A2A(app, name='billing', url_prefix='/billing', ...))"
            )
        first = registry.first()
        if self._principal is None:
            raise ConfigError(
                "A2A needs principal=: a function returning the caller's Principal (tasks are "
                "per-user data, there is no anonymous posture)"
            )
        show_by_default()  # the flask_a2a logger's lines reach an unconfigured operator
        for key, default in DEFAULTS.items():
            app.config.setdefault(key, default)
        settings = mounted(
            Settings.from_config({**app.config, **self._config}), self._prefix, self._name
        )
        card_path = self._prefix + AGENT_CARD_PATH
        well_known = not self._prefix or bool(self._well_known)
        for rule in app.url_map.iter_rules():
            theirs = rule.endpoint.partition(".")[0] in registry.by_blueprint
            if theirs and rule.rule in (card_path, AGENT_CARD_PATH if well_known else card_path):
                raise ConfigRuntimeError(
                    f"{rule.rule!r} already serves the card of {rule.endpoint!r}; give the "
                    "agent a url_prefix= (only one agent's card is at the well-known path: "
                    "well_known_card=)"
                )
            if rule.rule == settings.path:
                raise ConfigRuntimeError(
                    f"A2A_PATH {settings.path!r} is already routed to {rule.endpoint!r}; "
                    "choose another A2A_PATH"
                )
            if settings.rest_mount is not None and rule.rule.startswith(settings.rest_mount + "/"):
                raise ConfigRuntimeError(
                    f"A2A_REST_PATH {settings.rest_mount!r} already holds the route "
                    f"{rule.rule!r} ({rule.endpoint!r}); choose another A2A_REST_PATH, "
                    "or '' to serve no REST binding"
                )
        card = self._card
        if not card.name:  # the app's name, as its users know it (and the agent's, if named)
            named = app.name if self._name == DEFAULT_AGENT else f"{app.name} {self._name}"
            card = dataclasses.replace(card, name=named)
        check_card_config(card, settings, self._signing_keys, app)
        if first is not None and self._store is None and first.store_handle is not None:
            store = first.store_handle  # the agents of one app share the store
        else:
            store = store_for(app, settings, self._store, recorder(settings.metrics))
        # The memory store keeps push secrets in process memory only: nothing is at rest.
        secrets = PushSecrets(
            settings.push_secret_key,
            plaintext=lambda: holds_nothing_at_rest(chosen_store(store)),
        )
        if self._runner is not None:
            runner = self._runner
        elif first is not None:
            runner = first.exchange.runner  # ... and the run pool
        else:
            runner = default_runner(settings.run_pool_size)
        push = push_sender(
            settings,
            store,
            runner,
            secrets,
            self._signing_keys,
            client=self._push_client,
            resolver=self._push_resolver,
        )
        dispatcher = AppDispatcher(app, self._reentry)
        entities = EntityRegistry(self._entities, dispatcher, self._entity_gate)
        skills = list(self._skills)
        if not settings.disable_entity_skills:
            with app.app_context():  # the gate may read the app's config
                skills.extend(entities.skills())
        bus = self._bus
        if bus is None:
            bus = first.exchange.bus if first is not None else default_bus(settings) or Bus()
        # What agents of the app share closes with the last of them to shut down.
        have = list(registry.states.values())
        close_bus = last_out([(s.exchange.bus, s.close_bus) for s in have], bus, bus.close)
        close_store = last_out([(s.store_handle, s.close_store) for s in have], store, store.close)
        slots, seats = fleet_caps(settings, bus, runner)
        scoping = Scoping(self._name, registry)
        exchange = Exchange(
            settings,
            skills,
            store,
            runner,
            # Handlers and job workers use the app as a view does: current_app, db.session;
            # the host's code (handlers, the extended card hook) sees the caller's own tenant.
            hooks=HostHooks(
                run_context=app.app_context,
                updater_context=lambda: _app_context(app),
                reenter=dispatcher,
                handler_principal=scoping.host,
                extended_card=extended_card(self._extended_card, scoping.host, lambda: state.cards),
            ),
            push=push,
            extensions=declared_extensions(card.extensions),
            bus=bus,
            default_modes=(card.default_input_modes, card.default_output_modes),
            slots=slots,
            seats=seats,
            close_bus=close_bus,
            close_store=close_store,
        )
        close_bus.join(exchange)
        close_store.join(exchange)
        store.when_chosen(exchange.store_chosen)
        state = A2AState(exchange, self._principal, card, self._signing_keys)
        state.scoping = scoping
        state.close_bus, state.close_store = close_bus, close_store
        state.entities = entities
        state.push_secrets = secrets
        state.store_handle = store
        state.card_path = card_path
        state.owner_lookup = self._owner_lookup
        state.owner_name = self._owner_name
        self._states[app] = state
        registry.states[self._name] = state
        share_bus([s.exchange for s in registry.states.values() if s.exchange.bus is bus])
        blueprint = agent_blueprint(state, self._prefix, well_known, app)
        registry.by_blueprint[blueprint.name] = state
        registry.role_endpoints.update(f"{blueprint.name}.{view}" for view in _ROLE_VIEWS)
        app.register_blueprint(blueprint)
        if first is None:
            app.extensions["a2a"] = state
            app.extensions[REGISTRY_KEY] = registry
            state.csrf_exempted = exempt_from_csrf(app)  # CSRFProtect registered before A2A
            app.before_request(exempt_from_csrf_hook)  # ... or after: this runs before its check
            # `flask a2a` on the app itself too: Flask before 2.1 finds plugin commands only
            # through pkg_resources, which setuptools 81 and newer no longer ship.
            app.cli.add_command(lazy_a2a_cli, "a2a")
            if settings.console_path:  # the browser console (docs/console.md): the first agent's
                from .console import register as register_console

                register_console(app, settings.console_path, self._console_admin)
        state.endpoints = endpoints_of(app, blueprint.name, console=first is None)
        if settings.role == "agent" and not registry.guarded:
            registry.guarded = True  # one guard serves every agent's endpoints
            state.cards.guard_agent_role(app, registry.role_endpoints)
        register_exit(exchange)

    # -- reaching the state

    def state(self, app: Flask | None = None) -> A2AState:
        """This agent's state for ``app`` (default: the current app, or the only registered
        one); an instance not registered on ``app`` reads its first agent's."""
        if app is None:
            try:
                app = t.cast(Flask, current_app._get_current_object())  # type: ignore[attr-defined]
            except RuntimeError:
                if len(self._states) == 1:
                    return next(iter(self._states.values()))
                raise RuntimeError(
                    "no app context: pass app=, or call inside an app context"
                ) from None
        unwrap = getattr(app, "_get_current_object", None)  # current_app, say
        if unwrap is not None:
            app = t.cast(Flask, unwrap())
        try:
            return self._states.get(app) or t.cast(A2AState, app.extensions["a2a"])
        except KeyError:
            raise RuntimeError(
                "A2A is not registered on this app; did you call init_app?"
            ) from None

    def exchange(self, app: Flask | None = None) -> Exchange:
        return self.state(app).exchange

    def endpoints(self, app: Flask | None = None) -> tuple[str, ...]:
        """Every endpoint name this agent serves: its exchange, REST binding, card, JWKS and
        health route, and the console's (the first agent's). For a CSRF check of the app's own
        to skip: ``if request.endpoint not in a2a.endpoints(): check_csrf()``."""
        return self.state(app).endpoints

    def skills(self, app: Flask | None = None) -> list[Skill]:
        """Every skill the exchange serves (what feeds the agent card)."""
        return list(self.exchange(app).skills.values())

    def tools(
        self, app: Flask | None = None, *, principal: Principal | None = None
    ) -> list[dict[str, t.Any]]:
        """The entity tools ``principal`` may list (``None``: an anonymous caller)."""
        registry = self.state(app).entities
        return registry.listed_tools(principal) if registry is not None else []

    def store(self, app: Flask | None = None) -> Store:
        """The task store the exchange uses (chosen now if it was not yet)."""
        return self.state(app).store()

    def task_updater(self, task_id: str, app: Flask | None = None) -> TaskUpdater:
        """Continue a handed-off task from outside its run (see ``TaskContext.hand_off``)."""
        return self.exchange(app).task_updater(task_id)

    def shutdown(self, timeout: float | None = None, app: Flask | None = None) -> bool:
        """Refuse new runs, cut the live ones (CANCELED), and wait up to ``timeout``."""
        return self.exchange(app).shutdown(timeout)

    def export_user_data(self, owner: str, app: Flask | None = None) -> dict[str, t.Any]:
        """Every task and push config of ``owner``, as JSON-ready data (data export); push
        secrets are opened, as GetTaskPushNotificationConfig answers them."""
        state = self.state(app)
        data = state.exchange.store.export_owner(owner)
        if state.push_secrets is not None and "pushConfigs" in data:
            data["pushConfigs"] = [state.push_secrets.answer_wire(c) for c in data["pushConfigs"]]
        return data

    def erase_user_data(self, owner: str, app: Flask | None = None) -> int:
        """Delete every task and push config of ``owner``; their runs here are cut.

        Returns the number of rows removed.
        """
        mine = self.state(app)
        every = mine.scoping.registry.states.values() if mine.scoping is not None else [mine]
        pushes = [s.exchange.push for s in every if isinstance(s.exchange.push, PushSender)]
        # Their ids first: a push queue keeps each task's delivery status beside the store.
        task_ids = _task_ids(mine.exchange.store, owner) if any(p.queue for p in pushes) else []
        removed = mine.exchange.store.erase_owner(owner)
        # The store is shared by the app's agents: the owner's runs end in each of them.
        for state in every:
            for run in state.exchange.live_runs():
                if run.owner == owner:
                    state.exchange.forget(run.task_id)
        for push in pushes:  # and what their push queues hold for the owner
            push.owner_erased(owner, task_ids)
        return removed


def _task_ids(store: Store, owner: str) -> list[str]:
    """Every task id of ``owner``, across tenants and scope sets."""
    ids: list[str] = []
    query = ListQuery(owner=owner, tenanted=False, scoped=False, limit=500)
    while True:
        page = store.list_tasks(query)
        ids.extend(record.task.id for record in page.records if record.owner == owner)
        if page.next_cursor is None or not page.records:
            return ids
        query = dataclasses.replace(query, cursor=page.next_cursor)


def _app_context(app: Flask) -> t.ContextManager[object]:
    """``app``'s context for a TaskUpdater write, unless the worker is already in one of
    ``app``'s (its own ``db.session`` work must not be torn down by our write)."""
    if has_app_context() and current_app._get_current_object() is app:  # type: ignore[attr-defined]
        return contextlib.nullcontext()
    return app.app_context()


def _state() -> A2AState:
    return t.cast(A2AState, current_app.extensions["a2a"])
