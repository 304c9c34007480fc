"""Card signatures: JWS over RFC 8785, verified by our helper and by the official SDK's verifier."""

from __future__ import annotations

import json
import typing as t

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from flask import Flask

from flask_a2a import AgentCard, ConfigError, Skill, TaskContext
from flask_a2a.card.signing import (
    CardSignatureError,
    SigningKey,
    b64url_decode,
    canonical_payload,
    public_jwk,
    thumbprint,
    verify_card,
)
from flask_a2a.testing import A2ATestClient

sdk_signing = pytest.importorskip("a2a.utils.signing", reason="needs a2a-sdk[signing]")
from a2a.client.card_resolver import parse_agent_card  # noqa: E402
from jwt import PyJWK  # noqa: E402

CARD_PATH = "/.well-known/agent-card.json"
JWKS_PATH = "/.well-known/jwks.json"
BASE = "https://agent.example"


@pytest.fixture
def runner_kind() -> str:
    return "threads"  # signing does not depend on the runner


def ec_key(kid: str) -> SigningKey:
    return SigningKey(kid, ec.generate_private_key(ec.SECP256R1()))


def rsa_key(kid: str) -> SigningKey:
    return SigningKey(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048))


def noop(task: TaskContext) -> None:
    task.complete("ok")


#: Everything the SDK's proto normal form rewrites: empty lists/objects, default booleans,
#: integers in Struct params, non-ASCII text.
TRICKY_CARD = AgentCard(
    name="Agent Zoë ✓",
    description='Ünïcode and "quotes"',
    security_schemes={
        "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
        "oauth": {
            "oauth2SecurityScheme": {
                "flows": {
                    "authorizationCode": {
                        "authorizationUrl": "https://auth.example/authorize",
                        "tokenUrl": "https://auth.example/token",
                        "scopes": {"tasks:read": "read"},
                        "pkceRequired": False,
                    }
                }
            }
        },
    },
    security_requirements=[{"schemes": {"bearer": {}}}, {"schemes": {"oauth": {"list": []}}}],
    extensions=[
        {"uri": "https://ext.example/a", "required": False, "params": {"n": 1, "f": 1.5}},
        {"uri": "https://ext.example/b", "required": True, "description": ""},
    ],
)

SKILLS = [
    Skill(
        id="report",
        name="Report",
        description="Builds a report.",
        handler=noop,
        input_modes=("application/json",),
        output_modes=("application/pdf",),
    ),
    Skill(id="hidden", name="Hidden", description="Unlisted.", handler=noop, public=False),
]


def signed_app(
    make_app: t.Callable[..., Flask], keys: t.Sequence[SigningKey], **options: t.Any
) -> Flask:
    config = {"A2A_PUBLIC_BASE_URL": BASE, **options.pop("config", {})}
    options.setdefault("card", TRICKY_CARD)
    return make_app(skills=SKILLS, signing_keys=keys, config=config, **options)


def fetch(app: Flask) -> tuple[dict[str, t.Any], dict[str, t.Any]]:
    http = app.test_client()
    return http.get(CARD_PATH).get_json(), http.get(JWKS_PATH).get_json()


def sdk_verify(card: dict[str, t.Any], jwks: dict[str, t.Any]) -> None:
    """The official SDK's verifier; unknown kids get a wrong key (the SDK lets a provider's
    KeyError escape, so it must return something)."""
    keys = {k["kid"]: PyJWK(k) for k in jwks["keys"]}
    stranger = PyJWK(ec_key("stranger").jwk())

    def provider(kid: str | None, jku: str | None) -> PyJWK:
        assert jku == BASE + JWKS_PATH
        return keys.get(str(kid), stranger)

    verify = sdk_signing.create_signature_verifier(provider, ["ES256", "RS256"])
    verify(parse_agent_card(json.loads(json.dumps(card))))


def headers_of(card: dict[str, t.Any]) -> list[dict[str, t.Any]]:
    return [json.loads(b64url_decode(s["protected"])) for s in card["signatures"]]


# -- the canonical payload


def test_canonical_payload_matches_the_sdk(make_app: t.Callable[..., Flask]) -> None:
    card, _ = fetch(signed_app(make_app, [ec_key("k1")]))
    ours = canonical_payload(card)
    sdk = sdk_signing._canonicalize_agent_card(parse_agent_card(card)).encode()
    assert ours == sdk
    decoded = json.loads(ours)
    # scope-less requirements collapse away entirely, as in the SDK's normal form
    assert "securityRequirements" not in decoded and "securitySchemes" in decoded
    assert "pkceRequired" not in json.dumps(decoded)
    assert "Zoë ✓".encode() in ours  # UTF-8, not \u escapes


def test_canonical_payload_drops_what_the_sdk_drops() -> None:
    card = {
        "name": "n",
        "iconUrl": "",
        "securityRequirements": [{"schemes": {"bearer": {}}}],
        "capabilities": {"streaming": False, "extensions": [{"uri": "u", "required": False}]},
        "skills": [{"id": "s", "examples": []}],
        "signatures": [{"protected": "x", "signature": "y"}],
    }
    assert canonical_payload(card) == (
        b'{"capabilities":{"extensions":[{"uri":"u"}],"streaming":false},'
        b'"name":"n","skills":[{"id":"s"}]}'
    )


# -- signatures


@pytest.mark.parametrize("make_key", [ec_key, rsa_key], ids=["ES256", "RS256"])
def test_signed_card_verifies_with_ours_and_the_sdk(
    make_app: t.Callable[..., Flask], make_key: t.Callable[[str], SigningKey]
) -> None:
    key = make_key("k1")
    card, jwks = fetch(signed_app(make_app, [key]))
    (signature,) = card["signatures"]
    assert set(signature) == {"protected", "signature"}
    assert headers_of(card) == [
        {"alg": key.alg, "kid": "k1", "typ": "JOSE", "jku": BASE + JWKS_PATH}
    ]
    if key.alg == "ES256":
        assert len(b64url_decode(signature["signature"])) == 64  # JWS R||S, not DER
    assert verify_card(card, jwks) == "k1"
    sdk_verify(card, jwks)


def test_tampered_card_fails_both_verifiers(make_app: t.Callable[..., Flask]) -> None:
    card, jwks = fetch(signed_app(make_app, [ec_key("k1")]))
    card["supportedInterfaces"][0]["url"] = "https://evil.example/a2a"
    with pytest.raises(CardSignatureError):
        verify_card(card, jwks)
    with pytest.raises(sdk_signing.InvalidSignaturesError):
        sdk_verify(card, jwks)


def test_verifier_refuses_wrong_keys_algorithms_and_unsigned_cards(
    make_app: t.Callable[..., Flask],
) -> None:
    card, jwks = fetch(signed_app(make_app, [ec_key("k1")]))
    with pytest.raises(CardSignatureError, match="no signatures"):
        verify_card({k: v for k, v in card.items() if k != "signatures"}, jwks)
    other = {"keys": [{**ec_key("other").jwk(), "kid": "k1"}]}
    with pytest.raises(CardSignatureError):
        verify_card(card, other)  # same kid, different key
    with pytest.raises(CardSignatureError):
        verify_card(card, jwks, algorithms=["RS256"])  # ES256 not allowed
    with pytest.raises(CardSignatureError):
        verify_card(card, {"keys": []})


def test_key_rotation_signs_with_every_key(make_app: t.Callable[..., Flask]) -> None:
    old, new = ec_key("2025-old"), rsa_key("2026-new")
    card, jwks = fetch(signed_app(make_app, [new, old]))
    assert [h["kid"] for h in headers_of(card)] == ["2026-new", "2025-old"]
    assert [k["kid"] for k in jwks["keys"]] == ["2026-new", "2025-old"]
    only_old = {"keys": [k for k in jwks["keys"] if k["kid"] == "2025-old"]}
    only_new = {"keys": [k for k in jwks["keys"] if k["kid"] == "2026-new"]}
    assert verify_card(card, only_old) == "2025-old"  # a client holding last year's JWKS
    assert verify_card(card, only_new) == "2026-new"
    sdk_verify(card, only_old)
    sdk_verify(card, only_new)


def test_after_rotation_the_retired_key_no_longer_verifies(
    make_app: t.Callable[..., Flask],
) -> None:
    old, new = ec_key("old"), ec_key("new")
    before, old_jwks = fetch(signed_app(make_app, [old]))
    after, new_jwks = fetch(signed_app(make_app, [new]))
    assert verify_card(before, old_jwks) == "old"
    assert verify_card(after, new_jwks) == "new"
    sdk_verify(after, new_jwks)
    with pytest.raises(CardSignatureError):
        verify_card(after, old_jwks)
    with pytest.raises(sdk_signing.InvalidSignaturesError):
        sdk_verify(after, old_jwks)


def test_signed_card_keeps_a_stable_etag(make_app: t.Callable[..., Flask]) -> None:
    http = signed_app(make_app, [ec_key("k1")]).test_client()
    first, second = http.get(CARD_PATH), http.get(CARD_PATH)
    assert first.data == second.data  # ES256 is randomized: the signature is cached
    etag = first.headers["ETag"]
    assert http.get(CARD_PATH, headers={"If-None-Match": etag}).status_code == 304


def test_extended_card_is_signed_too(make_app: t.Callable[..., Flask]) -> None:
    app = signed_app(make_app, [ec_key("k1")], extended_card=lambda p: AgentCard(name="ext"))
    card = A2ATestClient(app, token="alice").rpc("GetExtendedAgentCard", {}).result
    _, jwks = fetch(app)
    assert card["name"] == "ext"
    assert [s["id"] for s in card["skills"]] == ["report", "hidden"]
    assert verify_card(card, jwks) == "k1"
    sdk_verify(card, jwks)


# -- JWKS


def test_jwks_content(make_app: t.Callable[..., Flask]) -> None:
    es, rs = ec_key("es"), rsa_key("rs")
    app = signed_app(make_app, [es, rs])
    response = app.test_client().get(JWKS_PATH)
    assert response.status_code == 200 and response.mimetype == "application/json"
    assert response.headers["ETag"] and "max-age" in response.headers["Cache-Control"]
    ec_jwk, rsa_jwk = response.get_json()["keys"]
    assert set(ec_jwk) == {"kty", "crv", "x", "y", "kid", "alg", "use"}
    assert (ec_jwk["kty"], ec_jwk["crv"], ec_jwk["alg"], ec_jwk["use"]) == (
        "EC", "P-256", "ES256", "sig"
    )  # fmt: skip
    numbers = t.cast(ec.EllipticCurvePrivateKey, es.private_key).public_key().public_numbers()
    assert int.from_bytes(b64url_decode(ec_jwk["x"]), "big") == numbers.x
    assert int.from_bytes(b64url_decode(ec_jwk["y"]), "big") == numbers.y
    assert len(ec_jwk["x"]) == len(ec_jwk["y"]) == 43
    assert set(rsa_jwk) == {"kty", "n", "e", "kid", "alg", "use"}
    assert (rsa_jwk["kty"], rsa_jwk["alg"], rsa_jwk["e"]) == ("RSA", "RS256", "AQAB")
    rsa_numbers = t.cast(rsa.RSAPrivateKey, rs.private_key).public_key().public_numbers()
    assert int.from_bytes(b64url_decode(rsa_jwk["n"]), "big") == rsa_numbers.n


def test_no_jwks_route_without_keys(make_app: t.Callable[..., Flask]) -> None:
    http = make_app().test_client()
    assert http.get(JWKS_PATH).status_code == 404
    assert "signatures" not in http.get(CARD_PATH).get_json()


def test_jwks_path_is_configurable(make_app: t.Callable[..., Flask]) -> None:
    app = signed_app(make_app, [ec_key("k1")], config={"A2A_JWKS_PATH": "/keys.json"})
    http = app.test_client()
    card = http.get(CARD_PATH).get_json()
    assert headers_of(card)[0]["jku"] == BASE + "/keys.json"
    assert verify_card(card, http.get("/keys.json").get_json()) == "k1"


# -- keys and startup checks


def test_rfc7638_thumbprint_vector() -> None:
    # RFC 7638 §3.1: the example RSA key's thumbprint.
    jwk = {
        "kty": "RSA",
        "e": "AQAB",
        "n": (
            "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1"
            "L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4"
            "QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbO"
            "pbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csF"
            "Cur-kEgU8awapJzKnqDKgw"
        ),
    }
    assert thumbprint(jwk) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_from_pem_defaults_the_kid_to_the_thumbprint() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    key = SigningKey.from_pem(pem)
    assert key.alg == "ES256"
    assert key.kid == thumbprint(public_jwk(private.public_key()))
    assert SigningKey.from_pem(pem.decode(), kid="named").kid == "named"


def test_unfit_keys_are_refused() -> None:
    with pytest.raises(ConfigError, match="P-256"):
        SigningKey("k", ec.generate_private_key(ec.SECP384R1()))
    with pytest.raises(ConfigError, match="2048"):
        SigningKey("k", rsa.generate_private_key(public_exponent=65537, key_size=1024))
    with pytest.raises(ConfigError, match="does not fit"):
        SigningKey("k", ec.generate_private_key(ec.SECP256R1()), alg="RS256")
    with pytest.raises(ConfigError, match="kid"):
        SigningKey("", ec.generate_private_key(ec.SECP256R1()))


def test_duplicate_kids_fail_at_startup(make_app: t.Callable[..., Flask]) -> None:
    with pytest.raises(ConfigError, match="distinct kids"):
        signed_app(make_app, [ec_key("same"), ec_key("same")])


def test_signing_needs_a_pinned_host(make_app: t.Callable[..., Flask]) -> None:
    with pytest.raises(ConfigError, match="A2A_PUBLIC_BASE_URL or TRUSTED_HOSTS"):
        make_app(signing_keys=[ec_key("k1")])
    app = make_app(signing_keys=[ec_key("k1")], config={"TRUSTED_HOSTS": ["agent.local"]})
    http = app.test_client()
    assert http.get(CARD_PATH, headers={"Host": "evil.example"}).status_code == 400
    card = http.get(CARD_PATH, headers={"Host": "agent.local"}).get_json()
    assert card["supportedInterfaces"][0]["url"] == "http://agent.local/a2a"
    jwks = http.get(JWKS_PATH, headers={"Host": "agent.local"}).get_json()
    assert verify_card(card, jwks) == "k1"
