"""The Flask side of a request: the views an agent's blueprint routes to, the exchange's view of
the Flask request (:class:`FlaskHTTPRequest`), and the binding's ``Reply`` written back.

``extension.A2A.init_app`` registers :func:`agent_blueprint` for each agent; a view finds its agent
by the blueprint that routed the request (``agents.Agents.by_blueprint``).
"""

from __future__ import annotations

import io
import typing as t

from flask import Blueprint, Flask, Request, Response, current_app, request
from werkzeug.exceptions import HTTPException

from .agents import DEFAULT_AGENT, agents
from .bindings import jsonrpc as jsonrpc_binding
from .bindings import rest as rest_binding
from .bindings import rest_v03 as rest_v03_binding
from .card.document import PROTECTED_RESOURCE_PATH, CardPublisher
from .config import Settings
from .exchange.calls import HTTPRequest, Reply
from .host_refusals import answer_host_refusals
from .ops.metrics import metrics_view
from .protocol import jsonrpc
from .protocol.errors import A2AError
from .protocol.model import Principal

if t.TYPE_CHECKING:
    from .state import A2AState

#: HTTP methods routed to the endpoint so that anything but POST gets a JSON-RPC 405.
ALL_METHODS: t.Final = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def agent_state() -> A2AState:
    """The state of the agent whose blueprint routed this request."""
    return agents(current_app).by_blueprint[t.cast(str, request.blueprint)]


def exchange_view() -> Response:
    state = agent_state()
    exchange = state.exchange
    return _answer(
        state,
        jsonrpc_binding.handle(
            _http_request(state),
            exchange.settings,
            exchange.methods,
            exchange.extensions,
            legacy=state.legacy,
        ),
    )


def rest_view(route: str = "") -> Response:
    """The HTTP+JSON binding: every path below ``A2A_REST_PATH`` (``rest.py`` routes it)."""
    return _rest_answer(agent_state(), route)


def _rest_answer(state: A2AState, route: str) -> Response:
    exchange = state.exchange
    if state.legacy_rest is not None and route.startswith(rest_v03_binding.PREFIX):
        return _answer(
            state,
            rest_v03_binding.handle(
                _http_request(state),
                route[len(rest_v03_binding.PREFIX) :],
                exchange.settings,
                state.legacy_rest,
                exchange.extensions,
            ),
        )
    return _answer(
        state,
        rest_binding.handle(
            _http_request(state), route, exchange.settings, exchange.methods, exchange.extensions
        ),
    )


def rest_unrouted() -> Response | None:
    """A request under ``A2A_REST_PATH`` werkzeug could not route — a trailing slash, a
    doubled one (``merge_slashes`` would redirect), a verb no rule lists — goes to the REST
    binding, which answers its google.rpc.Status JSON (404, 405) instead of werkzeug's HTML.
    Routing errors are raised only at dispatch, after the before-request hooks, so this sees
    them first; every other path keeps the host's own answer."""
    if request.routing_exception is None:
        return None
    path = request.path
    for state in agents(current_app).states.values():
        mount = state.settings.rest_mount
        if mount is not None and (path == mount or path.startswith(mount + "/")):
            return _rest_answer(state, path[len(mount) + 1 :])
    return None


def _http_request(state: A2AState) -> HTTPRequest:
    return FlaskHTTPRequest(
        t.cast(Request, request._get_current_object()),  # type: ignore[attr-defined]
        state.resolve_principal,
    )


class FlaskHTTPRequest(HTTPRequest):
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
    def environ(self) -> t.Mapping[str, t.Any]:
        return self._req.environ

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
    return _Refresh(app, agent_state(), request.environ)


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
            try:
                if app.preprocess_request() is not None:
                    return None  # the host's hooks answered instead: a refusal
            except HTTPException:  # ... or aborted (a ban, a CSRF check, a login hook)
                return None
            return self.state.resolve_principal()


def _refusal_answer() -> t.Callable[[A2AError], Response]:
    """How this request's endpoint answers a refusal: a JSON-RPC error (no id: the body was
    never read) on the exchange, the REST binding's error everywhere else."""
    state = agent_state()
    if (request.endpoint or "").endswith(".exchange"):
        return lambda error: _answer(state, jsonrpc_binding.error_reply(jsonrpc.NO_ID, error))
    return lambda error: _answer(state, rest_binding.error_reply(error))


def _is_api() -> bool:
    """The request is for the exchange or the REST binding (not the card, a GET page)."""
    return (request.endpoint or "").rpartition(".")[2] in ("exchange", "rest", "rest_root")


def agent_blueprint(
    settings: Settings, cards: CardPublisher, prefix: str, well_known: bool, app: Flask
) -> Blueprint:
    name = "a2a" if settings.agent == DEFAULT_AGENT else f"a2a_{settings.agent}"
    bp = Blueprint(name, __name__)
    bp.add_url_rule(settings.path, "exchange", exchange_view, methods=ALL_METHODS)
    if settings.rest_mount is not None:
        bp.add_url_rule(settings.rest_mount, "rest_root", rest_view, methods=ALL_METHODS)
        bp.add_url_rule(
            settings.rest_mount + "/<path:route>", "rest", rest_view, methods=ALL_METHODS
        )
    cards.add_routes(bp, prefix, well_known)
    answer_host_refusals(bp, _refusal_answer, redirects=_is_api)
    # The metrics are the process's: an agent whose metrics path is taken serves none.
    taken = {rule.rule for rule in app.url_map.iter_rules()}
    if settings.metrics_path and settings.metrics_path not in taken:
        bp.add_url_rule(settings.metrics_path, "metrics", metrics_view, methods=["GET"])
    return bp
