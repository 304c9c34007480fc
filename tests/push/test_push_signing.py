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
from flask import Flask, Response, request

import flask_a2a
from examples.push_receiver import create_receiver, expect
from flask_a2a import A2AClientError, NotificationRejected, client, push
from flask_a2a.card.signing import SigningKey
from flask_a2a.client import parse_notification
from flask_a2a.protocol.model import PushConfig
from flask_a2a.push import NotificationVerifier, ReplayedNotification
from flask_a2a.push.tokens import JWT_HEADER, TOKEN_LIFETIME, NotificationSigner
from flask_a2a.push.verify import MIN_REFETCH, JWKSCache, _caches
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
    app = create_receiver(jwks_url, "placeholder", {}, allow_http=True)
    with werkzeug_server(app) as base:
        app.config["WEBHOOK_URL"] = base + "/a2a"
        yield Receiver(base, app)


def agent(make_app: t.Callable[..., Flask], keys: t.Sequence[SigningKey]) -> A2ATestClient:
    app = make_app(
        signing_keys=keys,
        config={"A2A_ALLOW_PRIVATE_PUSH": True, "A2A_PUBLIC_BASE_URL": BASE_URL},
    )
    return A2ATestClient(app, token="alice")


def send(client: A2ATestClient, receiver: Receiver, **config: t.Any) -> dict[str, t.Any]:
    """A task whose config posts to ``receiver``, with a token it expects unless one is given."""
    if "token" not in config:
        config["token"] = f"secret-{len(receiver.app.extensions['push_expected'])}"
        expect(receiver.app, config["token"])
    push = {"url": receiver.url, **{k: v for k, v in config.items() if v is not None}}
    task = client.send("hi", configuration={"taskPushNotificationConfig": push})
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
    expect(receiver.app, "per-task-secret")
    task = send(client, receiver, token="per-task-secret", id="hook-1")
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
        assert claims["configId"] == "hook-1"
        assert claims["token_sha256"] == hashlib.sha256(b"per-task-secret").hexdigest()
        jtis.add(claims["jti"])
    assert len(jtis) == 3
    assert server.fetches == 1  # cached by kid


def test_config_authentication_keeps_authorization_and_the_jwt_moves(
    make_app: t.Callable[..., Flask], receiver: Receiver, jwks_server: tuple[JWKSServer, str]
) -> None:
    server, _ = jwks_server
    server.keys = [rsa_key("r1")]
    client = agent(make_app, server.keys)
    send(client, receiver, authentication={"scheme": "Bearer", "credentials": "hook-key"})
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
    send(client, receiver)
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
    server, jwks_url = jwks_server
    monotonic = Clock()
    _caches(jwks_url, True)[0].clock = monotonic
    published = ec_key("published")
    server.keys = [published]
    send(agent(make_app, [published]), receiver)
    assert [a[0] for a in receiver.wait_answers(3)] == [204, 204, 204]
    assert server.fetches == 1
    monotonic.now += MIN_REFETCH  # no fetch starts within MIN_REFETCH of the last one
    send(agent(make_app, [ec_key("stranger")]), receiver)
    answers = receiver.wait_answers(6)
    assert [a[0] for a in answers[3:]] == [401, 401, 401]
    assert all(json.loads(a[1]) == {"error": "unknown_kid"} for a in answers[3:])
    # One re-fetch for the unknown kid; the next misses within MIN_REFETCH do not fetch again.
    assert server.fetches == 2


def test_key_rotation_old_kid_verifies_until_removed_from_the_jwks(
    make_app: t.Callable[..., Flask], receiver: Receiver, jwks_server: tuple[JWKSServer, str]
) -> None:
    server, jwks_url = jwks_server
    server.max_age = 0  # the receiver may re-read the JWKS at every notification ...
    monotonic = Clock()
    _caches(jwks_url, True)[0].clock = monotonic  # ... at most once per MIN_REFETCH
    old, new = ec_key("old"), ec_key("new")
    server.keys = [old]
    send(agent(make_app, [old]), receiver)
    assert [a[0] for a in receiver.wait_answers(3)] == [204] * 3
    # Rotation: the new key signs, the old one stays published.
    server.keys = [new, old]
    monotonic.now += MIN_REFETCH
    send(agent(make_app, [new, old]), receiver)
    send(agent(make_app, [old]), receiver)  # a replica not yet rotated
    assert [a[0] for a in receiver.wait_answers(9)] == [204] * 9
    # The old key is removed from the JWKS: within MIN_REFETCH of the last fetch it still
    # verifies (the cache is not re-read yet); after, its notifications stop verifying.
    server.keys = [new]
    send(agent(make_app, [old]), receiver)
    assert [a[0] for a in receiver.wait_answers(12)[9:]] == [204] * 3
    monotonic.now += MIN_REFETCH
    send(agent(make_app, [old]), receiver)
    answers = receiver.wait_answers(15)
    assert [a[0] for a in answers[12:]] == [401] * 3
    assert all(json.loads(a[1]) == {"error": "unknown_kid"} for a in answers[12:])
    send(agent(make_app, [new, old]), receiver)
    assert [a[0] for a in receiver.wait_answers(18)[15:]] == [204] * 3
    assert len(receiver.accepted) == 15
    assert server.fetches == 3


def test_mallorys_webhook_at_alices_receiver_is_refused(
    make_app: t.Callable[..., Flask], receiver: Receiver, jwks_server: tuple[JWKSServer, str]
) -> None:
    server, _ = jwks_server
    key = ec_key("k1")
    server.keys = [key]
    app = make_app(
        signing_keys=[key],
        config={"A2A_ALLOW_PRIVATE_PUSH": True, "A2A_PUBLIC_BASE_URL": BASE_URL},
    )
    alice, mallory = A2ATestClient(app, token="alice"), A2ATestClient(app, token="bob")
    expect(receiver.app, "alice-secret")
    alice_task = send(alice, receiver, token="alice-secret", id="alice-hook")
    assert [a[0] for a in receiver.wait_answers(3)] == [204] * 3
    # Mallory's own task, its webhook at Alice's URL: the agent signs it for that audience.
    send(mallory, receiver, token=None)
    send(mallory, receiver, token="a-guess")
    answers = receiver.wait_answers(9)
    assert [(a[0], json.loads(a[1])) for a in answers[3:]] == [(401, {"error": "token"})] * 6
    _, _, headers, body = answers[3]
    jwt = headers["authorization"].partition(" ")[2]
    proves_the_agent = NotificationVerifier({"keys": [key.jwk()]}, audience=receiver.url)
    assert proves_the_agent.verify_parts(jwt, body).task_id != alice_task["id"]
    # With Alice's token (leaked): sent for another config, or for Alice's config id on a task
    # of Mallory's, it is still not what Alice's receiver registered.
    send(mallory, receiver, token="alice-secret")
    send(mallory, receiver, token="alice-secret", id="alice-hook")
    answers = receiver.wait_answers(15)
    reasons = sorted(json.loads(a[1])["error"] for a in answers[9:])  # two configs: interleaved
    assert reasons == ["config"] * 3 + ["unknown_task"] * 3
    assert {task_id for task_id, _ in receiver.accepted} == {alice_task["id"]}
    assert len(receiver.accepted) == 3


def test_unsigned_without_keys(make_app: t.Callable[..., Flask], receiver: Receiver) -> None:
    client = A2ATestClient(make_app(config={"A2A_ALLOW_PRIVATE_PUSH": True}), token="alice")
    send(client, receiver)
    answers = receiver.wait_answers(3)
    assert all("authorization" not in a[2] and JWT_HEADER.lower() not in a[2] for a in answers)
    assert {json.loads(a[1])["error"] for a in answers} == {"no_token"}


# ------------------------------------------------------------------ the verifier, unit


class Posted:
    def __init__(self, headers: dict[str, str], body: bytes) -> None:
        self.headers, self.body = headers, body


def signed(
    signer: NotificationSigner,
    url: str,
    body: bytes,
    jti: str = "n1",
    config_id: str = "hook-1",
    token: str | None = None,
    task_id: str = "task-1",
) -> Posted:
    headers: dict[str, str] = {}
    config = PushConfig(id=config_id, task_id=task_id, url=url, token=token)
    signer.add_to(headers, config, jti, body)
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


def reason(check: NotificationVerifier, posted: Posted, **binding: t.Any) -> str:
    with pytest.raises(NotificationRejected) as caught:
        check.verify(posted, **binding)
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


def test_verifier_checks_the_config_binding(clock: Clock) -> None:
    key = ec_key("k")
    signer = NotificationSigner([key], None, clock=clock)
    check = verifier(key, clock)
    url = "https://hooks.example/a2a"
    note = check.verify(
        signed(signer, url, b"{}", "b1", token="tok"), config_id="hook-1", token="tok"
    )
    assert (note.config_id, note.claims["token_sha256"]) == (
        "hook-1",
        hashlib.sha256(b"tok").hexdigest(),
    )
    bound = {"config_id": "hook-1", "token": "tok"}
    assert reason(check, signed(signer, url, b"{}", "b2", "hook-2", "tok"), **bound) == "config"
    assert reason(check, signed(signer, url, b"{}", "b3", "hook-1", "other"), **bound) == "token"
    # A config without a token carries no token claim: a receiver expecting one refuses it.
    untokened = signed(signer, url, b"{}", "b4", "hook-1")
    assert "token_sha256" not in claims_of(untokened.headers["Authorization"].split(" ")[1])
    assert reason(check, untokened, **bound) == "token"
    # A refused binding does not spend the jti: the right receiver still takes it.
    assert check.verify(untokened, config_id="hook-1").jti == "b4"


@pytest.mark.parametrize(
    "caught_as",
    [flask_a2a.NotificationRejected, push.NotificationRejected, client.NotificationRejected],
    ids=["flask_a2a", "flask_a2a.push", "flask_a2a.client"],
)
def test_one_except_catches_every_refused_notification(
    clock: Clock, caught_as: type[NotificationRejected]
) -> None:
    """A receiver checks the token it registered (``parse_notification``) and the signature
    (``verify_notification``): whichever path it imports the class from, one ``except`` catches
    what both refuse, with a ``reason`` and the ``status`` to answer (its home is ``flask_a2a``;
    the two packages it used to be two classes in keep the name, the same object)."""
    key = ec_key("k")
    signer = NotificationSigner([key], BASE_URL + "/", clock=clock)
    check = verifier(key, clock)
    receiver = Flask("receiver")

    @receiver.post("/a2a")
    def hook() -> t.Any:
        try:
            parse_notification(request, token="s3cret")
            check.verify(request)
        except caught_as as refused:
            assert isinstance(refused, A2AClientError)
            return {"reason": refused.reason}, refused.status
        return "", 204

    event = {
        "statusUpdate": {
            "taskId": "task-1",
            "contextId": "c-1",
            "status": {"state": "TASK_STATE_WORKING", "timestamp": "2026-12-03T10:00:00.000Z"},
        }
    }
    body = json.dumps(event).encode()
    posted = signed(signer, "https://hooks.example/a2a", body, "n-one")
    token = {"A2A-Notification-Token": "s3cret", "Content-Type": "application/json"}
    hooks = receiver.test_client()

    def answer(headers: dict[str, str], data: bytes = body) -> tuple[int, t.Any]:
        got = hooks.post("/a2a", data=data, headers=headers)
        return got.status_code, (got.get_json() or {}).get("reason")

    assert answer({}) == (401, "token")  # parse_notification's refusal
    assert answer(token, b"{}") == (400, "malformed")
    assert answer(token) == (401, "no_token")  # verify_notification's
    assert answer({**token, **posted.headers}, b'{"task": {}}') == (400, "malformed")
    assert answer({**token, **posted.headers}) == (204, None)
    assert answer({**token, **posted.headers}) == (200, "replayed")  # acknowledged, not acted on


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


def test_the_example_receiver_takes_only_the_configs_it_registered() -> None:
    key = ec_key("k")
    signer = NotificationSigner([key], None)
    url = "http://localhost/a2a"
    body = b'{"statusUpdate":{"taskId":"task-1"}}'
    app = create_receiver({"keys": [key.jwk()]}, url, {"task-1": "tok"})
    client = app.test_client()

    def post(jti: str, sent: str = "tok", **config: t.Any) -> tuple[int, t.Any]:
        posted = signed(signer, url, body, jti, **{"token": "tok", **config})
        headers = {**posted.headers, "X-A2A-Notification-Token": sent}
        answer = client.post("/a2a", data=body, headers=headers)
        return answer.status_code, answer.json

    assert post("view-1") == (204, None)
    assert app.extensions["notifications"] == [("task-1", json.loads(body))]
    assert post("view-2", sent="nope") == (401, {"error": "token"})  # not a token we gave
    # The header names our token, the signed claims another config's: not ours.
    assert post("view-3", token="mallory") == (401, {"error": "token"})
    # Our token, another config of the agent's (its first notification pinned hook-1).
    assert post("view-4", config_id="hook-2") == (401, {"error": "config"})
    # Our token and config id, another task: a task this receiver did not register.
    assert post("view-5", task_id="task-2") == (401, {"error": "unknown_task"})
    assert len(app.extensions["notifications"]) == 1


def test_a_jwks_outage_keeps_the_cached_keys_and_does_not_hammer(clock: Clock) -> None:
    key = ec_key("k")

    class Flaky:
        """A session whose JWKS answers once (max-age=0), then fails."""

        def __init__(self) -> None:
            self.calls = 0

        def get(self, url: str, **options: t.Any) -> requests.Response:
            assert options["allow_redirects"] is False
            self.calls += 1
            if self.calls > 1:
                raise requests.ConnectionError("down")
            response = requests.Response()
            response.status_code = 200
            response._content = json.dumps({"keys": [key.jwk()]}).encode()
            response._content_consumed = True  # type: ignore[attr-defined]
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
    url = "https://hooks.example/a2a"
    for n in range(3):
        check.verify(signed(signer, url, b"{}", f"j{n}"))
    assert session.calls == 1  # max-age=0, yet no second fetch within MIN_REFETCH
    monotonic.now += MIN_REFETCH
    for n in range(3):  # the stale key serves while the JWKS is down
        check.verify(signed(signer, url, b"{}", f"k{n}"))
    assert session.calls == 2  # the failed re-fetch is not repeated at every notification
    monotonic.now += MIN_REFETCH
    check.verify(signed(signer, url, b"{}", "j9"))
    assert session.calls == 3
