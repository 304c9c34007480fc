"""Push secrets at rest: the SQL rows hold ciphertext for a config's token and credentials.

Each case reads the raw rows with SQL, on SQLite and PostgreSQL, and checks what a real local
webhook receives.
"""

from __future__ import annotations

import logging
import sys
import typing as t
import uuid

import pytest
import sqlalchemy as sa
from click.testing import Result
from cryptography.fernet import Fernet
from flask import Flask

from flask_a2a import ConfigError, Skill
from flask_a2a.cli import a2a_cli
from flask_a2a.protocol.model import AuthenticationInfo, PushConfig
from flask_a2a.push.secrets import MARKER, PushSecrets
from flask_a2a.store import MemoryStore
from flask_a2a.testing import A2ATestClient
from tests import stack
from tests.conftest import SQL_KINDS, Gate, echo
from tests.webhook import Webhook, wait_until

KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()
TOKEN = "tok-plain-7f3a"
CREDENTIALS = "cred-plain-91c2"
UNREADABLE = "do not open with A2A_PUSH_SECRET_KEY"
ECHO = Skill(id="echo", name="Echo", description="Echo.", handler=echo)


@pytest.fixture(params=SQL_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    """The SQL backends (the memory store keeps plaintext: its own test below)."""
    return t.cast(str, request.param)


@pytest.fixture(autouse=True)
def _logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="flask_a2a")


def no_dns(host: str) -> list[str]:
    raise OSError("no DNS in tests")


def build(
    make_app: t.Callable[..., Flask],
    store: t.Any,
    key: str | None,
    skills: list[Skill] | None = None,
) -> Flask:
    config: dict[str, t.Any] = {"A2A_ALLOW_PRIVATE_PUSH": True}
    if key is not None:
        config["A2A_PUSH_SECRET_KEY"] = key
    return make_app(skills=skills or [ECHO], config=config, store=store, push_resolver=no_dns)


def secret_config(url: str, config_id: str = "c1") -> dict[str, t.Any]:
    return {
        "id": config_id,
        "url": url,
        "token": TOKEN,
        "authentication": {"scheme": "Bearer", "credentials": CREDENTIALS},
    }


def raw_text(store: t.Any) -> str:
    """Every column of every row of both tables, as one text."""
    with store.engine.connect() as conn:
        rows = [
            *conn.execute(sa.select(store.push_configs)),
            *conn.execute(sa.select(store.tasks)),
        ]
    return "\n".join(" ".join(str(value) for value in row) for row in rows)


def send_with_push(app: Flask, hook: Webhook) -> str:
    """An echo task with an inline config; returns once its three deliveries arrived."""
    client = A2ATestClient(app, token="alice")
    configuration = {"taskPushNotificationConfig": secret_config(hook.url())}
    task = client.send("hi", skill="echo", configuration=configuration)["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    hook.wait_for(3)
    return str(task["id"])


def assert_secret_headers(hook: Webhook, path: str = "/hook") -> None:
    hits = [hit for hit in hook.hits if hit.path == path]
    assert hits
    for hit in hits:
        assert hit.headers["A2A-Notification-Token"] == TOKEN
        assert hit.headers["X-A2A-Notification-Token"] == TOKEN
        assert hit.headers["Authorization"] == f"Bearer {CREDENTIALS}"


def cli(app: Flask, *args: str) -> Result:
    return stack.cli_runner(app).invoke(a2a_cli, list(args))


def get_config(app: Flask, task_id: str, config_id: str = "c1") -> t.Any:
    client = A2ATestClient(app, token="alice")
    return client.rpc("GetTaskPushNotificationConfig", {"taskId": task_id, "id": config_id})


# ------------------------------------------------------------------ sealed rows


def test_with_a_key_no_column_holds_the_token_or_credentials(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any], webhook: Webhook
) -> None:
    store = new_store()
    app = build(make_app, store, KEY_A)
    task_id = send_with_push(app, webhook)
    assert_secret_headers(webhook)
    text = raw_text(store)
    assert webhook.url() in text and task_id in text  # the rows read are the config's
    assert TOKEN not in text and CREDENTIALS not in text
    assert text.count(MARKER) == 2
    # The owner is answered the plaintext, as without a key.
    answered = get_config(app, task_id).result
    assert answered["token"] == TOKEN
    assert answered["authentication"] == {"scheme": "Bearer", "credentials": CREDENTIALS}
    listed = (
        A2ATestClient(app, token="alice")
        .rpc("ListTaskPushNotificationConfigs", {"taskId": task_id})
        .result
    )
    assert listed["configs"] == [answered]
    exported = app.extensions["a2a"].exchange.store.export_owner("alice")["pushConfigs"]
    assert TOKEN not in str(exported)
    result = cli(app, "export-user", "alice")
    assert result.exit_code == 0, result.output
    assert TOKEN in result.output and CREDENTIALS in result.output


def test_without_a_key_the_row_holds_plaintext_as_before(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any], webhook: Webhook
) -> None:
    store = new_store()
    app = build(make_app, store, None)
    send_with_push(app, webhook)
    assert_secret_headers(webhook)
    text = raw_text(store)
    assert TOKEN in text and CREDENTIALS in text
    assert MARKER not in text


def test_the_memory_store_keeps_plaintext_in_process_memory(
    make_app: t.Callable[..., Flask], webhook: Webhook
) -> None:
    store = MemoryStore()
    app = build(make_app, store, KEY_A)
    task_id = send_with_push(app, webhook)
    assert_secret_headers(webhook)
    stored = store.get_push_config(task_id, "c1")
    assert stored is not None and stored.token == TOKEN
    assert cli(app, "rotate-push-secrets").output.startswith("the memory store keeps")


def test_a_row_stored_before_the_key_still_delivers(
    make_app: t.Callable[..., Flask],
    new_store: t.Callable[..., t.Any],
    webhook: Webhook,
    gate: Gate,
) -> None:
    store = new_store()
    skills = [Skill(id="gate", name="G", description="G.", handler=gate.handler)]
    app = build(make_app, store, KEY_A, skills)
    client = A2ATestClient(app, token="alice")
    task = client.send("x", skill="gate", configuration={"returnImmediately": True})["task"]
    assert gate.entered.wait(10)
    store.put_push_config("alice", plain(task["id"], webhook.url("/old")), 8)
    app.extensions["a2a"].exchange.push.forget(task["id"])  # read the configs again now
    assert TOKEN in raw_text(store)
    gate.release.set()
    wait_until(lambda: "TASK_STATE_COMPLETED" in str([h.json for h in webhook.hits]))
    assert_secret_headers(webhook, "/old")


def plain(task_id: str, url: str, config_id: str = "c1") -> PushConfig:
    return PushConfig(config_id, task_id, url, TOKEN, AuthenticationInfo("Bearer", CREDENTIALS))


# ------------------------------------------------------------------ the wrong key


def test_a_row_sealed_with_another_key_fails_only_its_deliveries_with_one_line(
    make_app: t.Callable[..., Flask],
    new_store: t.Callable[..., t.Any],
    webhook: Webhook,
    gate: Gate,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = new_store()
    skills = [Skill(id="gate", name="G", description="G.", handler=gate.handler)]
    app = build(make_app, store, KEY_B, skills)
    client = A2ATestClient(app, token="alice")
    task = client.send("x", skill="gate", configuration={"returnImmediately": True})["task"]
    task_id = str(task["id"])
    assert gate.entered.wait(10)
    # Sealed with key A, as a replica configured with A alone would have stored it.
    sealed_with_a = PushSecrets([KEY_A]).seal(plain(task_id, webhook.url("/a")))
    store.put_push_config("alice", sealed_with_a, 8)
    params = {"taskId": task_id, **secret_config(webhook.url(), "c2")}
    good = client.rpc("CreateTaskPushNotificationConfig", params)
    assert good.result["token"] == TOKEN
    webhook.wait_for(1)  # the snapshot, to the good config
    gate.release.set()
    wait_until(
        lambda: (
            client.rpc("GetTask", {"id": task_id}).result["status"]["state"]
            == "TASK_STATE_COMPLETED"
        )
    )
    hits = webhook.wait_for(3)
    wait_until(lambda: "TASK_STATE_COMPLETED" in webhook.hits[-1].body.decode())
    assert {hit.path for hit in hits} == {"/hook"}
    assert_secret_headers(webhook)
    # The owner still sees the config, without the secrets this server cannot open.
    answered = get_config(app, task_id).result
    assert answered == {"id": "c1", "taskId": task_id, "url": webhook.url("/a"),
                        "authentication": {"scheme": "Bearer"}}  # fmt: skip
    listed = client.rpc("ListTaskPushNotificationConfigs", {"taskId": task_id}).result
    assert [c["id"] for c in listed["configs"]] == ["c1", "c2"]
    assert listed["configs"][1]["token"] == TOKEN
    lines = [r for r in caplog.records if UNREADABLE in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].levelno == logging.ERROR
    assert "push config c1 of task " + task_id in lines[0].getMessage()
    assert KEY_A not in caplog.text and KEY_B not in caplog.text and TOKEN not in caplog.text
    assert "/a" not in webhook.paths()


# ------------------------------------------------------------------ rotation


def test_rotation_reseals_every_row_under_the_newest_key(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any], webhook: Webhook
) -> None:
    prefix = f"a2a_{uuid.uuid4().hex[:10]}_"  # three stores (three apps) on one set of tables
    old = build(make_app, new_store(table_prefix=prefix), KEY_A)
    task_id = send_with_push(old, webhook)
    store = new_store(table_prefix=prefix)
    for n in range(3):  # plaintext rows, stored before any key was set
        store.put_push_config("alice", plain(task_id, webhook.url(), f"p{n}"), 0)
    rotating = build(make_app, store, f"{KEY_B}, {KEY_A}")  # the environment's form
    result = cli(rotating, "rotate-push-secrets", "--batch-size", "2")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("rotated 4 push config(s); 0 already under the newest key")
    again = cli(rotating, "rotate-push-secrets")
    assert again.exit_code == 0, again.output
    assert again.output.startswith("rotated 0 push config(s); 4 already under the newest key")
    text = raw_text(store)
    assert TOKEN not in text and CREDENTIALS not in text
    only_b = PushSecrets([KEY_B])
    for config in store.list_push_configs(task_id):
        assert only_b.open(config).token == TOKEN
    newest = build(make_app, new_store(table_prefix=prefix), KEY_B)
    listed = (
        A2ATestClient(newest, token="alice")
        .rpc("ListTaskPushNotificationConfigs", {"taskId": task_id})
        .result["configs"]
    )
    assert [c["id"] for c in listed] == ["c1", "p0", "p1", "p2"]  # order kept
    assert {c["token"] for c in listed} == {TOKEN}
    assert {c["authentication"]["credentials"] for c in listed} == {CREDENTIALS}


def test_rotation_reports_rows_no_key_opens_and_exits_1(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any]
) -> None:
    store = new_store()
    app = build(make_app, store, KEY_B)
    task_id = A2ATestClient(app, token="alice").send("x", skill="echo")["task"]["id"]
    sealed = PushSecrets([KEY_A]).seal(plain(task_id, "http://127.0.0.1:9/h"))
    store.put_push_config("alice", sealed, 0)
    before = raw_text(store)
    result = cli(app, "rotate-push-secrets")
    assert result.exit_code == 1
    assert "rotated 0 push config(s); 0 already under the newest key, 1 unreadable" in result.output
    assert raw_text(store) == before


def test_rotation_needs_a_key(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any]
) -> None:
    result = cli(build(make_app, new_store(), None), "rotate-push-secrets")
    assert result.exit_code == 2
    assert "A2A_PUSH_SECRET_KEY is not set" in result.output


# ------------------------------------------------------------------ startup


def test_a_key_without_cryptography_fails_startup_naming_the_extra(
    make_app: t.Callable[..., Flask], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "cryptography.fernet", None)  # import fails
    with pytest.raises(ConfigError, match=r"pip install flask-a2a\[push-secrets\]"):
        build(make_app, MemoryStore(), KEY_A)
    build(make_app, MemoryStore(), None)  # no key: no cryptography needed


# ids of their own: the key is new in each process (pytest-xdist workers must collect the same)
@pytest.mark.parametrize("value", ["not-a-key", f"{KEY_A},short"], ids=["not-a-key", "key,short"])
def test_a_malformed_key_fails_startup_without_echoing_it(
    make_app: t.Callable[..., Flask], value: str
) -> None:
    with pytest.raises(ConfigError, match="is not a Fernet key") as caught:
        build(make_app, MemoryStore(), value)
    assert "not-a-key" not in str(caught.value) and KEY_A not in str(caught.value)


def test_a_key_of_the_wrong_type_is_refused_and_hidden(make_app: t.Callable[..., Flask]) -> None:
    with pytest.raises(ConfigError, match="A2A_PUSH_SECRET_KEY=<hidden>") as caught:
        build(make_app, MemoryStore(), t.cast(str, [KEY_A, 7]))
    assert KEY_A not in str(caught.value)
