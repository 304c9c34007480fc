"""Every misconfiguration of ``A2A(...)`` and ``init_app`` is one :class:`ConfigError` naming
the setting or the argument at fault, before any request (and still the built-in class 0.1
raised, for code written against it)."""

from __future__ import annotations

import sys
import typing as t

import pytest
from flask import Flask

from flask_a2a import A2A, AgentCard, ConfigError, Entity, Skill
from flask_a2a.config import ConfigRuntimeError, ConfigTypeError
from flask_a2a.fleet.redis_bus import RedisBus
from flask_a2a.protocol.extensions import AgentExtension
from tests.card.test_signing import ec_key

from .conftest import echo, token_principal
from .test_config import NoteSchema

ECHO = Skill(id="echo", name="Echo", description="Echo.", handler=echo)


def agent(
    app: Flask | None = None, settings: dict[str, t.Any] | None = None, **options: t.Any
) -> A2A:
    """An agent on a fresh app (or ``app``) with ``settings`` in its config, the echo skill
    and the test principal unless given."""
    app = app if app is not None else Flask("misconfigured")
    app.config.update(settings or {})
    options.setdefault("skills", [ECHO])
    options.setdefault("principal", token_principal)
    return A2A(app, **options)


def twice() -> None:
    app = Flask("twice")
    agent(app)
    agent(app)


def routed_path() -> None:
    app = Flask("routed")
    app.add_url_rule("/a2a", "mine", lambda: "")
    agent(app)


def routed_rest() -> None:
    app = Flask("routed")
    app.add_url_rule("/a2a/rest/tasks", "mine", lambda: "")
    agent(app)


def two_well_known_cards() -> None:
    app = Flask("cards")
    agent(app)
    agent(app, name="b", well_known_card=True, url_prefix="/b")


def no_redis_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "flask_a2a.fleet.redis_bus", None)  # not installed
    agent(settings={"A2A_REDIS_URL": "redis://127.0.0.1:6379/0"})


BASE = {"A2A_PUBLIC_BASE_URL": "https://agent.example"}
JWK = {"kty": "EC", "crv": "P-256", "x": "x", "y": "y", "d": "d", "kid": "k1"}

#: (what is wrong, how it is built, a name the message must hold, the class 0.1 raised)
CASES: list[tuple[str, t.Callable[..., t.Any], str, type[Exception]]] = [
    ("url_prefix", lambda: agent(url_prefix="billing"), "url_prefix=", ValueError),
    ("config", lambda: agent(config={"PATH": "/x"}), "config=", ValueError),
    ("no principal", lambda: agent(principal=None), "principal=", ValueError),
    ("principal", lambda: agent(principal="alice"), "principal=", TypeError),
    ("extended_card", lambda: agent(extended_card={"name": "x"}), "extended_card=", TypeError),
    ("entity_gate", lambda: agent(entity_gate=True), "entity_gate=", TypeError),
    ("console_admin", lambda: agent(console_admin="alice"), "console_admin=", TypeError),
    ("owner_lookup", lambda: agent(owner_lookup={}), "owner_lookup=", TypeError),
    ("owner_name", lambda: agent(owner_name={}), "owner_name=", TypeError),
    ("reentry", lambda: agent(reentry="headers"), "reentry=", TypeError),
    ("name", lambda: agent(name="Billing Agent"), "name=", ValueError),
    ("the same agent twice", twice, "name=", RuntimeError),
    ("a card at the well-known path", two_well_known_cards, "well_known_card=", RuntimeError),
    ("A2A_PATH routed", routed_path, "A2A_PATH", RuntimeError),
    ("A2A_REST_PATH routed", routed_rest, "A2A_REST_PATH", RuntimeError),
    ("A2A_PATH", lambda: agent(settings={"A2A_PATH": "a2a"}), "A2A_PATH", ValueError),
    (
        "A2A_TASK_TIMEOUT",
        lambda: agent(settings={"A2A_TASK_TIMEOUT": "soon"}),
        "A2A_TASK_TIMEOUT",
        ValueError,
    ),
    ("no skill", lambda: agent(skills=[]), "skills=", ValueError),
    ("two skills, one id", lambda: agent(skills=[ECHO, ECHO]), "skills=", ValueError),
    (
        "a skill's handler",
        lambda: Skill(id="x", name="X", description="X.", handler="echo"),  # type: ignore[arg-type]
        "handler",
        TypeError,
    ),
    (
        "two entities, one skill",
        lambda: agent(entities=[Entity("notes", schema=NoteSchema)] * 2),
        "entities=",
        ValueError,
    ),
    (
        "an entity's schema",
        lambda: Entity("notes", schema=dict),  # type: ignore[arg-type]
        "schema",
        TypeError,
    ),
    (
        "signing_keys of JWKs",
        lambda: agent(settings=BASE, signing_keys=[JWK]),
        "signing_keys=",
        AttributeError,
    ),
    (
        "one signing key, not a list",
        lambda: agent(settings=BASE, signing_keys=ec_key("k")),
        "signing_keys=",
        TypeError,
    ),
    (
        "signing_keys, one kid",
        lambda: agent(settings=BASE, signing_keys=[ec_key("k")] * 2),
        "signing_keys=",
        ValueError,
    ),
    (
        "signing_keys, no base URL",
        lambda: agent(signing_keys=[ec_key("k")]),
        "A2A_PUBLIC_BASE_URL",
        RuntimeError,
    ),
    (
        "the card's endpoint",
        lambda: agent(card=AgentCard(endpoint_path="/rpc")),
        "A2A_PATH",
        RuntimeError,
    ),
    (
        "the card's extensions",
        lambda: agent(
            card=AgentCard(extensions=[AgentExtension("urn:x"), AgentExtension("urn:x")])
        ),
        "extensions=",
        ValueError,
    ),
    (
        "A2A_FLEET_LIMITS",
        lambda: agent(settings={"A2A_FLEET_LIMITS": True}),
        "A2A_FLEET_LIMITS",
        ValueError,
    ),
    (
        "A2A_REDIS_RETRY",
        lambda: RedisBus("redis://127.0.0.1:6379/0", retry=0),
        "A2A_REDIS_RETRY",
        ValueError,
    ),
    ("A2A_REDIS_URL without redis", no_redis_extra, "A2A_REDIS_URL", RuntimeError),
]


@pytest.mark.parametrize(
    ("build", "named", "was"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_each_misconfiguration_is_a_config_error_naming_it(
    build: t.Callable[..., t.Any],
    named: str,
    was: type[Exception],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError) as caught:
        build(monkeypatch) if build is no_redis_extra else build()
    assert named in str(caught.value)
    if was is not AttributeError:  # 0.1's AttributeError was a crash, not a refusal
        assert isinstance(caught.value, was)


def test_the_family_is_one_class_to_catch() -> None:
    assert issubclass(ConfigTypeError, ConfigError) and issubclass(ConfigTypeError, TypeError)
    assert issubclass(ConfigRuntimeError, ConfigError)
    assert issubclass(ConfigRuntimeError, RuntimeError)
    assert issubclass(ConfigError, ValueError)
