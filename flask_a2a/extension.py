"""The Flask extension: mounts the exchange and the agent card on an app.

``A2A(app, skills=[...], principal=...)`` or ``A2A(...).init_app(app)``. State lives in
``app.extensions["a2a"]`` (an :class:`A2AState`); the extension object never holds the app.
"""

from __future__ import annotations

import atexit
import io
import typing as t
import weakref

from flask import Blueprint, Flask, Response, current_app, request

from .card import AGENT_CARD_PATH, AgentCard, build_card, encode_card, etag_of
from .config import DEFAULTS, Settings
from .model import Principal
from .router import Skill
from .runner import Runner, default_runner
from .server import Exchange, HTTPRequest
from .store.base import Store
from .store.memory import MemoryStore
from .tasks import TaskUpdater

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
    ) -> None:
        self.exchange = exchange
        self.settings = exchange.settings
        self.principal_hook = principal
        self.card = card

    def resolve_principal(self) -> Principal | None:
        """Run the host's hook in the current request; a plain string is taken as the owner."""
        found = self.principal_hook()
        if found is None or isinstance(found, Principal):
            return found
        if isinstance(found, str) and found:
            return Principal(owner=found)
        raise TypeError("the principal hook must return a flask_a2a.Principal, a str or None")


class A2A:
    """Serve the A2A v1.0 task exchange from a Flask app.

    :param skills: the hand-written skills (at least one skill overall, or startup fails).
    :param principal: called inside each request after the app's own auth; returns the
        caller's :class:`Principal` (or owner id), or ``None`` to refuse with 401 / -31401.
    :param store: where tasks live; the in-memory store when not given.
    :param runner: where handlers run; a gevent pool when the process is monkey-patched,
        threads otherwise.
    :param extended_card: ``extended_card(principal) -> dict`` served by GetExtendedAgentCard.
    :param card: what the public agent card says about the agent.

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
    ) -> None:
        self._skills = list(skills)
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
        exchange = Exchange(
            settings,
            self._skills,
            self._store if self._store is not None else MemoryStore(),
            self._runner if self._runner is not None else default_runner(settings.run_pool_size),
            extended_card=self._extended_card,
        )
        state = A2AState(exchange, self._principal, self._card)
        app.extensions["a2a"] = state
        self._states[app] = state
        app.register_blueprint(_blueprint(settings))
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

    def task_updater(self, task_id: str, app: Flask | None = None) -> TaskUpdater:
        """Continue a handed-off task from outside its run (see ``TaskContext.hand_off``)."""
        return self.exchange(app).task_updater(task_id)

    def shutdown(self, timeout: float | None = None, app: Flask | None = None) -> bool:
        """Refuse new runs, cut the live ones (CANCELED), and wait up to ``timeout``."""
        return self.exchange(app).shutdown(timeout)


def _register_exit(exchange: Exchange) -> None:
    ref = weakref.ref(exchange)

    def at_exit() -> None:
        live = ref()
        if live is not None and not live.closing:
            live.shutdown()

    atexit.register(at_exit)


def _state() -> A2AState:
    return t.cast(A2AState, current_app.extensions["a2a"])


def _exchange_view() -> Response:
    state = _state()
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    environ = {k: v for k, v in request.environ.items() if not k.startswith("werkzeug.")}
    environ["wsgi.input"] = io.BytesIO(b"")
    environ["CONTENT_LENGTH"] = "0"

    def refresh_principal() -> Principal | None:
        """Re-run the app's auth for a long-lived stream, in a fresh request context."""
        with app.request_context(environ):
            if app.preprocess_request() is not None:
                return None
            return state.resolve_principal()

    http = HTTPRequest(
        method=request.method,
        headers=request.headers,
        host=request.host,
        content_length=request.content_length,
        read_body=request.stream.read,
        resolve_principal=state.resolve_principal,
        query=request.args,
        refresh_principal=refresh_principal,
    )
    reply = state.exchange.handle(http)
    if reply.streaming:
        return Response(reply.body, reply.status, reply.headers, direct_passthrough=True)
    return Response(reply.body, reply.status, reply.headers)


def _card_view() -> Response:
    state = _state()
    settings = state.settings
    base = settings.public_base_url or request.host_url
    card = build_card(
        state.card,
        endpoint_url=base.rstrip("/") + settings.path,
        skills=state.exchange.skills.values(),
        streaming=True,
        push=state.exchange.push is not None,
        extended=state.exchange.extended_card is not None,
    )
    body = encode_card(card)
    etag = etag_of(body)
    headers = {
        "ETag": etag,
        "Cache-Control": f"public, max-age={settings.card_max_age}",
        "Access-Control-Allow-Origin": "*",
    }
    if request.if_none_match.contains(etag.strip('"')):
        return Response(status=304, headers=headers)
    return Response(body, 200, headers, mimetype="application/json")


def _blueprint(settings: Settings) -> Blueprint:
    bp = Blueprint("a2a", __name__)
    bp.add_url_rule(settings.path, "exchange", _exchange_view, methods=_ALL_METHODS)
    bp.add_url_rule(AGENT_CARD_PATH, "agent_card", _card_view, methods=["GET"])
    return bp
