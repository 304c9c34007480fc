"""``A2A_*`` config is checked once, at ``init_app``: env strings coerced, wrong types refused."""

from __future__ import annotations

import logging
import typing as t

import pytest
from flask import Flask
from marshmallow import Schema, fields

from flask_a2a import A2A, ConfigError, Entity, Skill, from_prefixed_env
from flask_a2a.config import DEFAULTS
from flask_a2a.testing import A2ATestClient

from .conftest import echo, token_principal

CARD = "/.well-known/agent-card.json"


class NoteSchema(Schema):
    id = fields.Integer(dump_only=True)
    text = fields.String(required=True)


NOTES = Entity("notes", schema=NoteSchema, url="/api/notes")


def card_skills(app: Flask) -> list[str]:
    return [skill["id"] for skill in app.test_client().get(CARD).get_json()["skills"]]


def build(config: dict[str, t.Any], **options: t.Any) -> Flask:
    """A bare app (not the fixture), for configs that must fail before anything runs."""
    app = Flask("config_app")
    app.config.update(config)
    A2A(app, skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
        principal=token_principal, **options)  # fmt: skip
    return app


def test_a_numeric_string_timeout_is_seconds_and_send_message_works(
    make_app: t.Callable[..., Flask],
) -> None:
    app = make_app(config={"A2A_TASK_TIMEOUT": "60"})
    assert app.extensions["a2a"].settings.task_timeout == 60.0
    task = A2ATestClient(app, token="alice").send("hello", skill="echo")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "hello"}]


@pytest.mark.parametrize("word", ["false", "False", "NO", "0", " no "])
def test_a_false_word_keeps_entity_skills_on(make_app: t.Callable[..., Flask], word: str) -> None:
    app = make_app(config={"A2A_DISABLE_ENTITY_SKILLS": word}, entities=[NOTES])
    assert app.extensions["a2a"].settings.disable_entity_skills is False
    assert "entity.notes" in card_skills(app)


@pytest.mark.parametrize("word", ["true", "TRUE", "Yes", "1", 1, True])
def test_a_true_word_turns_entity_skills_off(make_app: t.Callable[..., Flask], word: t.Any) -> None:
    app = make_app(config={"A2A_DISABLE_ENTITY_SKILLS": word}, entities=[NOTES])
    assert card_skills(app) == ["echo"]


def test_a_size_with_a_unit_fails_init_app_naming_key_value_and_type() -> None:
    with pytest.raises(ConfigError) as caught:
        build({"A2A_MAX_BODY_BYTES": "1MB"})
    message = str(caught.value)
    assert "A2A_MAX_BODY_BYTES" in message and "'1MB'" in message and "an integer" in message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("A2A_TASK_TIMEOUT", "soon", "a number"),
        ("A2A_TASK_TIMEOUT", True, "a number"),
        ("A2A_KEEPALIVE_INTERVAL", "nan", "a number"),
        ("A2A_MAX_HISTORY", 10.5, "an integer"),
        ("A2A_ALLOW_PRIVATE_PUSH", "maybe", "a boolean"),
        ("A2A_ALLOW_PRIVATE_PUSH", 2, "a boolean"),
        ("A2A_PATH", 5, "a string"),
        ("A2A_ALLOWED_ORIGINS", [1, 2], "a list of strings"),
    ],
)
def test_a_value_of_the_wrong_type_fails_startup(key: str, value: t.Any, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build({key: value})
    assert str(caught.value).startswith(f"{key}={value!r}")
    assert expected in str(caught.value)


def test_every_wrong_key_is_named_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        build({"A2A_MAX_BODY_BYTES": "1MB", "A2A_TASK_TIMEOUT": "soon"})
    assert str(caught.value).splitlines() == [
        "A2A_TASK_TIMEOUT='soon' (str): expected a number",
        "A2A_MAX_BODY_BYTES='1MB' (str): expected an integer",
    ]


def test_range_checks_and_zero_is_default_still_hold() -> None:
    with pytest.raises(ConfigError, match="A2A_MAX_BODY_BYTES must be positive"):
        build({"A2A_MAX_BODY_BYTES": "0"})
    with pytest.raises(ValueError, match="A2A_PATH must start with '/'"):
        build({"A2A_PATH": "a2a"})
    with pytest.raises(ConfigError, match="A2A_MIN_RUN_LEASE must be positive"):
        build({"A2A_MIN_RUN_LEASE": 0})
    config = {"A2A_TERMINAL_TASK_RETENTION": "0", "A2A_MAX_HISTORY": 16.0,
              "A2A_MAX_STREAM_SEATS_PER_OWNER": "-1"}  # fmt: skip
    settings = build(config).extensions["a2a"].settings
    assert settings.terminal_task_retention == DEFAULTS["A2A_TERMINAL_TASK_RETENTION"]
    assert (settings.max_history, settings.max_stream_seats_per_owner) == (16, -1)


@pytest.mark.parametrize(
    "value", ["https://a.example, https://b.example", ["https://a.example", "https://b.example"]]
)
def test_list_keys_take_a_list_or_one_separated_string(value: t.Any) -> None:
    settings = build({"A2A_ALLOWED_ORIGINS": value}).extensions["a2a"].settings
    assert settings.allowed_origins == ("https://a.example", "https://b.example")


def test_a_typo_is_a_warning_naming_the_close_key(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="flask_a2a"):
        app = build({"A2A_TASK_TIMOUT": 60, "A2A_FROBNICATE": 1})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "a2a: unknown config key A2A_FROBNICATE is ignored",
        "a2a: unknown config key A2A_TASK_TIMOUT is ignored; did you mean A2A_TASK_TIMEOUT?",
    ]
    assert app.extensions["a2a"].settings.task_timeout == DEFAULTS["A2A_TASK_TIMEOUT"]


def test_known_keys_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="flask_a2a"):
        build(dict(DEFAULTS))
    assert [r.getMessage() for r in caplog.records] == []


def test_from_prefixed_env_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "FLASK_A2A_TASK_TIMEOUT": "60",  # JSON: 60
        "FLASK_A2A_KEEPALIVE_INTERVAL": "2.5",  # JSON: 2.5
        "FLASK_A2A_DISABLE_ENTITY_SKILLS": "no",  # not JSON: the word
        "FLASK_A2A_ALLOW_PRIVATE_PUSH": "true",  # JSON: true
        "FLASK_A2A_ALLOWED_ORIGINS": "https://a.example https://b.example",
        "FLASK_A2A_SCOPES_SUPPORTED": '["tasks:read"]',
        "FLASK_A2A_PATH": "/agent",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    app = Flask("env_app")
    from_prefixed_env(app.config)
    A2A(app, skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
        principal=token_principal, entities=[NOTES])  # fmt: skip
    settings = app.extensions["a2a"].settings
    assert (settings.task_timeout, settings.keepalive_interval) == (60.0, 2.5)
    assert settings.disable_entity_skills is False and settings.allow_private_push is True
    assert settings.allowed_origins == ("https://a.example", "https://b.example")
    assert (settings.scopes_supported, settings.path) == (("tasks:read",), "/agent")
    client = A2ATestClient(app, token="alice")
    assert client.send("hi", skill="echo")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "entity.notes" in card_skills(app)
    app.extensions["a2a"].exchange.shutdown(timeout=5)

    monkeypatch.setenv("FLASK_A2A_MAX_BODY_BYTES", "1MB")
    broken = Flask("env_app")
    from_prefixed_env(broken.config)
    with pytest.raises(ConfigError, match=r"A2A_MAX_BODY_BYTES='1MB' \(str\): expected an integer"):
        A2A(broken, skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
            principal=token_principal)  # fmt: skip


def test_each_default_is_written_once() -> None:
    """``DEFAULTS`` is read off ``Settings``: a default changed there is the key's default,
    and the module spells no key's default a second time."""
    import dataclasses
    import inspect

    from flask_a2a import config

    fields_ = {f.name: f.default for f in dataclasses.fields(config.Settings)}
    assert {k[4:].lower(): v for k, v in DEFAULTS.items()} == {
        name: default for name, default in fields_.items() if name != "agent"
    }
    source = inspect.getsource(config)
    assert [key for key in DEFAULTS if f'"{key}":' in source] == []
    assert config.Settings.from_config({}) == config.Settings()
