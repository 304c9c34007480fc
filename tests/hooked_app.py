"""An app whose own ``before_request`` hooks are a legacy app's, shaped like CTFd 3.8's.

- Its API reads ``Authorization: Token <t>`` only from JSON requests (``request.is_json``),
  else the session's user; an anonymous API call is redirected to ``/login?next=…``.
- It tracks each request's client address and fails (500) on a request without one, as
  CTFd's ``get_ip()`` does; addresses that it has banned get its HTML 403.
- It checks CSRF by hand: a state-changing request without an ``Authorization`` header needs
  the session's nonce, unless its endpoint is one of ``csrf_exempt``.
- A banned user and an unknown token are refused with its HTML error pages (403, 401).
- Every error page is HTML, with the site's navigation in front of the message.

The principal hook is CTFd's shape too: the API's user, refused when banned.
"""

from __future__ import annotations

import dataclasses
import typing as t

from flask import Flask, abort, jsonify, redirect, request, session, url_for
from marshmallow import Schema, fields
from werkzeug.exceptions import HTTPException

from flask_a2a import A2A, Entity, Principal, Skill, TaskContext

TOKENS: t.Final = {"tok-alice": "alice", "tok-bob": "bob", "tok-mallory": "mallory"}
#: Users banned when the app starts (``Hooked.banned`` may ban more meanwhile).
BANNED_USERS: t.Final = frozenset({"mallory"})
#: An address the app has banned (a loopback one: tests use nothing else).
BANNED_ADDRESS: t.Final = "127.0.0.66"


class NoteSchema(Schema):
    id = fields.Str()
    text = fields.Str()


@dataclasses.dataclass
class Hooked:
    app: Flask
    a2a: A2A
    #: (path, client address) of every request the app saw, re-entries included.
    seen: list[tuple[str, str]]
    #: The headers and environ keys the last re-entered API call carried.
    last_api: dict[str, t.Any]
    #: The banned users (the ban hook and the principal hook read it at each request).
    banned: set[str]


def api_user() -> str | None:
    """The caller as the app's API sees it: a token from a JSON request, else the session."""
    auth = request.headers.get("Authorization", "")
    if request.is_json and auth.startswith("Token "):
        user = TOKENS.get(auth[len("Token ") :])
        if user is None:
            abort(401, "Your token is not valid")
        return user
    found = session.get("user")
    return found if isinstance(found, str) else None


def page(exc: HTTPException) -> tuple[str, int]:
    html = (
        "<!doctype html><html><head><title>Hooked CTF</title><script>var x = 1;</script>"
        "</head><body><nav><a href='/'>Users</a> <a href='/'>Scoreboard</a></nav>"
        f"<div class='jumbotron'><h1>{exc.name}</h1></div>"
        f"<div class='container'><p>{exc.description}</p></div></body></html>"
    )
    return html, exc.code or 500


def make_hooked_app(
    *,
    csrf_exempt: t.Callable[[A2A], t.Iterable[str]] = lambda a2a: (),
    skills: t.Sequence[Skill] = (),
    entity: Entity | None = None,
    config: t.Mapping[str, t.Any] | None = None,
    **a2a_options: t.Any,
) -> Hooked:
    app = Flask(__name__)
    app.config.update(SECRET_KEY="hooked", TESTING=True, A2A_TASK_TIMEOUT=20, **(config or {}))
    seen: list[tuple[str, str]] = []
    last_api: dict[str, t.Any] = {}
    exempt: set[str] = set()
    banned = set(BANNED_USERS)

    @app.before_request
    def track_ip() -> None:
        address = request.environ.get("REMOTE_ADDR")
        if not address:  # CTFd's get_ip(): ip_address(None)
            raise TypeError("the request has no client address")
        seen.append((request.path, request.remote_addr or ""))
        if request.remote_addr == BANNED_ADDRESS:
            abort(403, "Your address is banned")

    @app.before_request
    def csrf() -> None:
        if request.method not in ("POST", "PUT", "PATCH", "DELETE"):
            return
        if request.headers.get("Authorization") or request.endpoint in exempt:
            return
        nonce = session.get("nonce")
        if nonce is None or request.headers.get("CSRF-Token") != nonce:
            abort(403, "The CSRF token is missing or wrong")

    @app.before_request
    def bans() -> None:
        if api_user() in banned:
            abort(403, "You have been banned")

    for status in (401, 403, 404, 405, 429):
        app.register_error_handler(status, page)

    @app.get("/login")
    def login() -> t.Any:
        session["user"] = request.args.get("user", "alice")
        session["nonce"] = "n-" + session["user"]
        return "signed in"

    @app.get("/api/v1/notes")
    def notes() -> t.Any:
        user = api_user()
        if user is None:
            return redirect(url_for("login", next=request.full_path.rstrip("?")))
        last_api.clear()
        last_api.update(
            headers=dict(request.headers),
            remote_addr=request.remote_addr,
            scheme=request.scheme,
            host=request.host,
            url_root=request.url_root,
            environ={k: v for k, v in request.environ.items() if k.startswith("hooked.")},
        )
        return jsonify([{"id": "1", "text": f"{user}'s note"}])

    @app.get("/api/v1/limited")
    def limited() -> t.Any:
        abort(429, "Slow down")

    def principal() -> Principal | None:
        """The gate for account state: a banned user resolves to no owner (streams re-check
        it at each keep-alive, where the app's own ``before_request`` hooks do not run)."""
        user = api_user()
        return Principal(owner=user) if user is not None and user not in banned else None

    def echo(task: TaskContext) -> None:
        task.complete(task.message.text or "")

    a2a = A2A(
        app,
        skills=[*skills, Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
        entities=[
            entity or Entity("notes", schema=NoteSchema, url="/api/v1/notes", operations=("list",))
        ],  # fmt: skip
        principal=principal,
        **a2a_options,
    )
    exempt.update(csrf_exempt(a2a))
    return Hooked(app, a2a, seen, last_api, banned)
