"""The host's own hooks in front of the exchange (``tests/hooked_app.py``, CTFd 3.8's shapes):
re-entry that looks like the caller's API client from the caller's address, hooks that add
what a host needs, redirects that say where they go, and the host's HTML refusals answered as
the binding's errors."""

from __future__ import annotations

import json
import typing as t
from urllib.parse import unquote

import pytest
from flask import redirect, request
from werkzeug.middleware.proxy_fix import ProxyFix

from flask_a2a import Entity, Reentry, Skill, TaskContext
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate
from tests.hooked_app import BANNED_ADDRESS, NoteSchema, make_hooked_app

ALICE: t.Final = {"Authorization": "Token tok-alice"}
LIST_NOTES: t.Final = {"skill": "entity.notes", "operation": "list"}


def send_data(client: A2ATestClient, data: t.Any, headers: t.Mapping[str, str]) -> t.Any:
    params = {"message": client.message(data=data, skill=data.get("skill"))}
    return client.rpc("SendMessage", params, headers=headers)


def status_text(task: dict[str, t.Any]) -> str:
    return t.cast(str, task["status"]["message"]["parts"][0]["text"])


# ------------------------------------------------------------------ 1: an API client's request


def test_reentry_is_a_json_api_client_so_a_token_api_sees_the_caller() -> None:
    hooked = make_hooked_app()
    task = send_data(A2ATestClient(hooked.app), LIST_NOTES, ALICE).result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    assert task["artifacts"][0]["parts"][0]["data"] == [{"id": "1", "text": "alice's note"}]
    sent = hooked.last_api["headers"]
    assert sent["Accept"] == "application/json"
    assert sent["Content-Type"] == "application/json"  # a GET, no body: still JSON
    assert sent["Authorization"] == "Token tok-alice"


# ------------------------------------------------------------------ 2: the caller's address


def test_reentry_comes_from_the_callers_address_with_their_session_cookie() -> None:
    hooked = make_hooked_app()
    client = A2ATestClient(hooked.app)
    client.client.get("/login?user=alice")  # the session cookie rides along
    client.client.environ_base.update(REMOTE_ADDR="127.0.0.7")
    headers = {**ALICE, "X-Forwarded-Proto": "https"}
    task = send_data(client, LIST_NOTES, headers).result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    assert ("/api/v1/notes", "127.0.0.7") in hooked.seen  # never 127.0.0.1, never none
    assert hooked.last_api["headers"]["X-Forwarded-Proto"] == "https"
    assert "session=" in hooked.last_api["headers"]["Cookie"]


def test_reentry_behind_proxy_fix_sees_the_forwarded_client() -> None:
    hooked = make_hooked_app()
    hooked.app.wsgi_app = ProxyFix(hooked.app.wsgi_app, x_for=1, x_proto=1)  # type: ignore[method-assign]
    client = A2ATestClient(hooked.app)
    client.client.environ_base.update(REMOTE_ADDR="127.0.0.1")  # the proxy
    forwarded = {**ALICE, "X-Forwarded-For": "127.0.0.9", "X-Forwarded-Proto": "https",
                 "Host": "ctf.example:8443"}  # fmt: skip
    task = send_data(client, LIST_NOTES, forwarded).result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    assert hooked.seen[-1] == ("/api/v1/notes", "127.0.0.9")
    assert hooked.last_api["scheme"] == "https"
    assert hooked.last_api["url_root"] == "https://ctf.example:8443/"


def test_the_hosts_address_ban_holds_on_reentry() -> None:
    """A banned address is refused by the host's own hook on re-entry too (it was refused
    at /a2a first, so this goes through a proxy that rewrote the address in between)."""
    hooked = make_hooked_app()
    hooked.app.wsgi_app = ProxyFix(hooked.app.wsgi_app, x_for=1)  # type: ignore[method-assign]
    client = A2ATestClient(hooked.app)
    refused = client.rpc("ListTasks", {}, headers={**ALICE, "X-Forwarded-For": BANNED_ADDRESS})
    assert refused.status == 403 and refused.error["code"] == -31403
    assert refused.error["message"] == "Forbidden: Your address is banned"


# ------------------------------------------------------------------ 3: hooks and call_app


def test_agent_and_entity_hooks_add_what_the_host_needs() -> None:
    def agent_hook(reentry: Reentry) -> None:
        reentry.headers["X-Agent"] = reentry.task.principal.owner
        reentry.environ["hooked.agent"] = "yes"

    def entity_hook(reentry: Reentry) -> None:
        reentry.headers["X-Entity"] = f"{reentry.method} {reentry.path}"
        reentry.environ["hooked.entity"] = reentry.headers["X-Agent"]  # runs after the agent's

    entity = Entity(
        "notes", schema=NoteSchema, url="/api/v1/notes", operations=("list",),
        reentry=entity_hook, title="Your notes",
    )  # fmt: skip
    hooked = make_hooked_app(entity=entity, reentry=agent_hook)
    task = send_data(A2ATestClient(hooked.app), LIST_NOTES, ALICE).result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    assert hooked.last_api["headers"]["X-Agent"] == "alice"
    assert hooked.last_api["headers"]["X-Entity"] == "GET /api/v1/notes"
    assert hooked.last_api["environ"] == {"hooked.agent": "yes", "hooked.entity": "alice"}
    card = hooked.app.test_client().get("/.well-known/agent-card.json").get_json()
    assert {s["id"]: s["name"] for s in card["skills"]}["entity.notes"] == "Your notes"


def test_call_app_reenters_as_the_caller_from_a_hand_written_skill() -> None:
    def digest(task: TaskContext) -> None:
        answer = task.call_app("GET", "/api/v1/notes", query={"q": "x"})
        limited = task.call_app("get", "/api/v1/limited")
        task.complete(f"{answer.status} {answer.json()[0]['text']}; {limited.status} {limited.ok}")

    seen: list[str] = []
    hooked = make_hooked_app(
        skills=[Skill(id="digest", name="Digest", description="d", handler=digest)],
        reentry=lambda reentry: seen.append(reentry.path),
    )
    task = (
        A2ATestClient(hooked.app)
        .rpc("SendMessage", {"message": A2ATestClient.message("go", skill="digest")}, headers=ALICE)
        .result["task"]
    )
    assert status_text(task) == "200 alice's note; 429 False"
    assert seen == ["/api/v1/notes", "/api/v1/limited"]  # the agent's hook ran for each
    assert hooked.seen[-2][1] == "127.0.0.1"  # the test client's address, carried


# ------------------------------------------------------------------ 4: a redirect says where


def test_a_redirect_names_its_target() -> None:
    # The principal hook takes the session cookie; the API, given a token it does not know
    # from a JSON request, ... is not reached: a session caller whose API session is gone.
    hooked = make_hooked_app(reentry=lambda reentry: reentry.headers.pop("Cookie", None))
    client = A2ATestClient(hooked.app)
    client.client.get("/login?user=alice")
    task = send_data(client, LIST_NOTES, {"CSRF-Token": "n-alice"}).result["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert unquote(status_text(task)) == (  # Werkzeug before 2.1 quotes the "/" in next=
        "entity request failed: status 302 → /login?next=/api/v1/notes: "
        "the app did not accept the caller's credentials"
    )


# ------------------------------------------------------------------ 5: the host's refusals


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
def test_the_hosts_csrf_refusal_is_the_bindings_error(binding: str) -> None:
    hooked = make_hooked_app()
    client = A2ATestClient(hooked.app, binding=binding)
    client.client.get("/login?user=alice")  # a session, no CSRF token: the host refuses
    refused = client.rpc("SendMessage", {"message": client.message("hi")})
    assert refused.status == 403
    assert refused.response.mimetype in ("application/json", "application/a2a+json")
    if binding == "jsonrpc":
        assert refused.json["id"] is None
        assert refused.error["code"] == -31403
        assert refused.error["message"] == "Forbidden: The CSRF token is missing or wrong"
        assert refused.error["data"][0]["reason"] == "FORBIDDEN"
    else:
        error = refused.response.get_json()["error"]
        assert (error["code"], error["status"]) == (403, "PERMISSION_DENIED")
        assert error["message"] == "Forbidden: The CSRF token is missing or wrong"
    assert client.rpc("ListTasks", {}, headers=ALICE).result["tasks"] == []  # nothing stored


def test_a_banned_user_and_a_bad_token_get_the_hosts_words_as_json_rpc() -> None:
    client = A2ATestClient(make_hooked_app().app)
    banned = client.rpc("ListTasks", {}, headers={"Authorization": "Token tok-mallory"})
    assert (banned.status, banned.error["code"]) == (403, -31403)
    assert banned.error["message"] == "Forbidden: You have been banned"
    bad = client.rpc("ListTasks", {}, headers={"Authorization": "Token nope"})
    assert (bad.status, bad.error["code"]) == (401, -31401)
    assert bad.error["message"] == "Unauthorized: Your token is not valid"


def test_a_page_returned_by_a_hook_is_answered_with_its_heading() -> None:
    hooked = make_hooked_app()

    @hooked.app.before_request
    def maintenance() -> t.Any:
        if hooked.app.config.get("PAUSED"):
            return "<html><title>CTF</title><h1>Paused</h1><p>Back at noon.</p></html>", 503

    hooked.app.config["PAUSED"] = True
    client = A2ATestClient(hooked.app)
    paused = client.rpc("ListTasks", {}, headers=ALICE)
    assert paused.error["code"] == -32603
    assert paused.error["message"] == "Paused: Back at noon."
    card = hooked.app.test_client().get("/.well-known/agent-card.json")
    assert (
        card.status_code == 500 and card.get_json()["error"]["message"] == "Paused: Back at noon."
    )
    page = hooked.app.test_client().get("/api/v1/notes")  # the app's own pages stay its own
    assert page.status_code == 503 and page.mimetype == "text/html"


def test_the_hosts_pages_elsewhere_are_untouched() -> None:
    client = A2ATestClient(make_hooked_app().app)
    missing = client.client.get("/no/such/page")
    assert missing.status_code == 404 and b"<h1>Not Found</h1>" in missing.data


def test_endpoints_lets_a_home_made_csrf_check_skip_the_exchange() -> None:
    hooked = make_hooked_app(csrf_exempt=lambda a2a: a2a.endpoints())
    client = A2ATestClient(hooked.app)
    client.client.get("/login?user=alice")  # a browser session, as the console has
    sent = client.rpc("SendMessage", {"message": client.message("hi", skill="echo")})
    assert sent.result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert {"a2a.exchange", "a2a.rest", "a2a.agent_card"} <= set(hooked.a2a.endpoints())


# ------------------------------------------------------------------ 8: smaller frictions


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
def test_a_stream_whose_caller_is_banned_ends_with_an_error_event(binding: str) -> None:
    gate = Gate()
    hooked = make_hooked_app(
        skills=[Skill(id="gate", name="Gate", description="g", handler=gate.handler)],
        config={"A2A_KEEPALIVE_INTERVAL": 0.05},
    )
    client = A2ATestClient(hooked.app, binding=binding)
    params = {"message": client.message("hold", skill="gate")}
    response = client.call("SendStreamingMessage", params, headers=ALICE, buffered=False)
    frames = (c.decode() if isinstance(c, bytes) else c for c in response.response)
    first = next(f for f in frames if f.startswith("data: "))
    assert client.event(json.loads(first[6:]))["result"]["task"]["id"]
    hooked.banned.add("alice")
    rest = [f for f in frames if f.startswith("data: ")]
    gate.release.set()
    last = json.loads(rest[-1][6:])  # the refusal, then the stream closes
    assert all("error" not in json.loads(f[6:]) for f in rest[:-1])
    if binding == "jsonrpc":
        assert last["id"] is not None and last["error"]["code"] == -31401
        assert last["error"]["message"].startswith("Authentication required: the caller no")
    else:
        assert (last["error"]["code"], last["error"]["status"]) == (401, "UNAUTHENTICATED")


def test_the_cards_default_name_is_the_apps() -> None:
    hooked = make_hooked_app()
    card = hooked.app.test_client().get("/.well-known/agent-card.json").get_json()
    assert card["name"] == hooked.app.name == "tests.hooked_app"


def test_the_client_hears_the_hosts_words() -> None:
    """Over a real socket: a refusal on the exchange is the binding's error, raised as its
    class; a page the client still meets elsewhere is quoted by its heading."""
    from flask_a2a import A2AClient, A2AClientError, ForbiddenError
    from tests.live_server import werkzeug_server

    hooked = make_hooked_app()
    with werkzeug_server(hooked.app) as url:
        with pytest.raises(ForbiddenError) as refused:
            A2AClient(url + "/a2a").list_tasks()  # no token: the host's CSRF check
        assert str(refused.value) == "Forbidden: The CSRF token is missing or wrong"
        with pytest.raises(A2AClientError) as page:
            A2AClient(
                url + "/api/v1/limited", headers={"Authorization": "Token tok-bob"}
            ).list_tasks()
    assert str(page.value) == (  # a GET route: the app's own 405 page
        "HTTP 405: the answer is not JSON-RPC: Method Not Allowed: The method is not allowed "
        "for the requested URL."
    )


def test_a_hooks_redirect_on_the_exchange_is_refused_naming_where_it_pointed() -> None:
    hooked = make_hooked_app()

    @hooked.app.before_request
    def change_password() -> t.Any:  # CTFd's: a user who must change their password
        if request.headers.get("Authorization") == "Token tok-bob":
            return redirect("/reset_password/abc")
        return None

    client = A2ATestClient(hooked.app)
    refused = client.rpc("ListTasks", {}, headers={"Authorization": "Token tok-bob"})
    assert (refused.status, refused.code) == (401, -31401)
    assert refused.error["message"] == "Found: the app redirected it to /reset_password/abc"
    card = hooked.app.test_client().get(
        "/.well-known/agent-card.json", headers={"Authorization": "Token tok-bob"}
    )
    assert card.status_code == 302  # a page's GET may be redirected: it stays as it is


def test_an_error_page_is_read_by_its_headings_not_its_frame() -> None:
    from flask_a2a.protocol.pages import page_text

    ctfd_like = (
        b"<html><head><title>CTFd</title><link rel=stylesheet href=x></head><body><nav><a>Users"
        b"</a></nav><main><div class='jumbotron'><h1>Forbidden</h1><hr><h2>You have been banned"
        b"</h2></div></main><footer><small>Powered by CTFd</small></footer></body></html>"
    )
    assert page_text(ctfd_like, "text/html") == "Forbidden: You have been banned"
    assert page_text(b"<h1><b>403</b> Forbidden</h1><p>Go <i>away</i>.</p>", "text/html") == (
        "403 Forbidden: Go away."
    )
