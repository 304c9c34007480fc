"""Push configs over the wire: the four methods, inline registration, bounds, isolation, SSRF.

Every refusal is followed by a read proving nothing was written.
"""

from __future__ import annotations

import socket
import typing as t

import pytest
from flask import Flask

from flask_a2a.protocol.model import PushConfig
from flask_a2a.testing import A2ATestClient, RPCResponse
from tests.conftest import next_millisecond
from tests.webhook import Webhook

pytestmark = pytest.mark.usefixtures("binding")

#: Names the test resolver knows; anything else does not resolve (no DNS in tests).
NAMES: dict[str, list[str]] = {
    "localhost": ["127.0.0.1", "::1"],
    "internal.test": ["10.1.2.3"],
    "metadata.test": ["169.254.169.254"],
    "mixed.test": ["127.0.0.1", "10.9.9.9"],
    "nat64-local.test": ["64:ff9b:1::a00:1"],
    "translated.test": ["::ffff:0:7f00:1"],
}


def resolver(host: str) -> list[str]:
    try:
        return NAMES[host]
    except KeyError:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None


@pytest.fixture
def private_app(make_app: t.Callable[..., Flask]) -> Flask:
    """Private push allowed: configs point at the local receiver."""
    return make_app(
        config={"A2A_ALLOW_PRIVATE_PUSH": True, "A2A_PUSH_TIMEOUT": 5.0},
        push_resolver=resolver,
    )


@pytest.fixture
def client(private_app: Flask) -> A2ATestClient:
    return A2ATestClient(private_app, token="alice")


def create(
    client: A2ATestClient, task_id: str, url: str, caller: str = "alice", **extra: t.Any
) -> RPCResponse:
    params = {"taskId": task_id, "url": url, **extra}
    return client.rpc("CreateTaskPushNotificationConfig", params, token=caller)


def config_ids(client: A2ATestClient, task_id: str) -> list[str]:
    result = client.rpc("ListTaskPushNotificationConfigs", {"taskId": task_id}).result
    return [c["id"] for c in result.get("configs", [])]


def task_count(client: A2ATestClient, token: str = "alice") -> int:
    return int(client.rpc("ListTasks", {}, token=token).result["totalSize"])


def test_card_says_push_notifications(client: A2ATestClient) -> None:
    card = client.client.get("/.well-known/agent-card.json").get_json()
    assert card["capabilities"]["pushNotifications"] is True


def test_create_get_list_delete(client: A2ATestClient, webhook: Webhook) -> None:
    task_id = client.send("hi")["task"]["id"]
    created = create(
        client,
        task_id,
        webhook.url(),
        token="tok-1",
        authentication={"scheme": "Bearer", "credentials": "c-1"},
    ).result
    assert created["id"]  # minted
    assert created["taskId"] == task_id
    assert created["url"] == webhook.url()
    assert created["token"] == "tok-1"
    assert created["authentication"] == {"scheme": "Bearer", "credentials": "c-1"}

    ref = {"taskId": task_id, "id": created["id"]}
    assert client.rpc("GetTaskPushNotificationConfig", ref).result == created
    assert config_ids(client, task_id) == [created["id"]]

    deleted = client.rpc("DeleteTaskPushNotificationConfig", ref)
    assert deleted.json["result"] is None and "result" in deleted.json
    assert client.rpc("GetTaskPushNotificationConfig", ref).code == -32001
    again = client.rpc("DeleteTaskPushNotificationConfig", ref)  # idempotent (spec §3.1.10)
    assert "result" in again.json and again.json["result"] is None
    assert config_ids(client, task_id) == []


def test_unknown_config_id_is_not_found_to_get_and_null_to_delete(client: A2ATestClient) -> None:
    task_id = client.send("hi")["task"]["id"]
    ref = {"taskId": task_id, "id": "nope"}
    assert client.rpc("GetTaskPushNotificationConfig", ref).code == -32001
    deleted = client.rpc("DeleteTaskPushNotificationConfig", ref)
    assert "result" in deleted.json and deleted.json["result"] is None


def test_given_id_is_kept_and_replaced(client: A2ATestClient, webhook: Webhook) -> None:
    task_id = client.send("hi")["task"]["id"]
    assert create(client, task_id, webhook.url("/a"), id="cfg-1").result["id"] == "cfg-1"
    assert create(client, task_id, webhook.url("/b"), id="cfg-1").result["id"]
    assert config_ids(client, task_id) == ["cfg-1"]
    ref = {"taskId": task_id, "id": "cfg-1"}
    assert client.rpc("GetTaskPushNotificationConfig", ref).result["url"] == webhook.url("/b")


def test_create_needs_a_task_id_and_a_url(client: A2ATestClient, webhook: Webhook) -> None:
    task_id = client.send("hi")["task"]["id"]
    missing_task = client.rpc("CreateTaskPushNotificationConfig", {"url": webhook.url()})
    assert missing_task.code == -32602
    missing_url = client.rpc("CreateTaskPushNotificationConfig", {"taskId": task_id})
    assert missing_url.code == -32602
    assert config_ids(client, task_id) == []


def test_list_pages(client: A2ATestClient, webhook: Webhook) -> None:
    task_id = client.send("hi")["task"]["id"]
    for n in range(3):
        assert create(client, task_id, webhook.url(f"/{n}"), id=f"c{n}").result["id"]
    first = client.rpc("ListTaskPushNotificationConfigs", {"taskId": task_id, "pageSize": 2}).result
    assert [c["id"] for c in first["configs"]] == ["c0", "c1"]
    second = client.rpc(
        "ListTaskPushNotificationConfigs",
        {"taskId": task_id, "pageSize": 2, "pageToken": first["nextPageToken"]},
    ).result
    assert [c["id"] for c in second["configs"]] == ["c2"]
    assert not second.get("nextPageToken")
    bad = client.rpc("ListTaskPushNotificationConfigs", {"taskId": task_id, "pageToken": "-1"})
    assert bad.code == -32602


def test_inline_config_is_registered(client: A2ATestClient, webhook: Webhook) -> None:
    inline = {"url": webhook.url(), "token": "tok", "id": "inline-1"}
    task = client.send("hi", configuration={"taskPushNotificationConfig": inline})["task"]
    ref = {"taskId": task["id"], "id": "inline-1"}
    config = client.rpc("GetTaskPushNotificationConfig", ref).result
    assert config == {"id": "inline-1", "taskId": task["id"], "url": webhook.url(), "token": "tok"}


def test_inline_config_with_task_id_is_refused_and_nothing_written(
    client: A2ATestClient, webhook: Webhook
) -> None:
    params = {
        "message": client.message("hi"),
        "configuration": {"taskPushNotificationConfig": {"url": webhook.url(), "taskId": "x"}},
    }
    refused = client.rpc("SendMessage", params)
    assert refused.code == -32602
    assert "taskId" in refused.error["message"]
    assert task_count(client) == 0
    assert webhook.hits == []


def test_at_most_eight_configs_oldest_deleted(client: A2ATestClient, webhook: Webhook) -> None:
    task_id = client.send("hi")["task"]["id"]
    for n in range(10):
        assert create(client, task_id, webhook.url(f"/{n}"), id=f"c{n}").result["id"]
    assert config_ids(client, task_id) == [f"c{n}" for n in range(2, 10)]


def test_bound_is_a_config_key(make_app: t.Callable[..., Flask], webhook: Webhook) -> None:
    app = make_app(
        config={"A2A_ALLOW_PRIVATE_PUSH": True, "A2A_MAX_PUSH_CONFIGS_PER_TASK": 2},
        push_resolver=resolver,
    )
    client = A2ATestClient(app, token="alice")
    task_id = client.send("hi")["task"]["id"]
    for n in range(4):
        assert create(client, task_id, webhook.url(f"/{n}"), id=f"c{n}").result["id"]
    assert config_ids(client, task_id) == ["c2", "c3"]


def keeping_one(make_app: t.Callable[..., Flask]) -> Flask:
    """Private push allowed, and one settled task kept per tier: every send trims."""
    return make_app(
        config={"A2A_ALLOW_PRIVATE_PUSH": True, "A2A_TERMINAL_TASK_RETENTION": 1},
        push_resolver=resolver,
    )


def test_trimmed_task_takes_its_configs(make_app: t.Callable[..., Flask], webhook: Webhook) -> None:
    app = keeping_one(make_app)
    client = A2ATestClient(app, token="alice")
    inline = {"taskPushNotificationConfig": {"url": webhook.url(), "id": "c"}}
    first = client.send("one", configuration=inline)["task"]["id"]
    store = app.extensions["a2a"].exchange.store
    assert [c.id for c in store.list_push_configs(first)] == ["c"]
    next_millisecond()  # distinct timestamps: "one" is the older
    client.send("two")
    assert client.rpc("GetTask", {"id": first}).code == -32001
    assert store.list_push_configs(first) == []


def test_orphan_configs_go_at_the_next_trim(
    make_app: t.Callable[..., Flask], webhook: Webhook
) -> None:
    app = keeping_one(make_app)
    client = A2ATestClient(app, token="alice")
    store = app.extensions["a2a"].exchange.store
    # A config whose task a trim already deleted (registered while that trim ran).
    store.put_push_config("alice", PushConfig("orphan", "gone-task", webhook.url()), 8)
    client.send("one")
    assert [c.id for c in store.list_push_configs("gone-task")] == ["orphan"]
    client.send("two")  # settles and trims "one"
    assert store.list_push_configs("gone-task") == []


@pytest.mark.parametrize("intruder", ["bob", "alice-read", "alice-t2"])
def test_other_owner_scope_or_tenant_cannot_touch_configs(
    client: A2ATestClient, webhook: Webhook, intruder: str
) -> None:
    task_id = client.send("hi")["task"]["id"]
    assert create(client, task_id, webhook.url(), id="mine", caller="alice").result["id"]
    ref = {"taskId": task_id, "id": "mine"}

    assert create(client, task_id, webhook.url("/x"), caller=intruder).code == -32001
    assert create(client, task_id, webhook.url("/x"), id="mine", caller=intruder).code == -32001
    assert client.rpc("GetTaskPushNotificationConfig", ref, token=intruder).code == -32001
    listed = client.rpc("ListTaskPushNotificationConfigs", {"taskId": task_id}, token=intruder)
    assert listed.code == -32001
    assert client.rpc("DeleteTaskPushNotificationConfig", ref, token=intruder).code == -32001

    # Nothing was written, replaced or deleted.
    assert config_ids(client, task_id) == ["mine"]
    got = client.rpc("GetTaskPushNotificationConfig", ref).result
    assert got["url"] == webhook.url()


def test_inline_config_on_a_foreign_task_is_refused(
    client: A2ATestClient, webhook: Webhook
) -> None:
    """A follow-up to someone else's task cannot attach a webhook to it."""
    task_id = client.send("hi")["task"]["id"]
    params = {
        "message": client.message("more", task_id=task_id),
        "configuration": {"taskPushNotificationConfig": {"url": webhook.url("/bob")}},
    }
    assert client.rpc("SendMessage", params, token="bob").code == -32001
    assert config_ids(client, task_id) == []


# --------------------------------------------------------------------------- SSRF at registration

#: The local-use NAT64 prefix (RFC 8215) is refused whole; IPv4-translated is unwrapped.
WRAPPED = [
    ("http://[64:ff9b:1::a00:1]/hook", "local-use NAT64 prefix 64:ff9b:1::/48"),
    ("http://[::ffff:0:7f00:1]/hook", "embeds 127.0.0.1, which is loopback"),
    ("http://[64:ff9b:1::808:808]/hook", "local-use NAT64 prefix 64:ff9b:1::/48"),
    ("http://[64:ff9b:1:abcd::7f00:1]/hook", "local-use NAT64 prefix 64:ff9b:1::/48"),
    ("http://[::ffff:0:a00:1]/hook", "embeds 10.0.0.1, which is a private address"),
    ("http://[::ffff:0:a9fe:a9fe]/hook", "link-local"),
    ("http://nat64-local.test/hook", "local-use NAT64"),
    ("http://translated.test/hook", "loopback"),
]

REFUSED = [
    ("http://127.0.0.1/hook", "loopback"),
    ("http://127.8.9.10:8080/hook", "loopback"),
    ("http://[::1]/hook", "loopback"),
    ("http://127.1/hook", "loopback"),
    ("http://2130706433/hook", "loopback"),
    ("http://0x7f000001/hook", "loopback"),
    ("http://10.0.0.1/hook", "private"),
    ("http://172.16.5.4/hook", "private"),
    ("http://172.31.255.255/hook", "private"),
    ("http://192.168.0.10/hook", "private"),
    ("http://[fc00::1]/hook", "private"),
    ("http://100.64.0.1/hook", "CGNAT"),
    ("http://100.127.255.254/hook", "CGNAT"),
    ("http://169.254.169.254/latest/meta-data", "link-local"),
    ("http://[fe80::1]/hook", "link-local"),
    ("http://0.0.0.0/hook", "unspecified"),
    ("http://[::]/hook", "unspecified"),
    ("http://224.0.0.1/hook", "multicast"),
    ("http://[ff02::1]/hook", "multicast"),
    ("http://[::ffff:127.0.0.1]/hook", "loopback"),
    ("http://[::ffff:10.0.0.1]/hook", "private"),
    ("http://[::ffff:100.64.0.1]/hook", "CGNAT"),
    ("http://[2002:7f00:1::]/hook", "loopback"),
    ("http://[2002:c0a8:1::1]/hook", "private"),
    ("http://[2002:a9fe:a9fe::]/hook", "link-local"),
    ("http://[64:ff9b::7f00:1]/hook", "loopback"),
    ("http://[64:ff9b::a9fe:a9fe]/hook", "link-local"),
    ("http://[::127.0.0.1]/hook", "loopback"),
    *WRAPPED,
    ("http://localhost:8080/hook", "loopback"),
    ("http://internal.test/hook", "private"),
    ("https://metadata.test/hook", "link-local"),
    ("http://mixed.test/hook", "loopback"),
    ("ftp://hooks.test/hook", "http or https"),
    ("file:///etc/passwd", "http or https"),
    ("gopher://hooks.test/", "http or https"),
    ("http:///no-host", "no host"),
    ("http://user:pw@hooks.test/hook", "credentials"),
    ("http://hooks.test:99999/hook", "not a valid URL"),
]


@pytest.fixture
def strict(make_app: t.Callable[..., Flask]) -> A2ATestClient:
    """Private push refused (the default); names resolve through the test resolver."""
    return A2ATestClient(make_app(push_resolver=resolver), token="alice")


@pytest.mark.parametrize(("url", "why"), REFUSED)
def test_refused_at_create_and_nothing_written(strict: A2ATestClient, url: str, why: str) -> None:
    task_id = strict.send("hi")["task"]["id"]
    refused = create(strict, task_id, url)
    assert refused.code == -32602
    assert why in refused.error["message"]
    assert config_ids(strict, task_id) == []


@pytest.mark.parametrize(("url", "why"), REFUSED[:3] + REFUSED[-9:-5] + WRAPPED[:2])
def test_refused_inline_and_no_task_written(strict: A2ATestClient, url: str, why: str) -> None:
    refused = strict.rpc(
        "SendMessage",
        {
            "message": strict.message("hi"),
            "configuration": {"taskPushNotificationConfig": {"url": url}},
        },
    )
    assert refused.code == -32602
    assert why in refused.error["message"]
    assert task_count(strict) == 0


def test_refusal_message_names_the_setting(strict: A2ATestClient) -> None:
    task_id = strict.send("hi")["task"]["id"]
    message = create(strict, task_id, "http://10.0.0.1/").error["message"]
    assert "A2A_ALLOW_PRIVATE_PUSH" in message
    assert "10.0.0.1" in message


def test_name_that_does_not_resolve_yet_is_accepted(strict: A2ATestClient) -> None:
    """Registration cannot know a future address; the dial-time guard checks it then."""
    task_id = strict.send("hi")["task"]["id"]
    assert create(strict, task_id, "https://not-yet.test/hook").result["url"]
    assert len(config_ids(strict, task_id)) == 1


def test_allow_private_push_permits_loopback(client: A2ATestClient, webhook: Webhook) -> None:
    task_id = client.send("hi")["task"]["id"]
    assert create(client, task_id, webhook.url()).result["url"] == webhook.url()
    assert create(client, task_id, "ftp://127.0.0.1/").code == -32602  # the scheme still counts
    assert len(config_ids(client, task_id)) == 1


# ------------------------------------------------- DeleteTaskPushNotificationConfig is idempotent


def test_delete_is_idempotent_for_the_owner_and_not_found_for_others(
    client: A2ATestClient, webhook: Webhook
) -> None:
    task_id = client.send("hi")["task"]["id"]
    assert create(client, task_id, webhook.url(), id="mine").result["id"] == "mine"
    assert create(client, task_id, webhook.url("/2"), id="other").result["id"] == "other"
    ref = {"taskId": task_id, "id": "mine"}

    # The wrong caller cannot delete, and cannot tell the config from a missing one.
    for intruder in ("bob", "alice-t2"):
        refused = client.rpc("DeleteTaskPushNotificationConfig", ref, token=intruder)
        assert refused.code == -32001 and refused.error["message"] == "Task not found"
    assert config_ids(client, task_id) == ["mine", "other"]

    for _ in range(3):  # the first deletes, the next ones answer the same
        deleted = client.rpc("DeleteTaskPushNotificationConfig", ref)
        assert deleted.json == {"jsonrpc": "2.0", "id": deleted.json["id"], "result": None}
    never = client.rpc("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "never"})
    assert "result" in never.json and never.json["result"] is None
    assert config_ids(client, task_id) == ["other"]

    # Once gone, it is still the task that decides what others hear: -32001, not null.
    refused = client.rpc("DeleteTaskPushNotificationConfig", ref, token="bob")
    assert refused.code == -32001
    unknown_task = client.rpc("DeleteTaskPushNotificationConfig", {"taskId": "nope", "id": "x"})
    assert unknown_task.code == -32001 and unknown_task.error["message"] == "Task not found"
