"""Flask-WTF's CSRFProtect on the host app: the exchange is exempted, nothing else is.

The exchange is no form endpoint: its Origin gate and its JSON content type are its CSRF
defence. A legacy app with a cookie session and ``CSRFProtect`` registered before or after A2A
still reaches the exchange from its own pages, a cross-origin browser POST carrying the cookie
is still refused, and the app's own forms are still checked.
"""

from __future__ import annotations

import typing as t

import pytest
from flask import Flask, request, session
from flask_wtf.csrf import CSRFProtect, generate_csrf

from flask_a2a import A2A, Principal, Skill
from flask_a2a.exchange.runner import ThreadRunner
from flask_a2a.store import MemoryStore
from flask_a2a.testing import A2ATestClient, RPCResponse

from .conftest import echo

ORDERS = ("csrf-first", "a2a-first")


def session_principal() -> Principal | None:
    """The legacy app's auth: a plain Flask session cookie."""
    user = session.get("user")
    return Principal(owner=user) if user else None


@pytest.fixture
def make_legacy_app() -> t.Iterator[t.Callable[[str], Flask]]:
    built: list[A2A] = []

    def build(order: str) -> Flask:
        app = Flask("legacy_app")
        app.config.update(SECRET_KEY="test-secret", TESTING=True)

        @app.get("/login")
        def login() -> str:
            session["user"] = request.args["user"]
            return "ok"

        @app.get("/token")
        def token() -> str:
            return generate_csrf()

        @app.post("/profile")
        def profile() -> str:
            return "saved " + request.form.get("name", "")

        a2a = A2A(
            store=MemoryStore(),
            runner=ThreadRunner(4),
            principal=session_principal,
            skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
        )
        if order == "csrf-first":
            CSRFProtect(app)
            a2a.init_app(app)
        else:
            a2a.init_app(app)
            CSRFProtect(app)
        built.append(a2a)
        return app

    yield build
    for a2a in built:
        a2a.shutdown(timeout=5)


def logged_in(app: Flask, user: str = "alice") -> A2ATestClient:
    client = A2ATestClient(app)  # no bearer token: the session cookie is the only credential
    assert client.client.get(f"/login?user={user}").status_code == 200
    return client


@pytest.mark.parametrize("order", ORDERS)
def test_same_origin_json_rpc_with_the_session_cookie_completes(
    make_legacy_app: t.Callable[[str], Flask], order: str
) -> None:
    client = logged_in(make_legacy_app(order))
    params = {"message": A2ATestClient.message("hello", skill="echo")}
    reply = client.rpc("SendMessage", params, headers={"Origin": "http://localhost"})
    assert reply.status == 200
    task = reply.result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "hello"}]
    # A native client sends no Origin at all: the same.
    assert client.send("again", skill="echo")["task"]["status"]["state"] == ("TASK_STATE_COMPLETED")


@pytest.mark.parametrize("order", ORDERS)
def test_cross_origin_browser_post_with_the_cookie_is_still_refused(
    make_legacy_app: t.Callable[[str], Flask], order: str
) -> None:
    app = make_legacy_app(order)
    client = logged_in(app)
    params = {"message": A2ATestClient.message("steal", skill="echo")}
    reply = client.rpc("SendMessage", params, headers={"Origin": "http://evil.example"})
    assert reply.status == 403 and reply.code == -31403
    assert client.rpc("ListTasks", {}).result["tasks"] == []  # nothing was written


@pytest.mark.parametrize("order", ORDERS)
def test_the_apps_own_forms_are_still_checked(
    make_legacy_app: t.Callable[[str], Flask], order: str
) -> None:
    app = make_legacy_app(order)
    browser = logged_in(app).client
    refused = browser.post("/profile", data={"name": "mallory"})
    assert refused.status_code == 400
    assert b"CSRF" in refused.data
    token = browser.get("/token").get_data(as_text=True)
    saved = browser.post("/profile", data={"name": "alice", "csrf_token": token})
    assert saved.status_code == 200 and saved.data == b"saved alice"


@pytest.mark.parametrize("order", ORDERS)
def test_only_the_exchange_views_are_exempt(
    make_legacy_app: t.Callable[[str], Flask], order: str
) -> None:
    app = make_legacy_app(order)
    logged_in(app)  # one request: the lazy hook has run
    csrf = app.extensions["csrf"]
    assert csrf._exempt_views == {"flask_a2a.views.exchange_view", "flask_a2a.views.rest_view"}
    assert csrf._exempt_blueprints == set()


def test_a2a_without_csrfprotect_registers_nothing_of_it() -> None:
    app = Flask("plain")
    a2a = A2A(
        app,
        principal=session_principal,
        store=MemoryStore(),
        runner=ThreadRunner(2),
        skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
    )
    try:
        assert "csrf" not in app.extensions
        reply = A2ATestClient(app).rpc("ListTasks", {})
        assert reply.status == 401 and reply.code == -31401
    finally:
        a2a.shutdown(timeout=5)


# ---------------------------------------------------------------------- A2ATestClient


def test_a_non_json_answer_names_its_status_and_body() -> None:
    app = Flask("html_in_front")

    @app.before_request
    def refuse() -> t.Any:
        return "<html><body><h1>Bad Request</h1>The CSRF token is missing.</body></html>", 400

    a2a = A2A(
        app,
        principal=session_principal,
        store=MemoryStore(),
        runner=ThreadRunner(2),
        skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
    )
    try:
        # On the exchange's endpoint the host's page is answered as the binding's error ...
        refused = A2ATestClient(app).rpc("ListTasks", {})
        assert (refused.status, refused.code) == (400, -31400)
        assert refused.error["message"] == "Bad Request: The CSRF token is missing."
        # ... and the test client still reads a page met anywhere else, saying what it is.
        reply = A2ATestClient(app, path="/elsewhere").rpc("ListTasks", {})
        assert reply.status == 400  # constructing the answer does not crash
        assert "CSRF token is missing" in reply.text
        for read in (lambda r: r.json, lambda r: r.result, lambda r: r.error, lambda r: r.code):
            with pytest.raises(AssertionError) as failed:
                read(reply)
            message = str(failed.value)
            assert "HTTP 400" in message and "not JSON" in message
            assert "text/html" in message
            assert "The CSRF token is missing." in message
    finally:
        a2a.shutdown(timeout=5)


def test_json_and_empty_answers_read_as_before() -> None:
    app = Flask("json_answers")
    app.add_url_rule("/json", "json", lambda: {"jsonrpc": "2.0", "id": 1, "result": {"ok": 1}})
    app.add_url_rule("/empty", "empty", lambda: ("", 204))
    reply = RPCResponse(app.test_client().get("/json"))
    assert reply.json == {"jsonrpc": "2.0", "id": 1, "result": {"ok": 1}}
    assert reply.result == {"ok": 1}
    assert RPCResponse(app.test_client().get("/empty")).json is None
