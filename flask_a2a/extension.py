"""The Flask extension: mounts the exchange and the agent card on an app.

``A2A(app, skills=[...], principal=...)`` or ``A2A(...).init_app(app)``. State lives in
``app.extensions["a2a"]`` (an :class:`A2AState`); the extension object never holds the app.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import typing as t
import weakref

from flask import Blueprint, Flask, Request, Response, current_app, has_app_context, request

from .bindings import jsonrpc as jsonrpc_binding
from .bindings import rest as rest_binding
from .card.document import PROTECTED_RESOURCE_PATH, AgentCard, CardPublisher, check_card_config
from .config import DEFAULTS, Settings
from .entities.registry import Entity, EntityGate, EntityRegistry
from .exchange.bus import Bus
from .exchange.calls import HTTPRequest, Reply
from .exchange.methods import Exchange
from .exchange.replicas import ReplicaWatch, is_shared
from .exchange.router import Skill
from .exchange.run_leases import supports_leases
from .exchange.runner import Runner, default_runner
from .exchange.tasks import TaskUpdater
from .ops.metrics import metrics_view, recorder
from .protocol.extensions import declared_extensions
from .protocol.model import Principal
from .protocol.scrub import scrub
from .push.secrets import PushSecrets
from .push.webhooks import PushSender
from .store.base import Store, holds_nothing_at_rest
from .store.choice import chosen_store, store_for

if t.TYPE_CHECKING:
    import requests

    from .card.signing import SigningKey

PrincipalHook = t.Callable[[], "Principal | str | None"]
ExtendedCardHook = t.Callable[[Principal], t.Any]

#: HTTP methods routed to the endpoint so that anything but POST gets a JSON-RPC 405.
_ALL_METHODS: t.Final = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


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
        #: Serves the card, the JWKS, RFC 9728 metadata and (agent role) the health route.
        self.cards = CardPublisher(card, exchange.settings, exchange, signing_keys)

    def store(self) -> Store:
        """The task store (chosen now if it was not yet: see ``store_choice``)."""
        return chosen_store(self.exchange.store)

    def resolve_principal(self) -> Principal | None:
        """Run the host's hook in the current request; a plain string or int (``user.id``) is
        taken as the owner. Anything else fails the request naming the hook (a log ERROR,
        -32603 to the caller)."""
        found: object = self.principal_hook()
        if found is None or isinstance(found, Principal):
            return found
        if isinstance(found, str | int) and not isinstance(found, bool) and found != "":
            return Principal(owner=str(found))
        hook = self.principal_hook
        name = f"{getattr(hook, '__module__', '?')}.{getattr(hook, '__qualname__', hook)}"
        raise TypeError(
            f"the principal hook {name} returned {type(found).__name__} "
            f"{scrub(repr(found))[:80]}: return a "
            "flask_a2a.Principal, an owner id (a non-empty str or an int) or None"
        )


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
    ) -> None:
        self._bus = bus
        self._entities = list(entities)
        self._entity_gate = entity_gate
        self._push_client = push_client
        self._push_resolver = push_resolver
        self._skills = list(skills)
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
        if "a2a" in app.extensions:
            raise RuntimeError(
                "A2A is already registered on this app; create one A2A instance per app"
            )
        if self._principal is None:
            raise ValueError(
                "A2A needs principal=: a function returning the caller's Principal (tasks are "
                "per-user data, there is no anonymous posture)"
            )
        for key, default in DEFAULTS.items():
            app.config.setdefault(key, default)
        settings = Settings.from_config(app.config)
        for rule in app.url_map.iter_rules():
            if rule.rule == settings.path:
                raise RuntimeError(
                    f"A2A_PATH {settings.path!r} is already routed to {rule.endpoint!r}; "
                    "choose another A2A_PATH"
                )
            if settings.rest_mount is not None and rule.rule.startswith(settings.rest_mount + "/"):
                raise RuntimeError(
                    f"A2A_REST_PATH {settings.rest_mount!r} already holds the route "
                    f"{rule.rule!r} ({rule.endpoint!r}); choose another A2A_REST_PATH, "
                    "or '' to serve no REST binding"
                )
        check_card_config(self._card, settings, self._signing_keys, app)
        store = store_for(app, settings, self._store, recorder(settings.metrics))
        # The memory store keeps push secrets in process memory only: nothing is at rest.
        secrets = PushSecrets(
            settings.push_secret_key,
            plaintext=lambda: holds_nothing_at_rest(chosen_store(store)),
        )
        runner = self._runner if self._runner is not None else default_runner(
            settings.run_pool_size
        )
        push = None if settings.disable_push_notifications else PushSender(
            t.cast(Store, store),
            runner.spawn,
            allow_private=settings.allow_private_push,
            timeout=settings.push_timeout,
            max_configs_per_task=settings.max_push_configs_per_task,
            client=self._push_client,
            resolver=self._push_resolver,
            refresh=settings.replica_poll_interval,
            secrets=secrets,
            metrics=recorder(settings.metrics),
        )
        registry = EntityRegistry(self._entities, app, self._entity_gate)
        skills = list(self._skills)
        if not settings.disable_entity_skills:
            with app.app_context():  # the gate may read the app's config
                skills.extend(registry.skills())
        exchange = Exchange(
            settings,
            skills,
            t.cast(Store, store),
            runner,
            extended_card=self._extended_card,
            push=push,
            extensions=declared_extensions(self._card.extensions),
            bus=self._bus if self._bus is not None else default_bus(settings),
        )
        # Handlers and job workers use the app as a view does: current_app, db.session.
        exchange.runs.run_context = app.app_context
        exchange.updater_context = lambda: _app_context(app)
        store.when_chosen(lambda chosen: _watch_replicas(exchange))
        if settings.fleet_limits:
            from .fleet.limits import install_fleet_limits

            install_fleet_limits(exchange)
        state = A2AState(exchange, self._principal, self._card, self._signing_keys)
        if self._extended_card is not None:
            exchange.extended_card = state.cards.extended_hook(self._extended_card)
        state.entities = registry
        state.push_secrets = secrets
        app.extensions["a2a"] = state
        self._states[app] = state
        app.register_blueprint(_blueprint(settings, state.cards))
        state.csrf_exempted = _exempt_from_csrf(app)  # CSRFProtect registered before A2A
        app.before_request(_exempt_from_csrf_hook)  # ... or after: this runs before its check
        state.cards.guard_agent_role(app)
        _register_exit(exchange)

    # -- reaching the state

    def state(self, app: Flask | None = None) -> A2AState:
        """The state for ``app`` (default: the current app, or the only registered one)."""
        if app is None:
            try:
                app = t.cast(Flask, current_app._get_current_object())  # type: ignore[attr-defined]
            except RuntimeError:
                if len(self._states) == 1:
                    return next(iter(self._states.values()))
                raise RuntimeError(
                    "no app context: pass app=, or call inside an app context"
                ) from None
        try:
            return t.cast(A2AState, app.extensions["a2a"])
        except KeyError:
            raise RuntimeError(
                "A2A is not registered on this app; did you call init_app?"
            ) from None

    def exchange(self, app: Flask | None = None) -> Exchange:
        return self.state(app).exchange

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
        exchange = self.exchange(app)
        removed = exchange.store.erase_owner(owner)
        for run in exchange.live_runs():
            if run.owner == owner:
                exchange.forget(run.task_id)
        return removed


def _watch_replicas(exchange: Exchange) -> None:
    """A store chosen after the exchange was built: watch other replicas' writes if shared."""
    if exchange.replicas is None and is_shared(exchange.store):
        exchange.replicas = exchange.runs.replicas = ReplicaWatch(exchange)
    if exchange.leases is None and supports_leases(exchange.store, exchange.settings):
        exchange.lease_runs()


def default_bus(settings: Settings) -> Bus | None:
    """No ``bus=``: a Redis bus on ``A2A_REDIS_URL`` (the ``redis`` extra), else None (the
    exchange's own in-process bus)."""
    if not settings.redis_url:
        return None
    try:
        from .fleet.redis_bus import RedisBus
    except ImportError as exc:
        raise RuntimeError(
            "A2A_REDIS_URL needs the redis extra: pip install 'flask-a2a[redis]'"
        ) from exc
    return RedisBus.from_settings(settings)


#: Every exchange of this process, for the exit hooks (weak: apps may come and go in tests).
_LIVE: weakref.WeakSet[Exchange] = weakref.WeakSet()


def shutdown_all(timeout: float | None = None) -> None:
    """Shut down every exchange of this process (``atexit`` and gunicorn's ``worker_exit``)."""
    for exchange in list(_LIVE):
        if not exchange.closing:
            exchange.shutdown(timeout)


def _register_exit(exchange: Exchange) -> None:
    if not _LIVE:
        atexit.register(shutdown_all)
    _LIVE.add(exchange)


def _exempt_from_csrf(app: Flask) -> bool:
    """Exempt the exchange view from Flask-WTF's ``CSRFProtect`` when the app has one.

    The exchange is no form endpoint: its Origin gate (a cross-site browser POST is refused
    before the body is read) and its JSON content type are its CSRF defence, and A2A clients
    carry no CSRF token. Only this view is exempted; the app's own routes stay checked.
    """
    exempt = getattr(app.extensions.get("csrf"), "exempt", None)
    if exempt is None:
        return False
    exempt(_exchange_view)
    exempt(_rest_view)
    return True


def _exempt_from_csrf_hook() -> None:
    """Registered by ``init_app``, so it runs before the check of a ``CSRFProtect`` set up
    later (before-request hooks run in registration order); once done, it only reads a flag."""
    state = _state()
    if not state.csrf_exempted:
        state.csrf_exempted = _exempt_from_csrf(current_app)


def _app_context(app: Flask) -> t.ContextManager[object]:
    """``app``'s context for a TaskUpdater write, unless the worker is already in one of
    ``app``'s (its own ``db.session`` work must not be torn down by our write)."""
    if has_app_context() and current_app._get_current_object() is app:  # type: ignore[attr-defined]
        return contextlib.nullcontext()
    return app.app_context()


def _state() -> A2AState:
    return t.cast(A2AState, current_app.extensions["a2a"])


def _exchange_view() -> Response:
    state = _state()
    exchange = state.exchange
    return _answer(state, jsonrpc_binding.handle(
        _http_request(state), exchange.settings, exchange.methods, exchange.extensions
    ))


def _rest_view(route: str = "") -> Response:
    """The HTTP+JSON binding: every path below ``A2A_REST_PATH`` (``rest.py`` routes it)."""
    state = _state()
    exchange = state.exchange
    return _answer(state, rest_binding.handle(
        _http_request(state), route, exchange.settings, exchange.methods, exchange.extensions
    ))


def _http_request(state: A2AState) -> HTTPRequest:
    return _FlaskHTTPRequest(
        t.cast(Request, request._get_current_object()),  # type: ignore[attr-defined]
        state.resolve_principal,
    )


class _FlaskHTTPRequest(HTTPRequest):
    """The exchange's view of the Flask request: what no binding reads is never parsed
    (werkzeug parses the query string, the host and the input stream on first access)."""

    def __init__(self, req: Request, resolve: t.Callable[[], Principal | None]) -> None:
        self._req = req
        self.method = req.method
        self.headers = req.headers
        self.content_length = req.content_length
        self.resolve_principal = resolve
        self.principal_refresher = _principal_refresher

    def read_body(self, size: int) -> bytes:
        return self._req.stream.read(size)

    @property
    def host(self) -> str:
        return self._req.host

    @property
    def query(self) -> t.Mapping[str, str]:
        return self._req.args

    @property
    def client_socket(self) -> t.Any:
        environ = self._req.environ
        return environ.get("gunicorn.socket") or environ.get("werkzeug.socket")


def _answer(state: A2AState, reply: Reply) -> Response:
    if reply.status == 401 and state.settings.authorization_servers:
        # RFC 9728 §5.1: point the client at the protected-resource metadata.
        metadata = state.cards.base_url() + PROTECTED_RESOURCE_PATH + state.settings.path
        reply.headers = [(k, v) for k, v in reply.headers if k != "WWW-Authenticate"]
        reply.headers.append(("WWW-Authenticate", f'Bearer resource_metadata="{metadata}"'))
    if reply.streaming:  # each event written as it is yielded (never buffered)
        return _StreamResponse(reply.body, reply.status, reply.headers)
    return Response(reply.body, reply.status, reply.headers)


class _StreamResponse(Response):
    """A stream's response hands the relay (which yields bytes) to the server as it is, not
    wrapped in werkzeug's encoding generator and closing iterator: an idle stream's greenlet
    then parks two interpreter calls shallower, and their frames and C stack (~3 KB a stream)
    are not kept. With ``call_on_close`` callbacks (an ``after_request`` hook may add some) it
    answers as any response does, so they run when the stream closes."""

    def get_app_iter(self, environ: t.Any) -> t.Iterable[bytes]:
        if getattr(self, "_on_close", None) or environ.get("REQUEST_METHOD") == "HEAD":
            return super().get_app_iter(environ)
        return t.cast(t.Iterable[bytes], self.response)


def _principal_refresher() -> t.Callable[[], Principal | None]:
    """For a stream, called inside its request: re-resolves the caller later, at keep-alives.

    Re-runs the app's own before-request hooks (its auth) and the principal hook in a fresh
    request context built from a copy of this request's environ, made at each re-check (the
    server holds the environ for the whole response; an idle stream holds no copy).
    """
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    return _Refresh(app, _state(), request.environ)


class _Refresh:
    """A stream's principal re-check (one small object: every idle stream holds one)."""

    __slots__ = ("app", "state", "environ")

    def __init__(self, app: Flask, state: A2AState, environ: dict[str, t.Any]) -> None:
        self.app = app
        self.state = state
        self.environ = environ

    def __call__(self) -> Principal | None:
        environ = {k: v for k, v in self.environ.items() if not k.startswith("werkzeug.")}
        environ["wsgi.input"] = io.BytesIO(b"")
        environ["CONTENT_LENGTH"] = "0"
        app = self.app
        with app.request_context(environ):
            if app.preprocess_request() is not None:
                return None
            return self.state.resolve_principal()


def _blueprint(settings: Settings, cards: CardPublisher) -> Blueprint:
    bp = Blueprint("a2a", __name__)
    bp.add_url_rule(settings.path, "exchange", _exchange_view, methods=_ALL_METHODS)
    if settings.rest_mount is not None:
        bp.add_url_rule(settings.rest_mount, "rest_root", _rest_view, methods=_ALL_METHODS)
        bp.add_url_rule(
            settings.rest_mount + "/<path:route>", "rest", _rest_view, methods=_ALL_METHODS
        )
    cards.add_routes(bp)
    if settings.metrics_path:
        bp.add_url_rule(settings.metrics_path, "metrics", metrics_view, methods=["GET"])
    return bp
