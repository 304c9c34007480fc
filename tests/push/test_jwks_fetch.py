"""The receiver's JWKS fetch and token parsing under attack, over real sockets on 127.0.0.1.

A JWKS server that drips, one that redirects, one that sends megabytes or too many keys, and
``Cache-Control: max-age=0`` with forged kids; then tokens built to break the parser. The
verifier must answer each with a :class:`NotificationRejected`, within its bounds.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
import typing as t

import pytest
import requests
from flask import Flask, Response, redirect

from examples.push_receiver import create_receiver, expect
from flask_a2a import NotificationRejected
from flask_a2a.card.signing import SigningKey
from flask_a2a.protocol.model import PushConfig
from flask_a2a.push import NotificationVerifier, verify_notification
from flask_a2a.push.tokens import NotificationSigner
from flask_a2a.push.verify import (
    MAX_JWKS_BYTES,
    MAX_JWKS_KEYS,
    MAX_SEGMENT_CHARS,
    MIN_REFETCH,
    JWKSCache,
)
from tests.card.test_signing import ec_key
from tests.live_server import HOST, werkzeug_server
from tests.push.test_push_delivery import Clock

HOOK = "https://hooks.example/a2a"


class Posted:
    def __init__(self, headers: dict[str, str], body: bytes = b"{}") -> None:
        self.headers, self.body = headers, body


def signed(key: SigningKey, jti: str = "n1") -> Posted:
    headers: dict[str, str] = {}
    config = PushConfig(id="hook-1", task_id="task-1", url=HOOK, token="tok")
    NotificationSigner([key], None).add_to(headers, config, jti, b"{}")
    return Posted(headers)


def reason_of(check: NotificationVerifier, posted: Posted) -> str:
    with pytest.raises(NotificationRejected) as caught:
        check.verify(posted)
    return caught.value.reason


class DripServer:
    """Answers every connection one byte of a response head every ``every`` seconds, until
    ``drip`` seconds have passed or the test ends; counts connections."""

    def __init__(self, drip: float, every: float = 0.2) -> None:
        self.drip, self.every = drip, every
        self.connections = 0
        self.stop = threading.Event()
        self.sock = socket.create_server((HOST, 0))
        self.url = f"http://{HOST}:{self.sock.getsockname()[1]}/jwks.json"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"z" * 200
        ends = time.monotonic() + self.drip
        with conn:
            conn.recv(4096)
            for n in range(len(head)):  # bounded by the head's length and by ``drip``
                if self.stop.wait(self.every) or time.monotonic() > ends:
                    return
                try:
                    conn.sendall(head[n : n + 1])
                except OSError:
                    return  # the verifier gave up and shut its socket

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def drip_server() -> t.Iterator[DripServer]:
    server = DripServer(drip=12.0)
    try:
        yield server
    finally:
        server.close()


def test_a_dripping_jwks_costs_each_verify_one_deadline_and_is_fetched_once(
    drip_server: DripServer,
) -> None:
    monotonic = Clock()
    cache = JWKSCache(drip_server.url, allow_http=True, timeout=1.0, clock=monotonic)
    check = NotificationVerifier(cache, audience=HOOK)
    key = ec_key("k")
    outcomes: list[tuple[float, str]] = []
    lock = threading.Lock()

    def one(n: int) -> None:
        started = time.monotonic()
        reason = reason_of(check, signed(key, f"d{n}"))
        with lock:
            outcomes.append((time.monotonic() - started, reason))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    # Before: 12, 24 and 36 s (each waited for the lock, then fetched for itself).
    assert [reason for _, reason in outcomes] == ["jwks_unavailable"] * 3
    assert max(seconds for seconds, _ in outcomes) < 5.0, outcomes
    assert drip_server.connections == 1  # one fetch; the others waited for it
    # The failure is remembered: no fetch again within MIN_REFETCH, and no wait.
    started = time.monotonic()
    assert reason_of(check, signed(key, "d4")) == "jwks_unavailable"
    assert time.monotonic() - started < 1.0
    assert (drip_server.connections, cache.fetches) == (1, 1)
    monotonic.now += MIN_REFETCH
    assert reason_of(check, signed(key, "d5")) == "jwks_unavailable"
    assert (drip_server.connections, cache.fetches) == (2, 2)


class JWKS:
    """A JWKS server: ``keys`` and ``cache_control`` as the test sets them; counts fetches."""

    def __init__(self, keys: t.Sequence[SigningKey] = ()) -> None:
        self.keys = list(keys)
        self.cache_control = "max-age=300"
        self.fetches = 0
        self.app = Flask("jwks")
        self.app.add_url_rule("/jwks.json", "jwks", self.view)

    def view(self) -> Response:
        self.fetches += 1
        body = json.dumps({"keys": [key.jwk() for key in self.keys]})
        headers = {"Cache-Control": self.cache_control}
        return Response(body, 200, headers, mimetype="application/json")


@contextlib.contextmanager
def serving(app: Flask) -> t.Iterator[str]:
    with werkzeug_server(app) as base:
        yield base


@pytest.mark.parametrize("cache_control", ["max-age=0", "no-cache", "no-store, max-age=0"])
def test_forged_kids_fetch_at_most_once_per_min_refetch(cache_control: str) -> None:
    real = ec_key("real")
    jwks = JWKS([real])
    jwks.cache_control = cache_control
    with serving(jwks.app) as base:
        monotonic = Clock()
        cache = JWKSCache(base + "/jwks.json", allow_http=True, clock=monotonic)
        check = NotificationVerifier(cache, audience=HOOK)
        check.verify(signed(real, "first"))
        assert jwks.fetches == 1
        reasons = {reason_of(check, signed(ec_key(f"forged-{n}"), f"f{n}")) for n in range(30)}
        assert reasons == {"unknown_kid"}
        assert jwks.fetches == 1  # before: 30 fetches for 30 forged kids
        check.verify(signed(real, "second"))  # the real key still verifies, from the cache
        monotonic.now += MIN_REFETCH
        assert reason_of(check, signed(ec_key("forged-31"), "f31")) == "unknown_kid"
        assert jwks.fetches == 2


def test_a_redirect_is_not_followed() -> None:
    real, elsewhere = ec_key("k"), ec_key("k")
    other = JWKS([elsewhere])
    with serving(other.app) as other_base:
        moved = Flask("moved")
        moved.add_url_rule(
            "/jwks.json", "jwks", lambda: redirect(other_base + "/jwks.json", code=302)
        )
        with serving(moved) as base:
            check = NotificationVerifier(base + "/jwks.json", audience=HOOK, allow_http=True)
            with pytest.raises(NotificationRejected) as caught:
                check.verify(signed(elsewhere))  # before: the other server's key verified it
            assert caught.value.reason == "jwks_unavailable"
            assert "redirects are not followed" in str(caught.value)
            assert other.fetches == 0
            assert reason_of(check, signed(real, "n2")) == "jwks_unavailable"


def test_an_http_jwks_url_needs_the_opt_in() -> None:
    key = ec_key("k")
    with serving(JWKS([key]).app) as base:
        url = base + "/jwks.json"
        for build in (
            lambda: JWKSCache(url),
            lambda: NotificationVerifier(url, audience=HOOK),
            lambda: verify_notification(signed(key), url, audience=HOOK),
        ):
            with pytest.raises(ValueError, match="must be https"):
                build()
        with pytest.raises(ValueError, match="must be https"):
            JWKSCache("ftp://agent.example/jwks.json", allow_http=True)
        assert verify_notification(signed(key), url, audience=HOOK, allow_http=True).jti == "n1"


def huge_jwks(keys: int, length: bool) -> Flask:
    """A JWKS of ``keys`` keys (a fresh P-256 one repeated under new kids), streamed."""
    jwk = ec_key("x").jwk()
    app = Flask("huge")

    def body() -> t.Iterator[bytes]:
        yield b'{"keys":['
        for n in range(keys):
            yield (b"," if n else b"") + json.dumps({**jwk, "kid": f"k{n}"}).encode()
        yield b"]}"

    def view() -> Response:
        if length:
            data = b"".join(body())
            return Response(data, 200, mimetype="application/json")
        return Response(body(), 200, mimetype="application/json")  # chunked, no length

    app.add_url_rule("/jwks.json", "jwks", view)
    return app


@pytest.mark.parametrize(
    "keys,length", [(1_000, True), (300_000, False)], ids=["content-length", "chunked-46MB"]
)
def test_a_huge_jwks_is_refused_without_being_read_whole(keys: int, length: bool) -> None:
    key = ec_key("k")
    with serving(huge_jwks(keys, length)) as base:
        cache = JWKSCache(base + "/jwks.json", allow_http=True)
        check = NotificationVerifier(cache, audience=HOOK)
        with pytest.raises(NotificationRejected) as caught:
            check.verify(signed(key))
        assert caught.value.reason == "jwks_unavailable"
        assert f"{MAX_JWKS_BYTES}-byte limit" in str(caught.value)
        assert cache._keys == {}


def test_a_jwks_with_too_many_keys_is_refused() -> None:
    key = ec_key("k0")
    small = json.dumps({**key.jwk(), "kid": "k0"})
    assert len(small) * (MAX_JWKS_KEYS + 1) < MAX_JWKS_BYTES  # the key count is what refuses
    with serving(huge_jwks(MAX_JWKS_KEYS + 1, True)) as base:
        check = NotificationVerifier(base + "/jwks.json", audience=HOOK, allow_http=True)
        with pytest.raises(NotificationRejected) as caught:
            check.verify(signed(key))
        assert caught.value.reason == "jwks_unavailable"
        assert f"over the limit of {MAX_JWKS_KEYS}" in str(caught.value)
    with serving(huge_jwks(MAX_JWKS_KEYS, True)) as base:
        check = NotificationVerifier(base + "/jwks.json", audience=HOOK, allow_http=True)
        assert reason_of(check, signed(key)) == "signature"  # read: k0 is another key


# ------------------------------------------------------------------ tokens built to break it


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


HEADER = b64(b'{"alg":"ES256","kid":"k","typ":"JWT"}')
CLAIMS = b64(b'{"aud":"https://hooks.example/a2a"}')
NESTED = b64(b"[" * 1100 + b"]" * 1100)
LIST_KID = b64(b'{"alg":"ES256","kid":[[[1]]]}')
NUMBER_ALG = b64(b'{"alg":1,"kid":"k"}')

BAD_TOKENS = {
    "nested claims, 1,100 deep": f"{HEADER}.{NESTED}.c2ln",
    "nested header, 1,100 deep": f"{NESTED}.{CLAIMS}.c2ln",
    "a header over the limit": f"{'A' * (MAX_SEGMENT_CHARS[0] + 1)}.{CLAIMS}.c2ln",
    "claims over the limit": f"{HEADER}.{'A' * (MAX_SEGMENT_CHARS[1] + 1)}.c2ln",
    "a signature over the limit": f"{HEADER}.{CLAIMS}.{'A' * (MAX_SEGMENT_CHARS[2] + 1)}",
    "four parts": f"{HEADER}.{CLAIMS}.c2ln.c2ln",
    "two parts": f"{HEADER}.{CLAIMS}",
    "claims that are a list": f"{HEADER}.{b64(b'[1]')}.c2ln",
    "a kid that is a list": f"{LIST_KID}.{CLAIMS}.c2ln",
    "an alg that is a number": f"{NUMBER_ALG}.{CLAIMS}.c2ln",
    "not base64 JSON": f"{b64(b'not json')}.{CLAIMS}.c2ln",
    "not ASCII": f"{HEADER}.{CLAIMS}.c2ln\u00e9",
}


@pytest.fixture(scope="module")
def receiver_url() -> t.Iterator[tuple[str, SigningKey]]:
    key = ec_key("k")
    app = create_receiver({"keys": [key.jwk()]}, HOOK)
    expect(app, "tok")
    with werkzeug_server(app) as base:
        yield base + "/a2a", key


@pytest.mark.parametrize("token", BAD_TOKENS.values(), ids=BAD_TOKENS.keys())
def test_a_token_built_to_break_the_parser_is_malformed(
    token: str, receiver_url: tuple[str, SigningKey]
) -> None:
    url, key = receiver_url
    assert len(token) < 20_000
    check = NotificationVerifier({"keys": [key.jwk()]}, audience=HOOK)
    with pytest.raises(NotificationRejected) as caught:
        check.verify_parts(token, b"{}")
    assert caught.value.reason == "malformed"  # before, nested: RecursionError
    # A receiver written as the docs show answers 401, not 500.
    headers = {"A2A-Notification-Token": "tok", "A2A-Notification-JWT": token}
    answer = requests.post(url, data=b"{}", headers=headers, timeout=10)
    assert (answer.status_code, answer.json()) == (401, {"error": "malformed"})
