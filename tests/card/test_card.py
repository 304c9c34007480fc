"""The public agent card, the extended card, RFC 9728 metadata and the agent role's routing."""

from __future__ import annotations

import typing as t

import pytest
from flask import Flask, Response, jsonify, request
from werkzeug.http import http_date
from werkzeug.middleware.proxy_fix import ProxyFix

from flask_a2a import A2A, AgentCard, ConfigError, Principal, Skill, TaskContext
from flask_a2a.testing import A2ATestClient
from tests.conftest import token_principal

CARD_PATH = "/.well-known/agent-card.json"


@pytest.fixture
def runner_kind() -> str:
    return "threads"  # the card does not depend on the runner


def noop(task: TaskContext) -> None:
    task.complete("ok")


SKILLS = [
    Skill(
        id="report",
        name="Report",
        description="Builds a report.",
        handler=noop,
        tags=("reports",),
        examples=("monthly report",),
        input_modes=("application/json",),
        output_modes=("application/pdf", "application/json"),
    ),
    Skill(id="plain", name="Plain", description="No tags, no modes.", handler=noop),
    Skill(
        id="hidden", name="Hidden", description="Served, not listed.", handler=noop, public=False
    ),
]

FULL_CARD = AgentCard(
    name="Reports agent",
    description="Makes reports.",
    version="2.1.0",
    provider_organization="Example Org",
    provider_url="https://example.org",
    documentation_url="https://example.org/docs",
    icon_url="https://example.org/icon.png",
    security_schemes={
        "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}},
        "oauth": {
            "oauth2SecurityScheme": {
                "flows": {
                    "clientCredentials": {
                        "tokenUrl": "https://auth.example.org/token",
                        "scopes": {"tasks:read": "read tasks"},
                    }
                }
            }
        },
    },
    security_requirements=[
        {"schemes": {"bearer": {}}},
        {"schemes": {"oauth": {"list": ["tasks:read"]}}},
    ],
    default_input_modes=("text/plain",),
    default_output_modes=("application/json",),
)


def get_card(app: Flask, **headers: str) -> dict[str, t.Any]:
    response = app.test_client().get(CARD_PATH, headers=headers)
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    return t.cast(dict[str, t.Any], response.get_json())


def test_card_shape_field_by_field(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(skills=SKILLS, card=FULL_CARD)
    card = get_card(app)
    assert set(card) == {
        "name", "description", "supportedInterfaces", "provider", "version", "documentationUrl",
        "capabilities", "securitySchemes", "securityRequirements", "defaultInputModes",
        "defaultOutputModes", "skills", "iconUrl",
    }  # fmt: skip
    assert card["name"] == "Reports agent"
    assert card["description"] == "Makes reports."
    assert card["version"] == "2.1.0"
    assert card["supportedInterfaces"] == [
        {"url": "http://localhost/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {
            "url": "http://localhost/a2a/rest",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "1.0",
        },
    ]
    assert card["provider"] == {"url": "https://example.org", "organization": "Example Org"}
    assert card["documentationUrl"] == "https://example.org/docs"
    assert card["iconUrl"] == "https://example.org/icon.png"
    exchange = app.extensions["a2a"].exchange
    assert card["capabilities"] == {
        "streaming": True,
        "pushNotifications": exchange.push is not None,
        "extendedAgentCard": False,
    }
    assert card["securitySchemes"] == FULL_CARD.security_schemes
    assert card["securityRequirements"] == [
        {"schemes": {"bearer": {}}},
        {"schemes": {"oauth": {"list": ["tasks:read"]}}},
    ]
    assert card["defaultInputModes"] == ["text/plain"]
    assert card["defaultOutputModes"] == ["application/json"]
    assert card["skills"] == [
        {
            "id": "report",
            "name": "Report",
            "description": "Builds a report.",
            "tags": ["reports"],
            "examples": ["monthly report"],
            "inputModes": ["application/json"],
            "outputModes": ["application/pdf", "application/json"],
        },
        {"id": "plain", "name": "Plain", "description": "No tags, no modes.", "tags": ["plain"]},
    ]
    assert "signatures" not in card


def test_default_card_is_minimal_and_bearer_protected(make_app: t.Callable[..., Flask]) -> None:
    card = get_card(make_app())
    assert "provider" not in card and "documentationUrl" not in card and "iconUrl" not in card
    assert card["securitySchemes"] == {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    assert [s["id"] for s in card["skills"]] == ["echo"]


def test_card_is_public_and_ignores_credentials(make_app: t.Callable[..., Flask]) -> None:
    app = make_app()
    assert get_card(app) == get_card(app, Authorization="Bearer alice")


def test_custom_path_is_advertised(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(config={"A2A_PATH": "/agents/rpc"})
    card = get_card(app)
    assert card["supportedInterfaces"][0]["url"] == "http://localhost/agents/rpc"


def test_absolute_url_behind_a_proxy(make_app: t.Callable[..., Flask]) -> None:
    app = make_app()
    app.wsgi_app = ProxyFix(app.wsgi_app, x_for=1, x_proto=1, x_host=1, x_prefix=1)  # type: ignore[method-assign]
    card = get_card(
        app,
        **{
            "X-Forwarded-Proto": "https",
            "X-Forwarded-Host": "agents.example.com",
            "X-Forwarded-Prefix": "/svc",
        },
    )
    assert card["supportedInterfaces"][0]["url"] == "https://agents.example.com/svc/a2a"


def test_forwarded_headers_are_ignored_without_proxyfix(make_app: t.Callable[..., Flask]) -> None:
    card = get_card(
        make_app(), **{"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"}
    )
    assert card["supportedInterfaces"][0]["url"] == "http://localhost/a2a"


def test_public_base_url_wins_over_the_host(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(config={"A2A_PUBLIC_BASE_URL": "https://public.example.com/base/"})
    card = get_card(app, Host="internal:8080")
    assert card["supportedInterfaces"][0]["url"] == "https://public.example.com/base/a2a"


def test_etag_cache_control_last_modified_and_304(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(config={"A2A_CARD_MAX_AGE": 120})
    http = app.test_client()
    first = http.get(CARD_PATH)
    etag = first.headers["ETag"]
    assert etag.startswith('"') and etag.endswith('"')
    assert first.headers["Cache-Control"] == "public, max-age=120"
    assert first.headers["Last-Modified"]
    again = http.get(CARD_PATH)
    assert again.headers["ETag"] == etag and again.data == first.data

    cached = http.get(CARD_PATH, headers={"If-None-Match": etag})
    assert cached.status_code == 304 and cached.data == b""
    assert cached.headers["ETag"] == etag
    assert http.get(CARD_PATH, headers={"If-None-Match": '"other"'}).status_code == 200
    assert http.get(CARD_PATH, headers={"If-None-Match": f'"x", {etag}'}).status_code == 304
    assert http.get(CARD_PATH, headers={"If-None-Match": f"W/{etag}"}).status_code == 304
    assert http.get(CARD_PATH, headers={"If-None-Match": "*"}).status_code == 304

    since = first.headers["Last-Modified"]
    assert http.get(CARD_PATH, headers={"If-Modified-Since": since}).status_code == 304
    assert http.get(CARD_PATH, headers={"If-Modified-Since": http_date(0)}).status_code == 200


def test_etag_follows_the_content(make_app: t.Callable[..., Flask]) -> None:
    http = make_app().test_client()
    one = http.get(CARD_PATH, headers={"Host": "one.example"})
    two = http.get(CARD_PATH, headers={"Host": "two.example"})
    assert one.headers["ETag"] != two.headers["ETag"]
    stale = http.get(
        CARD_PATH, headers={"Host": "two.example", "If-None-Match": one.headers["ETag"]}
    )
    assert stale.status_code == 200


def test_card_pointing_at_another_path_fails_at_startup(make_app: t.Callable[..., Flask]) -> None:
    with pytest.raises(ConfigError, match="the two must name the same path"):
        make_app(card=AgentCard(endpoint_path="/rpc"))
    app = make_app(config={"A2A_PATH": "/rpc"}, card=AgentCard(endpoint_path="/rpc"))
    assert get_card(app)["supportedInterfaces"][0]["url"] == "http://localhost/rpc"


# -- the extended card


def test_extended_card_from_an_agentcard(make_app: t.Callable[..., Flask]) -> None:
    callers: list[Principal] = []

    def extended(principal: Principal) -> AgentCard:
        callers.append(principal)
        return AgentCard(name="Reports agent (extended)", description=f"for {principal.owner}")

    app = make_app(skills=SKILLS, extended_card=extended)
    assert get_card(app)["capabilities"]["extendedAgentCard"] is True
    card = A2ATestClient(app, token="alice").rpc("GetExtendedAgentCard", {}).result
    assert card["name"] == "Reports agent (extended)"
    assert card["description"] == "for alice"
    assert card["supportedInterfaces"] == [
        {"url": "http://localhost/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {
            "url": "http://localhost/a2a/rest",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "1.0",
        },
    ]
    assert card["capabilities"]["extendedAgentCard"] is True
    assert [s["id"] for s in card["skills"]] == ["report", "plain", "hidden"]
    assert [p.owner for p in callers] == ["alice"]


def test_extended_card_dict_is_served_as_given(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(extended_card=lambda p: {"name": "raw", "owner": p.owner})
    result = A2ATestClient(app, token="bob").rpc("GetExtendedAgentCard").result
    assert result == {"name": "raw", "owner": "bob"}


def test_extended_card_refuses_anonymous_callers(make_app: t.Callable[..., Flask]) -> None:
    callers: list[Principal] = []
    app = make_app(extended_card=lambda p: callers.append(p) or AgentCard())  # type: ignore[func-returns-value]
    response = A2ATestClient(app).rpc("GetExtendedAgentCard", {})
    assert response.status == 401
    assert callers == []


def test_no_extended_card_configured_is_32007(make_app: t.Callable[..., Flask]) -> None:
    app = make_app()
    assert get_card(app)["capabilities"]["extendedAgentCard"] is False
    response = A2ATestClient(app, token="alice").rpc("GetExtendedAgentCard", {})
    assert response.status == 200
    assert response.code == -32007


# -- RFC 9728 protected-resource metadata


def test_protected_resource_metadata(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(
        card=FULL_CARD,
        config={
            "A2A_AUTHORIZATION_SERVERS": ["https://auth.example.org"],
            "A2A_SCOPES_SUPPORTED": "tasks:read tasks:write",
        },
    )
    http = app.test_client()
    root = http.get("/.well-known/oauth-protected-resource")
    assert root.status_code == 200
    assert root.get_json() == {
        "resource": "http://localhost",
        "authorization_servers": ["https://auth.example.org"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Reports agent",
        "scopes_supported": ["tasks:read", "tasks:write"],
        "resource_documentation": "https://example.org/docs",
    }
    for_path = http.get("/.well-known/oauth-protected-resource/a2a").get_json()
    assert for_path["resource"] == "http://localhost/a2a"
    # A refused caller is pointed at that metadata (RFC 9728 §5.1).
    refused = http.post(
        "/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    )
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"] == (
        'Bearer resource_metadata="http://localhost/.well-known/oauth-protected-resource/a2a"'
    )


def test_no_protected_resource_metadata_without_an_issuer(make_app: t.Callable[..., Flask]) -> None:
    http = make_app().test_client()
    assert http.get("/.well-known/oauth-protected-resource").status_code == 404


# -- the agent role


def agent_role_app(make_app: t.Callable[..., Flask], role: str | None) -> Flask:
    app = make_app(config={"A2A_ROLE": role})
    hits: list[str] = []
    app.config["hits"] = hits

    @app.before_request
    def host_auth() -> t.Any:
        hits.append(request.path)
        return None

    @app.get("/")
    def index() -> str:
        return "host index"

    @app.get("/api/invoices")
    def invoices() -> Response:
        return jsonify(["inv-1"])  # a list is JSON on its own only from Flask 2.2

    return app


def test_agent_role_serves_only_the_agent(make_app: t.Callable[..., Flask]) -> None:
    app = agent_role_app(make_app, "agent")
    http = app.test_client()
    for path in ("/", "/api/invoices", "/static/x.css", "/nowhere"):
        assert http.get(path).status_code == 404, path
    assert app.config["hits"] == []  # refused before the host's own hooks ran
    assert http.get(CARD_PATH).status_code == 200
    health = http.get("/healthz")
    assert health.status_code == 200
    assert health.get_json() == {"status": "ok", "checks": {"store": "ok"}}
    task = A2ATestClient(app, token="alice").send("hi")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert A2ATestClient(app).rpc("GetTask", {"id": task["id"]}).status == 401


def test_agent_role_health_reports_shutdown(make_app: t.Callable[..., Flask]) -> None:
    app = agent_role_app(make_app, "agent")
    app.extensions["a2a"].exchange.shutdown(timeout=1)
    health = app.test_client().get("/healthz")
    assert health.status_code == 503 and health.get_json() == {"status": "closing"}


def test_default_role_leaves_the_host_app_alone(make_app: t.Callable[..., Flask]) -> None:
    app = agent_role_app(make_app, None)
    http = app.test_client()
    assert http.get("/").data == b"host index"
    assert http.get("/api/invoices").get_json() == ["inv-1"]
    assert http.get("/healthz").status_code == 404
    assert http.get(CARD_PATH).status_code == 200


def test_unknown_role_fails_at_startup() -> None:
    app = Flask("role_app")
    app.config["A2A_ROLE"] = "worker"
    skill = Skill(id="e", name="E", description="d", handler=noop)
    with pytest.raises(ValueError, match="A2A_ROLE"):
        A2A(app, skills=[skill], principal=token_principal)
