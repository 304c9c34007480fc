"""The Flask side of a request: the views an agent's blueprint routes to, the exchange's view of
the Flask request (:class:`FlaskHTTPRequest`), and the binding's ``Reply`` written back.

``extension.A2A.init_app`` registers :func:`agent_blueprint` for each agent; a view finds its agent
by the blueprint that routed the request (``agents.Agents.by_blueprint``).
"""

from __future__ import annotations

import functools
import io
import typing as t

from flask import Blueprint, Flask, Request, Response, current_app, request
from werkzeug.datastructures import Headers
from werkzeug.exceptions import HTTPException
from werkzeug.routing import BaseConverter

from .agents import DEFAULT_AGENT, agents
from .bindings import jsonrpc as jsonrpc_binding
from .bindings import rest as rest_binding
from .bindings import rest_v03 as rest_v03_binding
from .card.document import PROTECTED_RESOURCE_PATH
from .exchange.calls import HTTPRequest, Reply
from .host_refusals import PASSED_HOOKS, answer_host_refusals, passes_hooks
from .ops.metrics import metrics_view
from .protocol import jsonrpc
from .protocol.errors import A2AError
from .protocol.model import Principal

if t.TYPE_CHECKING:
    from .state import A2AState

#: HTTP methods routed to the endpoint so that anything but POST gets a JSON-RPC 405.
ALL_METHODS: t.Final = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def agent_state() -> A2AState:
    """The state of the agent whose blueprint routed this request (its rule's endpoint read
    once, where ``request.blueprint`` reads it through two properties)."""
    rule = request.url_rule
    name = rule.endpoint.rpartition(".")[0] if rule is not None else request.blueprint
    return agents(current_app).by_blueprint[name]  # type: ignore[index]


def exchange_view(state: A2AState) -> Response:
    """The JSON-RPC binding (registered bound to its agent: :func:`bound_to`)."""
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


def rest_view(state: A2AState, route: str = "") -> Response:
    """The HTTP+JSON binding: every path below ``A2A_REST_PATH`` (``rest.py`` routes it)."""
    return _rest_answer(state, route)


def bound_to(state: A2AState, view: t.Callable[..., Response]) -> t.Callable[..., Response]:
    """``view`` for ``state``'s agent, under the view's own name and module (what Flask-WTF's
    exemption matches): a request then never looks its agent up (a dozen calls)."""

    def bound(**route: t.Any) -> Response:
        return view(state, **route)

    return functools.wraps(view)(bound)


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


class AnyPath(BaseConverter):
    """Any text, slashes included, empty too: the REST binding routes every path below its
    mount itself and answers what it cannot route as its google.rpc.Status JSON (404, 405)."""

    regex = r"[\s\S]*"  # "." would stop at a newline (a percent-encoded %0A)
    part_isolating = False  # werkzeug 2.2+: the value may span path segments


#: The URL converter the REST rules use, registered on the app under this name.
ANY_PATH: t.Final = "a2a_any_path"


def route_everything_under(bp: Blueprint, mount: str, view: t.Callable[..., Response]) -> None:
    """Route every request below ``mount`` to ``view``: any method, a doubled or trailing
    slash (werkzeug would answer its own HTML 404, 405 or a redirect), so that no hook has to
    look at every request of the app for the few werkzeug cannot route. Werkzeug rules with
    no method list (Flask's ``add_url_rule`` always gives one), added when ``bp`` is."""

    def register(setup: t.Any) -> None:
        app = setup.app
        app.url_map.converters[ANY_PATH] = AnyPath
        prefix = f"{setup.name_prefix}.{setup.name}".lstrip(".")
        for rule, endpoint in ((mount, "rest_root"), (f"{mount}/<{ANY_PATH}:route>", "rest")):
            app.url_map.add(
                app.url_rule_class(
                    rule, endpoint=f"{prefix}.{endpoint}", methods=None, merge_slashes=False
                )
            )
            app.view_functions[f"{prefix}.{endpoint}"] = view

    bp.record_once(register)


def _http_request(state: A2AState) -> HTTPRequest:
    req: Request = request._get_current_object()  # type: ignore[attr-defined]
    req.environ[PASSED_HOOKS] = True  # reached our view: the host's hooks let it through
    return FlaskHTTPRequest(req, state.resolve_principal)


class FlaskHTTPRequest(HTTPRequest):
    """The exchange's view of the Flask request: what no binding reads is never parsed
    (werkzeug parses the query string, the host and the input stream on first access)."""

    def __init__(self, req: Request, resolve: t.Callable[[], Principal | None]) -> None:
        self._req = req
        self.method = req.method
        self.headers = _EnvironHeaders(req.environ)
        self.content_length = _content_length(req)
        self.resolve_principal = resolve
        self.principal_refresher = _principal_refresher
        #: Body bytes left to read from the server's input (-1: werkzeug's stream reads it).
        self._raw_left: int | None = None

    def read_body(self, size: int) -> bytes:
        left = self._raw_left
        if left is None:
            left = self._raw_left = self._raw_length()
        if left < 0:
            return self._req.stream.read(size)
        if size > left:  # never past the body: a keep-alive socket would wait for more
            size = left
        chunk: bytes = self._req.environ["wsgi.input"].read(size) if size > 0 else b""
        self._raw_left = left - len(chunk)
        return chunk

    def _raw_length(self) -> int:
        """The body's length when it is read from the server's input as it is: a plain
        ``Content-Length`` within the app's ``MAX_CONTENT_LENGTH``, a stream werkzeug has not
        wrapped yet (the host's code did not read the body). -1: read through werkzeug's
        ``request.stream`` (a chunked body, a limit it answers 413 for), which costs two dozen
        calls more a request."""
        req, length = self._req, self.content_length
        if length is None or "stream" in req.__dict__:
            return -1
        limit = getattr(req, "_max_content_length", None)
        if limit is None:
            limit = current_app.config.get("MAX_CONTENT_LENGTH")
        return length if limit is None or length <= limit else -1

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


#: Header name, as the code spells it -> its WSGI environ key (a few dozen names at most).
_ENVIRON_KEYS: dict[str, str] = {}


class _EnvironHeaders:
    """The request's headers as the exchange reads them (``get`` of a name, in any case, as
    werkzeug's ``EnvironHeaders`` matches it): one environ lookup, where werkzeug's ``get``
    costs five calls and an answer reads five headers or so."""

    __slots__ = ("environ",)

    def __init__(self, environ: t.Mapping[str, t.Any]) -> None:
        self.environ = environ

    def get(self, key: str, default: t.Any = None) -> t.Any:
        try:
            name = _ENVIRON_KEYS[key]
        except KeyError:
            name = key.upper().replace("-", "_")
            if name not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                name = "HTTP_" + name
            if len(_ENVIRON_KEYS) < 256:  # bounded: names come from the code, not requests
                _ENVIRON_KEYS[key] = name
        return self.environ.get(name, default)


def _content_length(req: Request) -> int | None:
    """``req.content_length``, read straight from the environ for the usual plain count
    (werkzeug's property costs a dozen calls); anything else is werkzeug's to read."""
    environ = req.environ
    value = environ.get("CONTENT_LENGTH")
    if (
        value is not None
        and "HTTP_TRANSFER_ENCODING" not in environ
        and value.isdigit()
        and value.isascii()
    ):
        return int(value)
    return req.content_length


def _answer(state: A2AState, reply: Reply) -> Response:
    if reply.status == 401 and state.settings.authorization_servers:
        # RFC 9728 §5.1: point the client at the protected-resource metadata.
        metadata = state.cards.base_url() + PROTECTED_RESOURCE_PATH + state.settings.path
        reply.headers = [(k, v) for k, v in reply.headers if k != "WWW-Authenticate"]
        reply.headers.append(("WWW-Authenticate", f'Bearer resource_metadata="{metadata}"'))
    if reply.streaming:  # each event written as it is yielded (never buffered)
        return _StreamResponse(reply.body, reply.status, reply.headers)
    body: bytes = reply.body.encode()  # type: ignore[union-attr]  # a whole answer: a str
    headers = Headers()  # given as Headers, werkzeug takes them as they are
    for key, value in reply.headers:
        headers.add(key, value)  # checked as werkzeug checks any header (no newline)
    headers.add("Content-Length", str(len(body)))
    # The body as its one chunk with its length set here: werkzeug's set_data would encode
    # and set the length through a dozen calls.
    return _Answer([body], reply.status, headers)


#: The headers a binding's answer carries that werkzeug's ``get_wsgi_headers`` leaves as they
#: are (it rewrites ``Location`` and ``Content-Location``, and only those).
_PLAIN_HEADERS: t.Final = frozenset({
    "Content-Type", "Content-Length", "Cache-Control", "A2A-Version", "A2A-Extensions",
    "Access-Control-Allow-Origin", "Access-Control-Expose-Headers", "Vary", "Allow", "allow",
    "WWW-Authenticate", "Retry-After", "ETag", "Last-Modified",
})  # fmt: skip


class _Answer(Response):
    """A binding's whole (not streamed) answer. Werkzeug copies every response's headers
    before writing them, to look for a ``Location`` to rewrite, a status that takes no body
    and a length to set: ours (their names all in :data:`_PLAIN_HEADERS`, the length set by
    the body, a status with a body) need none of it, and go out as they are, a copy fewer
    per request. Anything else (a header an ``after_request`` hook added) is werkzeug's."""

    def get_wsgi_headers(self, environ: t.Any) -> t.Any:
        headers = self.headers
        status = self.status_code
        if status < 200 or status == 204 or status == 304:
            return super().get_wsgi_headers(environ)
        sized = False
        for key, _ in headers:
            if key not in _PLAIN_HEADERS:
                return super().get_wsgi_headers(environ)
            if key == "Content-Length":
                sized = True
        return headers if sized else super().get_wsgi_headers(environ)

    def get_app_iter(self, environ: t.Any) -> t.Iterable[bytes]:
        """The body's one bytes chunk as it is, where werkzeug wraps it in an encoding
        generator and a closing iterator: there is nothing to encode or to close (unless a
        hook added a ``call_on_close``, or the answer takes no body: then werkzeug's)."""
        body, status = self.response, self.status_code
        if (
            type(body) is list
            and len(body) == 1
            and type(body[0]) is bytes  # set_data's one chunk
            and not getattr(self, "_on_close", None)
            and environ["REQUEST_METHOD"] != "HEAD"
            and 200 <= status
            and status not in (204, 304)
        ):
            return body
        return super().get_app_iter(environ)


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


def agent_blueprint(state: A2AState, prefix: str, well_known: bool, app: Flask) -> Blueprint:
    settings = state.settings
    name = "a2a" if settings.agent == DEFAULT_AGENT else f"a2a_{settings.agent}"
    bp = Blueprint(name, __name__)
    bp.add_url_rule(settings.path, "exchange", bound_to(state, exchange_view), methods=ALL_METHODS)
    if settings.rest_mount is not None:
        route_everything_under(bp, settings.rest_mount, bound_to(state, rest_view))
    state.cards.add_routes(_Marking(bp), prefix, well_known)
    # The exchange's and REST views mark the request themselves (``_http_request``).
    answer_host_refusals(bp, _refusal_answer, redirects=_is_api, views_mark=True)
    # The metrics are the process's: an agent whose metrics path is taken serves none.
    taken = {rule.rule for rule in app.url_map.iter_rules()}
    if settings.metrics_path and settings.metrics_path not in taken:
        bp.add_url_rule(
            settings.metrics_path, "metrics", passes_hooks(metrics_view), methods=["GET"]
        )
    return bp


class _Marking:
    """``bp`` for the card's routes: each view wrapped in :func:`passes_hooks`."""

    def __init__(self, bp: Blueprint) -> None:
        self.bp = bp

    def add_url_rule(
        self, rule: str, endpoint: str, view_func: t.Callable[..., t.Any], **options: t.Any
    ) -> None:
        self.bp.add_url_rule(rule, endpoint, passes_hooks(view_func), **options)
