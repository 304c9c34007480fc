"""The push address guard at dial time, caller-supplied sessions, and proxies being ignored.

Resolvers here are test seams: every address a test connects to is on 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import threading
import typing as t

import pytest
import requests
from flask import Flask
from requests.adapters import HTTPAdapter

from flask_a2a.push import ssrf
from flask_a2a.push.webhooks import PushSender
from flask_a2a.testing import A2ATestClient
from tests.webhook import Webhook, wait_until


class Rebinding:
    """Answers a public address for the first lookup and loopback after (DNS rebinding)."""

    #: Only ever returned as a string; a guard that is not fooled never connects to it.
    PUBLIC = "93.184.215.14"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, host: str) -> list[str]:
        with self._lock:
            self.calls.append(host)
            return [self.PUBLIC] if len(self.calls) == 1 else ["127.0.0.1"]


def loopback(host: str) -> list[str]:
    return ["127.0.0.1"]


@pytest.fixture(autouse=True)
def _logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="flask_a2a")


def idle(app: Flask) -> None:
    dispatcher = t.cast(PushSender, app.extensions["a2a"].exchange.push).dispatcher
    wait_until(lambda: dispatcher.in_flight == 0 and dispatcher.waiting == 0)


def register(client: A2ATestClient, url: str) -> t.Any:
    """An echo task with an inline config: three notifications (snapshot, artifact, done)."""
    task = client.send("hi", configuration={"taskPushNotificationConfig": {"url": url}})["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return task


def log_lines(caplog: pytest.LogCaptureFixture, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if needle in r.getMessage()]


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "2606:4700::1111",
        "::ffff:8.8.8.8",
        "::ffff:0:808:808",  # IPv4-translated: judged by the address inside
        "2002:808:808::1",
        "64:ff9b::808:808",
    ],
)
def test_public_addresses_pass_the_policy(address: str) -> None:
    assert ssrf.refusal(ipaddress.ip_address(address)) is None


#: Wrapped private addresses a name may rebind to after registration, and why each is refused.
WRAPPED = [
    ("64:ff9b:1::a00:1", "is in the local-use NAT64 prefix 64:ff9b:1::/48"),  # 10.0.0.1
    ("::ffff:0:7f00:1", "embeds 127.0.0.1, which is loopback"),  # IPv4-translated
]


class RebindingTo(Rebinding):
    """Public for the registration's lookup, then ``address``."""

    def __init__(self, address: str) -> None:
        super().__init__()
        self.address = address

    def __call__(self, host: str) -> list[str]:
        answer = super().__call__(host)
        return answer if answer == [self.PUBLIC] else [self.address]


@pytest.mark.parametrize(("address", "why"), WRAPPED)
def test_wrapped_private_address_is_refused_at_dial_time(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture, address: str, why: str
) -> None:
    resolver = RebindingTo(address)
    client = A2ATestClient(make_app(push_resolver=resolver), token="alice")
    register(client, "http://rebind.test:9/hook")  # public at registration
    wait_until(lambda: len(log_lines(caplog, "push delivery failed")) == 3)
    idle(client.app)
    assert resolver.calls == ["rebind.test"] * 4
    for line in log_lines(caplog, "push delivery failed"):
        assert f"push address refused: rebind.test ({address}) {why}" in line


@pytest.mark.parametrize(("address", "why"), WRAPPED)
def test_wrapped_private_address_is_refused_by_the_policy(address: str, why: str) -> None:
    policy = ssrf.AddressPolicy(lambda host: [address])
    with pytest.raises(ssrf.RefusedAddressError, match=re.escape(why)):
        policy.addresses("hooks.test")
    assert ssrf.AddressPolicy(lambda host: [address], allow_private=True).addresses("h") == [
        address
    ]


def test_name_rebinding_to_private_is_refused_at_dial_time(
    make_app: t.Callable[..., Flask], webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    resolver = Rebinding()
    client = A2ATestClient(make_app(push_resolver=resolver), token="alice")
    register(client, f"http://rebind.test:{webhook.port}/hook")  # public at registration
    wait_until(lambda: len(log_lines(caplog, "push delivery failed")) == 3)
    idle(client.app)
    assert resolver.calls == ["rebind.test"] * 4  # registration, then one per dial
    for line in log_lines(caplog, "push delivery failed"):
        assert "push address refused" in line and "loopback" in line
    assert webhook.hits == []


def test_guard_connects_to_the_checked_address_and_keeps_the_name(
    make_app: t.Callable[..., Flask], webhook: Webhook
) -> None:
    app = make_app(config={"A2A_ALLOW_PRIVATE_PUSH": True}, push_resolver=loopback)
    client = A2ATestClient(app, token="alice")
    register(client, f"http://hooks.test:{webhook.port}/hook")
    hits = webhook.wait_for(3)
    assert {hit.headers["Host"] for hit in hits} == {f"hooks.test:{webhook.port}"}


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> t.Iterator[Webhook]:
    """A listener every *_PROXY variable points at; it records whatever reaches it."""
    listener = Webhook()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, listener.url(""))
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield listener
    listener.close()


def test_proxy_env_would_be_used_by_plain_requests(proxy: Webhook, webhook: Webhook) -> None:
    """The control: with these variables, an ordinary requests call goes to the proxy."""
    with requests.Session() as session:
        session.post(webhook.url("/direct"), data=b"{}", timeout=5).close()
    assert len(proxy.wait_for(1)) == 1
    assert webhook.hits == []


@pytest.mark.parametrize("caller_session", [False, True])
def test_push_ignores_proxy_env(
    make_app: t.Callable[..., Flask], proxy: Webhook, webhook: Webhook, caller_session: bool
) -> None:
    options: dict[str, t.Any] = {"push_resolver": loopback}
    if caller_session:
        options["push_client"] = requests.Session()  # trust_env on, as a session starts
    app = make_app(config={"A2A_ALLOW_PRIVATE_PUSH": True}, **options)
    client = A2ATestClient(app, token="alice")
    register(client, webhook.url())
    webhook.wait_for(3)
    idle(app)
    assert proxy.hits == []


def test_plain_caller_session_gets_the_dial_time_guard(
    make_app: t.Callable[..., Flask], webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    session = requests.Session()
    session.headers["User-Agent"] = "caller-agent"
    resolver = Rebinding()
    client = A2ATestClient(make_app(push_resolver=resolver, push_client=session), token="alice")
    push = t.cast(PushSender, client.app.extensions["a2a"].exchange.push)
    assert isinstance(push.client, ssrf.GuardedClient)
    register(client, f"http://rebind.test:{webhook.port}/hook")
    wait_until(lambda: len(log_lines(caplog, "push address refused")) == 3)
    assert webhook.hits == []
    # The caller's own session is left as it was; the clone keeps its settings.
    assert all(type(a) is HTTPAdapter for a in session.adapters.values())
    assert session.trust_env is True
    clone = push.client.session
    assert clone.headers["User-Agent"] == "caller-agent"
    assert all(isinstance(a, ssrf.GuardedAdapter) for a in clone.adapters.values())


def test_plain_caller_session_settings_reach_the_receiver(
    make_app: t.Callable[..., Flask], webhook: Webhook
) -> None:
    session = requests.Session()
    session.headers["User-Agent"] = "caller-agent"
    app = make_app(
        config={"A2A_ALLOW_PRIVATE_PUSH": True}, push_resolver=loopback, push_client=session
    )
    register(A2ATestClient(app, token="alice"), webhook.url())
    hits = webhook.wait_for(3)
    assert {hit.headers["User-Agent"] for hit in hits} == {"caller-agent"}


class Recording(HTTPAdapter):
    """A custom adapter (not a plain HTTPAdapter): gets the resolve-then-check guard."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []

    def send(self, request: requests.PreparedRequest, *args: t.Any, **kwargs: t.Any) -> t.Any:
        self.sent.append(str(request.url))
        return super().send(request, *args, **kwargs)


def test_custom_adapter_gets_resolve_then_check(
    make_app: t.Callable[..., Flask], webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = Recording()
    session = requests.Session()
    session.mount("http://", adapter)
    resolver = Rebinding()
    client = A2ATestClient(make_app(push_resolver=resolver, push_client=session), token="alice")
    push = t.cast(PushSender, client.app.extensions["a2a"].exchange.push)
    assert isinstance(push.client, ssrf.CheckedClient)
    register(client, f"http://rebind.test:{webhook.port}/hook")
    wait_until(lambda: len(log_lines(caplog, "push address refused")) == 3)
    idle(client.app)
    assert adapter.sent == []  # refused before the adapter was asked
    assert webhook.hits == []


def test_custom_adapter_keeps_its_routing_when_allowed(
    make_app: t.Callable[..., Flask], webhook: Webhook
) -> None:
    adapter = Recording()
    session = requests.Session()
    session.mount("http://", adapter)
    app = make_app(
        config={"A2A_ALLOW_PRIVATE_PUSH": True}, push_resolver=loopback, push_client=session
    )
    register(A2ATestClient(app, token="alice"), webhook.url())
    webhook.wait_for(3)
    idle(app)
    assert adapter.sent == [webhook.url()] * 3


def test_session_with_proxies_is_not_plain() -> None:
    session = requests.Session()
    session.proxies = {"http": "http://127.0.0.1:9"}
    assert not ssrf.is_plain(session)
    assert isinstance(ssrf.build_client(session, ssrf.AddressPolicy(loopback)), ssrf.CheckedClient)
    assert isinstance(ssrf.build_client(None, ssrf.AddressPolicy(loopback)), ssrf.GuardedClient)


def test_guarded_adapter_refuses_to_proxy() -> None:
    adapter = ssrf.GuardedAdapter(ssrf.AddressPolicy(loopback))
    with pytest.raises(requests.exceptions.InvalidProxyURL):
        adapter.proxy_manager_for("http://127.0.0.1:9")
    adapter.close()


def test_guarded_session_refuses_private_at_dial(webhook: Webhook) -> None:
    """The client on its own: a loopback receiver is refused, so it never sees the request."""
    session = ssrf.guarded_session(ssrf.AddressPolicy(loopback))
    with pytest.raises(requests.exceptions.ConnectionError, match="push address refused"):
        session.post(webhook.url(), data=b"{}", timeout=5, allow_redirects=False)
    session.close()
    assert webhook.hits == []


@pytest.mark.parametrize("host", ["127.0.0.1", "hooks.test"])
def test_https_dials_are_guarded_too(webhook: Webhook, host: str) -> None:
    """The TLS connection class checks before any handshake (the name stays for SNI)."""
    session = ssrf.guarded_session(ssrf.AddressPolicy(loopback))
    with pytest.raises(requests.exceptions.ConnectionError, match="push address refused"):
        session.post(f"https://{host}:{webhook.port}/", data=b"{}", timeout=5)
    session.close()
    assert webhook.hits == []
