"""Signed push notifications, checked by a real receiver (examples/push_receiver.py) over a socket.

The agent delivers to the receiver on 127.0.0.1; the receiver verifies with
``verify_notification`` against a JWKS served by a local server the test controls (so a key can
be published, rotated and removed). Unit cases at the end drive the verifier's clock.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import typing as t

import pytest
import requests
from flask import Flask, Response

from examples.push_receiver import create_receiver
from flask_a2a.card.signing import SigningKey
from flask_a2a.push import NotificationRejected, NotificationVerifier, ReplayedNotification
from flask_a2a.push.tokens import JWT_HEADER, TOKEN_LIFETIME, NotificationSigner
from flask_a2a.testing import A2ATestClient
from tests.card.test_signing import ec_key, rsa_key
from tests.live_server import werkzeug_server
from tests.push.test_push_delivery import Clock

BASE_URL = "https://agent.example"


class JWKSServer:
    """Serves the keys the test publishes; counts fetches. ``max_age`` is its Cache-Control."""

    def __init__(self, keys: t.Sequence[SigningKey], max_age: int = 300) -> None:
        self.keys = list(keys)
        self.max_age = max_age
        self.fetches = 0
        self.app = Flask("jwks")
        self.app.add_url_rule("/jwks.json", "jwks", self.view)

    def view(self) -> Response:
        self.fetches += 1
        body = json.dumps({"keys": [key.jwk() for key in self.keys]})
        return Response(
            body, 200, {"Cache-Control": f"max-age={self.max_age}"}, mimetype="application/json"
        )


class Receiver:
    """examples/push_receiver.py on a live server; records its answers and what reached it
    (header names lower-cased)."""

    def __init__(self, base: str, app: Flask) -> None:
        self.url = base + "/a2a"
        self.app = app
        self.answers: list[tuple[int, bytes, dict[str, str], bytes]] = []
        self.cond = threading.Condition()

        @app.after_request
        def record(response: Response) -> Response:
            from flask import request

            with self.cond:
                self.answers.append(
                    (
                        response.status_code,
                        response.get_data(),
                        {k.lower(): v for k, v in request.headers.items()},
                        request.get_data(),
                    )
                )
                self.cond.notify_all()
            return response

    @property
    def accepted(self) -> list[tuple[str, t.Any]]:
        return t.cast(list[tuple[str, t.Any]], self.app.extensions["notifications"])

    def wait_answers(self, count: int) -> list[tuple[int, bytes, dict[str, str], bytes]]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.answers) >= count, 10), self.answers
            return list(self.answers)


@pytest.fixture
def jwks_server() -> t.Iterator[tuple[JWKSServer, str]]:
    server = JWKSServer([])
    with werkzeug_server(server.app) as base:
        yield server, base + "/jwks.json"


@pytest.fixture
def receiver(jwks_server: tuple[JWKSServer, str]) -> t.Iterator[Receiver]:
    _, jwks_url = jwks_server
    app = create_receiver(jwks_url, "placeholder", {})
    with werkzeug_server(app) as base:
        app.config["WEBHOOK_URL"] = base + "/a2a"
        yield Receiver(base, app)


def agent(make_app: t.Callable[..., Flask], keys: t.Sequence[SigningKey]) -> A2ATestClient:
    app = make_app(
        signing_keys=keys,
        config={"A2A_ALLOW_PRIVATE_PUSH": True, "A2A_PUBLIC_BASE_URL": BASE_URL},
    )
    return A2ATestClient(app, token="alice")


def send(client: A2ATestClient, url: str, **config: t.Any) -> dict[str, t.Any]:
    task = client.send("hi", configuration={"taskPushNotificationConfig": {"url": url, **config}})
    return t.cast(dict[str, t.Any], task["task"])


def claims_of(token: str) -> dict[str, t.Any]:
    payload = token.split(".")[1]
    return t.cast(dict[str, t.Any], json.loads(base64.urlsafe_b64decode(payload + "==")))


def test_signed_notifications_verify_and_carry_the_claims(
    make_app: t.Callable[..., Flask], receiver: Receiver, jwks_server: tuple[JWKSServer, str]
) -> None:
    server, _ = jwks_server
    key = ec_key("k1")
    server.keys = [key]
    client = agent(make_app, [key])
    task = send(client, receiver.url, token="per-task-secret")
    answers = receiver.wait_answers(3)  # snapshot, artifact, COMPLETED
    assert [a[0] for a in answers] == [204, 204, 204]
    assert [event for _, event in receiver.accepted][-1]["statusUpdate"]["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )
    jtis = set()
    for _, _, headers, body in answers:
        scheme, _, token = headers["authorization"].partition(" ")
        assert scheme == "Bearer"
        assert headers["x-a2a-notification-token"] == "per-task-secret"  # still sent
        header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
        assert header == {"alg": "ES256", "kid": "k1", "typ": "JWT"}
        claims = claims_of(token)
        assert claims["iss"] == BASE_URL and claims["aud"] == receiver.url
        assert claims["taskId"] == task["id"]
        assert claims["exp"] - claims["iat"] == TOKEN_LIFETIME
        assert claims["request_body_sha256"] == hashlib.sha256(body).hexdigest()
        jtis.add(claims["jti"])
    assert len(jtis) == 3
    assert server.fetches == 1  # cached by kid


def test_config_authentication_keeps_authorization_and_the_jwt_moves(
    make_app: t.Callable[..., Flask], receiver: Receiver, jwks_server: tuple[JWKSServer, str]
) -> None:
    server, _ = jwks_server
    server.keys = [rsa_key("r1")]
    client = agent(make_app, server.keys)
    send(client, receiver.url, authentication={"scheme": "Bearer", "credentials": "hook-key"})
    answers = receiver.wait_answers(3)
    assert [a[0] for a in answers] == [204, 204, 204]
    for _, _, headers, _ in answers:
        assert headers["authorization"] == "Bearer hook-key"
        protected = headers[JWT_HEADER.lower()].split(".")[0]
        assert json.loads(base64.urlsafe_b64decode(protected + "=="))["alg"] == "RS256"


def repost(receiver: Receiver, headers: dict[str, str], body: bytes) -> requests.Response:
    sent = {k: v for k, v in headers.items() if k.lower() not in ("host", "content-length")}
    return requests.post(receiver.url, data=body, headers=sent, timeout=10)


def test_tampered_body_and_replay_are_refused(
    make_app: t.Callable[..., Flask], receiver: Receiver, jwks_server: tuple[JWKSServer, str]
) -> None:
    server, _ = jwks_server
    server.keys = [ec_key("k1")]
    client = agent(make_app, server.keys)
    send(client, receiver.url)
    answers = receiver.wait_answers(3)
    assert len(receiver.accepted) == 3
    status, _, headers, body = answers[-1]
    assert status == 204
    tampered = body.replace(b"TASK_STATE_COMPLETED", b"TASK_STATE_FAILED")
    refused = repost(receiver, headers, tampered)
    assert (refused.status_code, refused.json()) == (401, {"error": "body_mismatch"})
    replayed = repost(receiver, headers, body)
    assert replayed.status_code == 200  # acknowledged, not acted on
    assert len(receiver.accepted) == 3
    unsigned = {k: v for k, v in headers.items() if k != "authorization"}
    assert repost(receiver, unsigned, body).json() == {"error": "no_token"}


def test_unknown_kid_fetches_the_jwks_once_more_and_is_refused(
    make_app: t.Callable[..., Flask], receiver: Receiver, jwks_server: tuple[JWKSServer, str]
) -> None:
    server, _ = jwks_server
    published = ec_key("published")
    server.keys = [published]
    send(agent(make_app, [published]), receiver.url)
    assert [a[0] for a in receiver.wait_answers(3)] == [204, 204, 204]
    assert server.fetches == 1
    send(agent(make_app, [ec_key("stranger")]), receiver.url)
    answers = receiver.wait_answers(6)
    assert [a[0] for a in answers[3:]] == [401, 401, 401]
    assert all(json.loads(a[1]) == {"error": "unknown_kid"} for a in answers[3:])
    # One re-fetch for the unknown kid; the next misses within MIN_REFETCH do not fetch again.
    assert server.fetches == 2


def test_key_rotation_old_kid_verifies_until_removed_from_the_jwks(
    make_app: t.Callable[..., Flask], receiver: Receiver, jwks_server: tuple[JWKSServer, str]
) -> None:
    server, _ = jwks_server
    server.max_age = 0  # the receiver re-reads the JWKS each time: removal is seen at once
    old, new = ec_key("old"), ec_key("new")
    server.keys = [old]
    send(agent(make_app, [old]), receiver.url)
    assert [a[0] for a in receiver.wait_answers(3)] == [204] * 3
    # Rotation: the new key signs, the old one stays published.
    server.keys = [new, old]
    send(agent(make_app, [new, old]), receiver.url)
    send(agent(make_app, [old]), receiver.url)  # a replica not yet rotated
    assert [a[0] for a in receiver.wait_answers(9)] == [204] * 9
    # The old key is removed from the JWKS: its notifications stop verifying; the new verify.
    server.keys = [new]
    send(agent(make_app, [old]), receiver.url)
    answers = receiver.wait_answers(12)
    assert [a[0] for a in answers[9:]] == [401] * 3
    send(agent(make_app, [new, old]), receiver.url)
    assert [a[0] for a in receiver.wait_answers(15)[12:]] == [204] * 3
    assert len(receiver.accepted) == 12


def test_unsigned_without_keys(make_app: t.Callable[..., Flask], receiver: Receiver) -> None:
    client = A2ATestClient(make_app(config={"A2A_ALLOW_PRIVATE_PUSH": True}), token="alice")
    send(client, receiver.url)
    answers = receiver.wait_answers(3)
    assert all("authorization" not in a[2] and JWT_HEADER.lower() not in a[2] for a in answers)
    assert {json.loads(a[1])["error"] for a in answers} == {"no_token"}


# ------------------------------------------------------------------ the verifier, unit


class Posted:
    def __init__(self, headers: dict[str, str], body: bytes) -> None:
        self.headers, self.body = headers, body


def signed(signer: NotificationSigner, url: str, body: bytes, jti: str = "n1") -> Posted:
    headers: dict[str, str] = {}
    signer.add_to(headers, url, "task-1", jti, body)
    return Posted(headers, body)


@pytest.fixture
def clock() -> Clock:
    """A clock the test moves by hand, at an epoch time (the tokens' iat and exp read it)."""
    epoch = Clock()
    epoch.now = 1_800_000_000.0
    return epoch


def verifier(key: SigningKey, clock: Clock, **options: t.Any) -> NotificationVerifier:
    options.setdefault("audience", "https://hooks.example/a2a")
    return NotificationVerifier({"keys": [key.jwk()]}, clock=clock, **options)


def reason(check: NotificationVerifier, posted: Posted) -> str:
    with pytest.raises(NotificationRejected) as caught:
        check.verify(posted)
    return caught.value.reason


def test_verifier_checks_audience_issuer_age_and_signature(clock: Clock) -> None:
    key = ec_key("k")
    signer = NotificationSigner([key], BASE_URL + "/", clock=clock)
    check = verifier(key, clock, issuer=BASE_URL, max_age=60, leeway=5)
    url = "https://hooks.example/a2a"
    assert check.verify(signed(signer, url, b"{}")).task_id == "task-1"
    assert reason(check, signed(signer, "https://other.example/a2a", b"{}", "n2")) == "audience"
    assert (
        reason(
            verifier(key, clock, issuer="https://evil.example"), signed(signer, url, b"{}", "n3")
        )
        == "issuer"
    )
    late = signed(signer, url, b"{}", "n4")
    clock.now += 66
    assert reason(check, late) == "too_old"
    clock.now += TOKEN_LIFETIME
    assert reason(verifier(key, clock, max_age=1000), late) == "expired"
    ahead = NotificationSigner([key], BASE_URL, clock=lambda: clock.now + 60)
    assert reason(check, signed(ahead, url, b"{}", "n5")) == "not_yet_valid"
    posted = signed(signer, url, b"{}", "n6")
    token = posted.headers["Authorization"]
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    assert reason(check, Posted({"Authorization": flipped}, b"{}")) == "signature"
    assert reason(check, Posted({"Authorization": "Bearer x.y"}, b"{}")) == "malformed"
    other = verifier(ec_key("k"), clock)  # same kid, another key
    assert reason(other, signed(signer, url, b"{}", "n7")) == "signature"


def test_replay_cache_remembers_each_jti_for_max_age_and_is_bounded(clock: Clock) -> None:
    key = ec_key("k")
    signer = NotificationSigner([key], None, clock=clock)
    check = verifier(key, clock, max_age=60, leeway=0)
    first = signed(signer, "https://hooks.example/a2a", b"{}", "same")
    check.verify(first)
    with pytest.raises(ReplayedNotification):
        check.verify(first)
    check.replay.capacity = 2
    for jti in ("a", "b", "c"):
        check.verify(signed(signer, "https://hooks.example/a2a", b"{}", jti))
    assert len(check.replay._seen) <= 2


def test_verify_notification_in_a_flask_view_with_keys_given(clock: Clock) -> None:
    key = ec_key("k")
    body = b'{"statusUpdate":{"taskId":"task-1"}}'
    posted = signed(NotificationSigner([key], None), "http://localhost/a2a", body, "view-1")
    app = create_receiver({"keys": [key.jwk()]}, "http://localhost/a2a", {"task-1": "tok"})
    client = app.test_client()
    answer = client.post(
        "/a2a", data=body, headers={**posted.headers, "X-A2A-Notification-Token": "tok"}
    )
    assert answer.status_code == 204
    assert app.extensions["notifications"] == [("task-1", json.loads(body))]
    again = signed(NotificationSigner([key], None), "http://localhost/a2a", body, "view-2")
    wrong = client.post(
        "/a2a", data=body, headers={**again.headers, "X-A2A-Notification-Token": "nope"}
    )
    assert (wrong.status_code, wrong.json) == (401, {"error": "token"})


def test_a_jwks_outage_keeps_the_cached_keys_and_does_not_hammer(clock: Clock) -> None:
    from flask_a2a.push.verify import MIN_REFETCH, JWKSCache

    key = ec_key("k")

    class Flaky:
        """A session whose JWKS answers once (max-age=0), then fails."""

        def __init__(self) -> None:
            self.calls = 0

        def get(self, url: str, timeout: float) -> requests.Response:
            self.calls += 1
            if self.calls > 1:
                raise requests.ConnectionError("down")
            response = requests.Response()
            response.status_code = 200
            response._content = json.dumps({"keys": [key.jwk()]}).encode()
            response.headers["Cache-Control"] = "max-age=0"
            return response

    session = Flaky()
    monotonic = Clock()
    cache = JWKSCache(
        "https://agent.example/jwks.json",
        session=session,  # type: ignore[arg-type]
        clock=monotonic,
    )
    check = NotificationVerifier(cache, audience="https://hooks.example/a2a", clock=clock)
    signer = NotificationSigner([key], None, clock=clock)
    for n in range(3):
        check.verify(signed(signer, "https://hooks.example/a2a", b"{}", f"j{n}"))
    assert session.calls == 2  # the failed re-fetch is not repeated at every notification
    monotonic.now += MIN_REFETCH
    check.verify(signed(signer, "https://hooks.example/a2a", b"{}", "j9"))
    assert session.calls == 3
