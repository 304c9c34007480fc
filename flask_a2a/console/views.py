"""The console's routes: the page, its static files, and three small JSON reads for it.

The page is static (HTML, CSS, plain JavaScript from this package, nothing fetched from
elsewhere) and calls the app's own exchange from the browser, so every task it shows is the
caller's, as the exchange decides. The JSON reads below are what the exchange has no method
for: who the caller is and which entity tools (with their input schemas) they may use, the
server's own check of the card's signature, and the operators' figures (admins only).
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import logging
import typing as t

from flask import Blueprint, Flask, Response, current_app, request, url_for
from markupsafe import escape

from ..bindings.checks import check_origin
from ..bindings.rest import status_of
from ..card.document import AGENT_CARD_PATH, skill_entry
from ..exchange.calls import HTTPRequest
from ..host_refusals import answer_host_refusals
from ..protocol.errors import A2AError, ForbiddenOriginError
from ..protocol.scrub import scrub
from .figures import figures

if t.TYPE_CHECKING:
    from ..protocol.model import Principal
    from ..state import A2AState

log = logging.getLogger("flask_a2a")

#: ``admin(principal) -> bool``: may this caller see the operators panel?
AdminCheck = t.Callable[["Principal"], bool]

#: The page runs only its own files: no inline script or style, no other origin, no framing.
PAGE_CSP: t.Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data: blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
#: The JSON reads and static files: nothing to run, nothing to frame.
DATA_CSP: t.Final = "default-src 'none'; frame-ancestors 'none'"

BLUEPRINT: t.Final = "a2a_console"


def blueprint(path: str, admin: AdminCheck | None) -> Blueprint:
    """The console's routes under ``path`` (``A2A_CONSOLE_PATH``)."""
    base = path.rstrip("/")
    bp = Blueprint(BLUEPRINT, __name__, static_folder="static", static_url_path=base + "/static")
    bp.add_url_rule(base, "page", _page, methods=["GET"])
    bp.add_url_rule(base + "/", "page_slash", _page, methods=["GET"])

    # Plain functions, not partials: hosts' hooks (Flask-WTF's CSRFProtect) read a view's name.
    def session() -> Response:
        return _session(admin)

    def operators() -> Response:
        return _operators(admin)

    bp.add_url_rule(base + "/api/session", "session", session)
    bp.add_url_rule(base + "/api/card-signature", "card_signature", _card_signature)
    bp.add_url_rule(base + "/api/operators", "operators", operators)
    # The host's refusals (its CSRF, ban or login hooks' HTML pages) as the reads' JSON.
    answer_host_refusals(bp, lambda: lambda error: _refused(status_of(error)[0], error.message))
    bp.after_request(_security_headers)
    return bp


def register(app: Flask, path: str, admin: AdminCheck | None = None) -> None:
    """Serve the console at ``path`` on ``app`` (called by ``A2A.init_app``)."""
    app.register_blueprint(blueprint(path, admin))


def _state() -> A2AState:
    return t.cast("A2AState", current_app.extensions["a2a"])


@functools.cache
def _template() -> str:
    return (importlib.resources.files(__package__) / "static" / "index.html").read_text("utf-8")


def _json(body: t.Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status, mimetype="application/json")


def _refused(status: int, message: str) -> Response:
    return _json({"error": message}, status)


def _resolve() -> Principal | A2AError | None:
    """The caller, or the exchange's refusal of them (a tenant it cannot take: -32602 there,
    a 400 naming the rule here, never a 500)."""
    try:
        return _state().resolve_principal()
    except A2AError as exc:
        return exc


def _page() -> Response:
    state = _state()
    settings = state.settings
    if settings.console_principal == "required":
        found = _resolve()
        if isinstance(found, A2AError):
            return Response(
                f"<!doctype html><title>A2A console</title><p>{escape(found.message)}</p>",
                400,
                mimetype="text/html",
            )
        if found is None:
            return Response(
                "<!doctype html><title>A2A console</title><p>Sign in to this application to "
                "use the A2A console.</p>",
                401,
                mimetype="text/html",
            )
    root = request.script_root
    values = {
        "A2A_PATH": root + settings.path,
        "CONSOLE_PATH": root + (settings.console_path or "").rstrip("/"),
        "CARD_PATH": root + AGENT_CARD_PATH,
        "JWKS_PATH": root + settings.jwks_path if state.cards.signing_keys else "",
        "PRINCIPAL": settings.console_principal,
        "CSS": url_for(f"{BLUEPRINT}.static", filename="console.css"),
        "JS": url_for(f"{BLUEPRINT}.static", filename="console.js"),
    }
    page = _template()
    for key, value in values.items():
        page = page.replace("{{" + key + "}}", str(escape(value)))
    return Response(page, 200, mimetype="text/html")


def _same_origin() -> bool:
    """The exchange's Origin gate, for the JSON reads: a page of another origin that sends the
    caller's cookie is refused (a same-origin GET carries no Origin at all)."""
    http = HTTPRequest(
        request.method, request.headers, request.host, None, lambda n: b"", lambda: None
    )
    try:
        check_origin(http, _state().settings)
    except ForbiddenOriginError:
        return False
    return True


def _caller() -> tuple[Principal | None, Response | None]:
    if not _same_origin():
        return None, _refused(403, "cross-origin request refused")
    principal = _resolve()
    if isinstance(principal, A2AError):
        return None, _refused(400, principal.message)
    if principal is None:
        return None, _refused(401, "no owner: sign in, or paste a bearer token")
    return principal, None


def is_admin(principal: Principal, admin: AdminCheck | None) -> bool:
    """Listed in ``A2A_CONSOLE_ADMIN``, or let in by the host's ``console_admin`` check (one
    that raises refuses, logged)."""
    if principal.owner in _state().settings.console_admin:
        return True
    if admin is None:
        return False
    try:
        return bool(admin(principal))
    except Exception as exc:
        log.warning("a2a: console admin check failed: %s", scrub(repr(exc)))
        return False


def _tools(principal: Principal) -> dict[str, dict[str, t.Any]]:
    """Entity skill id -> operation -> the tool's input schema, for what the caller may use."""
    state = _state()
    registry = state.entities
    out: dict[str, dict[str, t.Any]] = {}
    if registry is None or state.settings.disable_entity_skills:
        return out
    for tool in registry.tools.values():
        if registry.allowed(principal, tool.entity, tool.operation):
            out.setdefault(tool.entity.skill_id, {})[tool.operation] = tool.input_schema
    return out


def _session(admin: AdminCheck | None) -> Response:
    principal, refused = _caller()
    if principal is None:
        return t.cast(Response, refused)
    tools = _tools(principal)
    registry = _state().entities
    entity_ids = set(registry.entities) if registry is not None else set()
    skills = [
        skill_entry(skill)
        for skill in _state().exchange.skills.values()
        if skill.id not in entity_ids or skill.id in tools
    ]
    return _json(
        {
            "owner": principal.owner,
            "name": _owner_name(principal.owner),
            "tenant": principal.tenant,
            "scopes": None if principal.scopes is None else sorted(principal.scopes),
            "admin": is_admin(principal, admin),
            "skills": skills,
            "tools": tools,
        }
    )


def _owner_name(owner: str) -> str | None:
    """The host's name for ``owner`` (``A2A(owner_name=...)``); one that raises names
    nobody, logged."""
    hook = _state().owner_name
    if hook is None:
        return None
    try:
        name = hook(owner)
    except Exception as exc:
        log.warning("a2a: owner_name failed: %s", scrub(repr(exc)))
        return None
    return str(name) if name not in (None, "") else None


def _card_signature() -> Response:
    """The server's check of the card it serves against the JWKS it serves (for a page where
    the browser cannot check it itself: WebCrypto needs a secure context)."""
    state = _state()
    if not _same_origin():
        return _refused(403, "cross-origin request refused")
    if state.settings.console_principal == "required":
        found = _resolve()
        if isinstance(found, A2AError):
            return _refused(400, found.message)
        if found is None:
            return _refused(401, "no owner")
    cards = state.cards
    if not cards.signing_keys:
        return _json({"signed": False, "verified": False})
    from ..card.signing import CardSignatureError, verify_card

    try:
        kid = verify_card(cards.render(), cards.jwks())
    except CardSignatureError as exc:
        return _json({"signed": True, "verified": False, "reason": str(exc)})
    return _json({"signed": True, "verified": True, "kid": kid})


def _operators(admin: AdminCheck | None) -> Response:
    principal, refused = _caller()
    if principal is None:
        return t.cast(Response, refused)
    if not is_admin(principal, admin):
        return _refused(403, "the operators panel is for admins (A2A_CONSOLE_ADMIN)")
    return _json(figures(_state().exchange))


def _security_headers(response: Response) -> Response:
    page = request.endpoint in (f"{BLUEPRINT}.page", f"{BLUEPRINT}.page_slash")
    response.headers["Content-Security-Policy"] = PAGE_CSP if page else DATA_CSP
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cross-Origin-Opener-Policy"] = "same-origin"
    response.headers["Cross-Origin-Resource-Policy"] = "same-origin"
    if request.endpoint != f"{BLUEPRINT}.static":
        response.headers["Cache-Control"] = "no-store"
    return response
