"""The console's server side over the test client: who gets the page and its JSON reads,
its security headers, the entity tools it seeds forms from, the operators' figures, and the
server's own check of the card signature. tests/console/test_console_browser.py drives the page."""

from __future__ import annotations

import importlib.resources
import json
import typing as t

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from flask import Flask, request
from markupsafe import escape
from marshmallow import Schema, fields

from flask_a2a import A2A, ConfigError, Entity, Principal, Skill
from flask_a2a.card.signing import SigningKey
from tests.conftest import echo, token_principal

CONSOLE = "/a2a/console"


class NoteSchema(Schema):
    id = fields.Integer(dump_only=True)
    title = fields.String(required=True)
    pinned = fields.Boolean()


def build(config: t.Mapping[str, t.Any] | None = None, **options: t.Any) -> Flask:
    app = Flask(__name__)
    app.config.update({"A2A_CONSOLE_PATH": CONSOLE, **(config or {})})
    A2A(
        app,
        skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
        principal=token_principal,
        **options,
    )
    return app


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_off_unless_a_path_is_set() -> None:
    app = build({"A2A_CONSOLE_PATH": None})
    client = app.test_client()
    assert client.get(CONSOLE, headers=bearer("alice")).status_code == 404
    assert client.get(CONSOLE + "/api/session", headers=bearer("alice")).status_code == 404


def test_the_page_is_refused_to_a_request_with_no_owner_by_default() -> None:
    client = build().test_client()
    refused = client.get(CONSOLE)
    assert refused.status_code == 401
    assert "Sign in" in refused.get_data(as_text=True)
    page = client.get(CONSOLE, headers=bearer("alice"))
    assert page.status_code == 200
    assert client.get(CONSOLE + "/", headers=bearer("alice")).status_code == 200


def test_not_served_in_the_agent_role() -> None:
    client = build({"A2A_ROLE": "agent"}).test_client()
    assert client.get(CONSOLE, headers=bearer("alice")).status_code == 404
    assert client.get(CONSOLE + "/api/session", headers=bearer("alice")).status_code == 404


def test_optional_principal_serves_the_page_but_not_the_callers_data() -> None:
    client = build({"A2A_CONSOLE_PRINCIPAL": "optional"}).test_client()
    assert client.get(CONSOLE).status_code == 200
    assert client.get(CONSOLE + "/api/session").status_code == 401
    assert client.get(CONSOLE + "/api/operators").status_code == 401


def test_the_page_runs_only_its_own_files() -> None:
    client = build().test_client()
    page = client.get(CONSOLE, headers=bearer("alice"))
    html = page.get_data(as_text=True)
    csp = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert page.headers["Cache-Control"] == "no-store"
    assert "<script>" not in html and "style=" not in html  # nothing inline
    assert "http://" not in html and "https://" not in html  # nothing from elsewhere
    assert 'data-a2a-path="/a2a"' in html
    with client.get(CONSOLE + "/static/console.js") as script:
        assert script.status_code == 200 and "javascript" in (script.mimetype or "")
        assert script.headers["X-Content-Type-Options"] == "nosniff"
    with client.get(CONSOLE + "/static/console.css") as style:
        assert style.status_code == 200


def test_every_static_file_ships_in_the_package() -> None:
    static = importlib.resources.files("flask_a2a.console") / "static"
    names = {entry.name for entry in static.iterdir()}
    assert {"index.html", "console.css", "console.js", "rpc.js", "card.js"} <= names
    for entry in static.iterdir():
        if entry.name.endswith(".js"):
            text = entry.read_text("utf-8")
            assert "http://" not in text and "https://" not in text, entry.name
            assert "innerHTML" not in text and "eval(" not in text, entry.name


def test_a_tenant_the_exchange_refuses_is_a_400_naming_the_rule() -> None:
    """With several agents the default one refuses a tenant starting with ``@`` (the host took
    it from a header): the console says why (it was a 500), as the exchange does (-32602)."""
    app = Flask(__name__)
    app.config.update({"A2A_CONSOLE_PATH": CONSOLE, "A2A_CONSOLE_PRINCIPAL": "required"})

    def in_tenant() -> Principal | None:
        found = token_principal()
        tenant = request.headers.get("X-Tenant")
        return None if found is None else Principal(found.owner, tenant=tenant)

    echo_skill = Skill(id="echo", name="Echo", description="Echo.", handler=echo)
    A2A(app, skills=[echo_skill], principal=in_tenant)
    A2A(app, name="billing", url_prefix="/billing", skills=[echo_skill], principal=in_tenant)
    client = app.test_client()
    forged = {**bearer("alice"), "X-Tenant": "@billing"}
    rule = "must not start with '@' while several agents share the store"
    for path in ("/api/session", "/api/operators", "/api/card-signature"):
        refused = client.get(CONSOLE + path, headers=forged)
        assert refused.status_code == 400 and rule in refused.get_json()["error"], path
    page = client.get(CONSOLE, headers=forged)
    assert page.status_code == 400 and str(escape(rule)) in page.get_data(as_text=True)
    assert client.get(CONSOLE + "/api/session", headers=bearer("alice")).status_code == 200


def test_the_session_names_the_caller_and_the_skills() -> None:
    client = build().test_client()
    session = client.get(CONSOLE + "/api/session", headers=bearer("alice-read")).get_json()
    assert session["owner"] == "alice"
    assert session["scopes"] == ["tasks:read"]
    assert session["admin"] is False
    assert [s["id"] for s in session["skills"]] == ["echo"]
    assert session["tools"] == {}


def test_entity_tools_follow_the_gate() -> None:
    def gate(principal: Principal | None, entity: Entity, operation: str) -> bool:
        return principal is not None and (principal.owner == "alice" or operation == "get")

    entities = [Entity("notes", schema=NoteSchema(), operations=("list", "get", "create"))]
    client = build(entities=entities, entity_gate=gate).test_client()
    alice = client.get(CONSOLE + "/api/session", headers=bearer("alice")).get_json()
    assert sorted(alice["tools"]["entity.notes"]) == ["create", "get", "list"]
    create = alice["tools"]["entity.notes"]["create"]
    assert create["properties"]["title"]["type"] == "string"
    assert "title" in create["required"]
    assert "entity.notes" in [s["id"] for s in alice["skills"]]
    bob = client.get(CONSOLE + "/api/session", headers=bearer("bob")).get_json()
    assert list(bob["tools"]["entity.notes"]) == ["get"]


def test_an_entity_skill_nobody_may_use_is_not_offered() -> None:
    entities = [Entity("notes", schema=NoteSchema())]
    client = build(entities=entities, entity_gate=lambda p, e, o: False).test_client()
    session = client.get(CONSOLE + "/api/session", headers=bearer("alice")).get_json()
    assert session["tools"] == {}
    assert [s["id"] for s in session["skills"]] == ["echo"]


def test_the_operators_panel_is_for_admins_only() -> None:
    client = build({"A2A_CONSOLE_ADMIN": "alice"}).test_client()
    assert client.get(CONSOLE + "/api/operators", headers=bearer("bob")).status_code == 403
    answer = client.get(CONSOLE + "/api/operators", headers=bearer("alice"))
    assert answer.status_code == 200
    figures = answer.get_json()
    assert figures["runs"]["live"] == 0
    assert figures["streams"]["seatsInUse"] == 0
    assert figures["health"] == {"store": "ok"}
    assert figures["push"] == {"inFlight": 0, "waiting": 0}
    assert client.get(CONSOLE + "/api/session", headers=bearer("alice")).get_json()["admin"]


def test_a_host_check_decides_admins_and_one_that_raises_refuses() -> None:
    def admin(principal: Principal) -> bool:
        if principal.owner == "bob":
            raise RuntimeError("directory down")
        return principal.scopes is None

    client = build(console_admin=admin).test_client()
    assert client.get(CONSOLE + "/api/operators", headers=bearer("alice")).status_code == 200
    assert client.get(CONSOLE + "/api/operators", headers=bearer("alice-read")).status_code == 403
    assert client.get(CONSOLE + "/api/operators", headers=bearer("bob")).status_code == 403


def test_figures_count_live_runs_and_their_counters() -> None:
    client = build({"A2A_CONSOLE_ADMIN": ["alice"]}).test_client()
    before = client.get(CONSOLE + "/api/operators", headers=bearer("alice")).get_json()
    sent = client.post(
        "/a2a",
        headers=bearer("alice"),
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
            },
        },
    )
    assert sent.get_json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    after = client.get(CONSOLE + "/api/operators", headers=bearer("alice")).get_json()
    assert after["runs"]["live"] == 0
    if before["metrics"] is not None:  # prometheus_client installed (requirements-dev.txt)
        assert after["metrics"]["runsStarted"] == before["metrics"]["runsStarted"] + 1


def test_a_cross_origin_read_is_refused() -> None:
    client = build({"A2A_CONSOLE_ADMIN": ["alice"]}).test_client()
    for path in ("/api/session", "/api/operators", "/api/card-signature"):
        answer = client.get(
            CONSOLE + path, headers={**bearer("alice"), "Origin": "http://evil.example"}
        )
        assert answer.status_code == 403, path
        assert "Access-Control-Allow-Origin" not in answer.headers
    same = client.get(
        CONSOLE + "/api/session", headers={**bearer("alice"), "Origin": "http://localhost"}
    )
    assert same.status_code == 200


def test_the_server_checks_the_card_signature() -> None:
    key = SigningKey("k1", ec.generate_private_key(ec.SECP256R1()))
    app = build({"A2A_PUBLIC_BASE_URL": "http://agent.test"}, signing_keys=[key])
    client = app.test_client()
    found = client.get(CONSOLE + "/api/card-signature", headers=bearer("alice")).get_json()
    assert found == {"signed": True, "verified": True, "kid": "k1"}
    assert client.get(CONSOLE + "/api/card-signature").status_code == 401
    html = client.get(CONSOLE, headers=bearer("alice")).get_data(as_text=True)
    assert 'data-jwks-path="/.well-known/jwks.json"' in html
    unsigned = build().test_client()
    assert unsigned.get(CONSOLE + "/api/card-signature", headers=bearer("alice")).get_json() == {
        "signed": False,
        "verified": False,
    }


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"A2A_CONSOLE_PATH": "console"}, "must start with '/'"),
        ({"A2A_CONSOLE_PATH": "/a2a"}, "must differ from A2A_PATH"),
        ({"A2A_CONSOLE_PATH": "/a2a/rest/console"}, "outside A2A_REST_PATH"),
        ({"A2A_CONSOLE_PRINCIPAL": "nobody"}, "A2A_CONSOLE_PRINCIPAL must be one of"),
    ],
)
def test_bad_console_settings_fail_startup(config: dict[str, t.Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build(config)


def test_the_page_names_paths_under_the_script_root() -> None:
    client = build().test_client()
    html = client.get(
        CONSOLE, headers=bearer("alice"), environ_overrides={"SCRIPT_NAME": "/app"}
    ).get_data(as_text=True)
    assert 'data-a2a-path="/app/a2a"' in html
    assert 'data-console-path="/app/a2a/console"' in html
    assert json.dumps("/app/a2a/console/static/console.js")[1:-1] in html


def test_a_legacy_app_with_csrf_protect_and_a_cookie_login() -> None:
    from tests.legacy_app import create_app

    client = create_app({"A2A_CONSOLE_PATH": CONSOLE}).test_client()
    assert client.get(CONSOLE).status_code == 401
    with client.session_transaction() as cookie:
        cookie["user_id"] = 1
    assert client.get(CONSOLE).status_code == 200
    session = client.get(CONSOLE + "/api/session").get_json()
    assert session["owner"] == "1"
    assert session["tools"]["entity.invoices"]["list"]["properties"] == {
        "page": {"type": "integer", "minimum": 1}
    }
