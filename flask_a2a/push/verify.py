"""Checking a signed push notification on the receiving side: :func:`verify_notification`.

A receiver of this agent's webhooks calls it in its view, with the request and the agent's JWKS
(its URL, or the keys themselves). It accepts a notification only when its JWT (see
``push/tokens.py``) is signed by a key of that JWKS, is meant for this receiver (``aud``), is
fresh (``exp``, and ``iat`` within ``max_age``), covers exactly the body received
(``request_body_sha256``), was sent for the push config the receiver names (``config_id=``,
``token=``: the ``configId`` and ``token_sha256`` claims), and its ``jti`` was not accepted
before within ``max_age``. Anything else raises :class:`NotificationRejected` (a replay:
:class:`ReplayedNotification`, which a receiver may acknowledge with a 2xx without acting
again, since a retry of a notification it already processed carries the same ``jti``).
:class:`NotificationRejected` is the client's own (``client/notifications.py``): one class for
every refused notification, whichever check refused it, with the ``status`` to answer with.

A signature proves the agent sent the notification and what it says; it does not prove the
task is one the receiver asked about: whoever can create a task on the agent can point its
webhook at any URL, and the agent signs that notification too. The config binding is what
ties it to a config the receiver registered.

Each part of a token is length-checked before it is decoded, and a token that does not parse
(nested past the interpreter's limit included) is ``malformed``. The JWKS is cached and fetched
as ``push/jwks.py`` says (bounded fetches, one at a time, at most one per
:data:`MIN_REFETCH` seconds). Needs ``cryptography`` (the ``signing`` extra); imports no
Flask: any object with ``headers`` and ``get_data()`` (or ``body``) will do.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import hmac
import json
import threading
import time
import typing as t

import requests

from ..card.signing import ALGORITHMS, b64url_decode, key_from_jwk, verify_signature
from ..client.notifications import NotificationRejected
from .jwks import (
    DEFAULT_JWKS_TTL,
    FETCH_DEADLINE,
    MAX_JWKS_BYTES,
    MAX_JWKS_KEYS,
    MAX_JWKS_TTL,
    MIN_REFETCH,
    JWKSCache,
    JWKSUnavailable,
    jwk_list,
)
from .tokens import BODY_HASH_CLAIM, CONFIG_CLAIM, JWT_HEADER, TOKEN_HASH_CLAIM, token_hash

__all__ = [
    "DEFAULT_JWKS_TTL",
    "FETCH_DEADLINE",
    "MAX_JWKS_BYTES",
    "MAX_JWKS_KEYS",
    "MAX_JWKS_TTL",
    "MIN_REFETCH",
    "MAX_SEGMENT_CHARS",
    "JWKSCache",
    "NotificationRejected",
    "NotificationVerifier",
    "ReplayCache",
    "ReplayedNotification",
    "VerifiedNotification",
    "verify_notification",
]

#: Accepted ``jti`` s one replay cache remembers (the oldest go first past it).
REPLAY_CAPACITY: t.Final = 100_000
#: The longest each part of a token may be, in base64url characters, checked before it is
#: decoded: the header (``alg``, ``kid``, ``typ``), the claims (two URLs of up to about 5 KB
#: each with the rest), the signature (an 8192-bit RSA signature is 1,366).
MAX_SEGMENT_CHARS: t.Final = (2048, 16384, 2048)
#: Verifier caches kept by :func:`verify_notification`, one per JWKS source.
_SHARED_SOURCES: t.Final = 64

#: A JWKS URL; a JWKS document; a list of JWKs; or the app's own signing keys.
KeySource = t.Union[str, t.Mapping[str, t.Any], t.Sequence[t.Any]]


class ReplayedNotification(NotificationRejected):
    """A valid notification whose ``jti`` was accepted before (a replay or a sender's retry)."""

    def __init__(self, jti: str) -> None:
        super().__init__("replayed", f"jti {jti!r} was already accepted", 200)
        self.jti = jti


@dataclasses.dataclass(frozen=True)
class VerifiedNotification:
    """What a verified notification says: its claims and the exact body they cover."""

    claims: dict[str, t.Any]
    kid: str
    body: bytes

    @property
    def task_id(self) -> str:
        return str(self.claims["taskId"])

    @property
    def jti(self) -> str:
        return str(self.claims["jti"])

    @property
    def config_id(self) -> str | None:
        """The push config the agent sent it for (None from an agent before 0.2)."""
        found = self.claims.get(CONFIG_CLAIM)
        return found if isinstance(found, str) else None

    def json(self) -> t.Any:
        """The body: the bare StreamResponse (``{"statusUpdate": ...}`` and so on)."""
        return json.loads(self.body)


class ReplayCache:
    """The ``jti`` s accepted lately, each until its token is too old to be accepted anyway.

    Per process: a receiver running several processes gives the verifier one that is shared
    (anything with ``first_use(jti, until) -> bool``, e.g. Redis ``SET NX EXAT``). Bounded: past
    ``capacity`` live entries the oldest is forgotten.
    """

    def __init__(
        self, capacity: int = REPLAY_CAPACITY, clock: t.Callable[[], float] = time.time
    ) -> None:
        self.capacity = capacity
        self.clock = clock
        self._seen: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._lock = threading.Lock()

    def first_use(self, jti: str, until: float) -> bool:
        """Remember ``jti`` until ``until`` (epoch seconds); False when it is remembered."""
        now = self.clock()
        with self._lock:
            found = self._seen.get(jti)
            if found is not None and found > now:
                return False
            while self._seen:
                oldest, expires = next(iter(self._seen.items()))
                if expires > now and len(self._seen) < self.capacity:
                    break
                del self._seen[oldest]
            self._seen[jti] = until
            return True


class NotificationVerifier:
    """Verifies notifications against one JWKS, keeping its key and replay caches.

    :param keys: the JWKS URL (``<agent>/.well-known/jwks.json``), a JWKS document, a list of
        JWKs, or :class:`~flask_a2a.card.signing.SigningKey` objects.
    :param audience: the webhook URL this receiver was registered under (or several).
    :param max_age: seconds after ``iat`` a notification is still accepted (and its ``jti``
        remembered).
    :param issuer: the agent's public base URL; when given, ``iss`` must equal it.
    :param leeway: seconds of clock skew tolerated on ``exp`` and ``iat``.
    :param allow_http: accept an ``http://`` JWKS URL (development and tests only).
    """

    def __init__(
        self,
        keys: KeySource | JWKSCache,
        *,
        audience: str | t.Collection[str],
        max_age: float = 300.0,
        issuer: str | None = None,
        leeway: float = 30.0,
        replay: ReplayCache | None = None,
        session: requests.Session | None = None,
        algorithms: t.Collection[str] = ALGORITHMS,
        clock: t.Callable[[], float] = time.time,
        allow_http: bool = False,
    ) -> None:
        self.jwks = (
            keys
            if isinstance(keys, JWKSCache)
            else JWKSCache(keys, session=session, allow_http=allow_http)
        )
        self.audiences = {audience} if isinstance(audience, str) else set(audience)
        self.max_age = max_age
        self.issuer = issuer.rstrip("/") if issuer else None
        self.leeway = leeway
        self.replay = replay if replay is not None else ReplayCache()
        self.algorithms = frozenset(algorithms)
        #: A test seam: seconds since the epoch.
        self.clock = clock

    def verify(
        self, request: t.Any, *, config_id: str | None = None, token: str | None = None
    ) -> VerifiedNotification:
        """Check ``request`` (headers and exact body); raises :class:`NotificationRejected`.

        ``config_id`` and ``token``: the id and token of the push config the receiver
        registered; when given, the notification must have been sent for that config.
        """
        return self.verify_parts(
            _token_of(request.headers), _body_of(request), config_id=config_id, token=token
        )

    def verify_parts(
        self,
        jwt: str | None,
        body: bytes,
        *,
        config_id: str | None = None,
        token: str | None = None,
    ) -> VerifiedNotification:
        """Check a JWT and the body bytes it came with (and the config, as :meth:`verify`)."""
        if not jwt:
            raise NotificationRejected("no_token", f"neither {JWT_HEADER} nor a Bearer token")
        header, claims, raw_signature = _parts(jwt)
        alg, kid = header["alg"], header["kid"]
        if alg not in self.algorithms:
            raise NotificationRejected("algorithm", f"alg {alg!r} is not accepted")
        try:
            jwk = self.jwks.jwk(kid)
        except JWKSUnavailable as exc:
            raise NotificationRejected("jwks_unavailable", str(exc), 503) from None
        if jwk is None:
            raise NotificationRejected("unknown_kid", f"no key {kid!r} in the JWKS")
        if jwk.get("alg", alg) != alg:
            raise NotificationRejected("algorithm", f"key {kid!r} is not an {alg} key")
        try:
            key = key_from_jwk(jwk)
        except (KeyError, ValueError, TypeError) as exc:
            raise NotificationRejected("unknown_kid", f"key {kid!r}: {exc}") from None
        signing_input = jwt.rpartition(".")[0].encode("ascii")
        if not verify_signature(key, alg, signing_input, raw_signature):
            raise NotificationRejected("signature", f"not signed by key {kid!r}")
        self._check_claims(claims, body)
        _check_config(claims, config_id, token)
        jti = str(claims["jti"])
        if not self.replay.first_use(jti, float(claims["iat"]) + self.max_age + self.leeway):
            raise ReplayedNotification(jti)
        return VerifiedNotification(claims, kid, body)

    def _check_claims(self, claims: dict[str, t.Any], body: bytes) -> None:
        for name in ("aud", "iat", "exp", "jti", "taskId", BODY_HASH_CLAIM):
            if name not in claims:
                raise NotificationRejected("claims", f"no {name!r} claim")
        if not all(isinstance(claims[n], (int, float)) for n in ("iat", "exp")):
            raise NotificationRejected("claims", "iat and exp must be numbers")
        if not isinstance(claims["aud"], str) or claims["aud"] not in self.audiences:
            raise NotificationRejected("audience", f"aud {claims['aud']!r} is not this receiver")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise NotificationRejected("issuer", f"iss {claims.get('iss')!r}")
        now = self.clock()
        if now > claims["exp"] + self.leeway:
            raise NotificationRejected("expired", f"exp {claims['exp']} is past")
        if claims["iat"] > now + self.leeway:
            raise NotificationRejected("not_yet_valid", f"iat {claims['iat']} is ahead")
        if now - claims["iat"] > self.max_age:
            raise NotificationRejected("too_old", f"iat {claims['iat']} is over max_age ago")
        digest = hashlib.sha256(body).hexdigest()
        if not hmac.compare_digest(str(claims[BODY_HASH_CLAIM]), digest):
            raise NotificationRejected("body_mismatch", "the body is not the one signed")


def _parts(jwt: str) -> tuple[dict[str, t.Any], dict[str, t.Any], bytes]:
    """The header, claims and signature of a compact JWS; ``malformed`` unless they parse.

    Lengths are checked first: what is decoded and parsed is bounded whatever was sent.
    """
    segments = jwt.split(".", 3)
    if len(segments) != 3:
        raise NotificationRejected("malformed", "a JWT has three parts")
    for segment, limit, name in zip(segments, MAX_SEGMENT_CHARS, ("header", "claims", "signature")):
        if len(segment) > limit:
            raise NotificationRejected("malformed", f"the {name} is over {limit} characters")
    protected, payload, signature = segments
    try:
        jwt.encode("ascii")
        header = json.loads(b64url_decode(protected))
        claims = json.loads(b64url_decode(payload))
        raw_signature = b64url_decode(signature)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the limit
        raise NotificationRejected("malformed", f"{type(exc).__name__}: {exc}") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise NotificationRejected("malformed", "the header and the claims must be objects")
    if not isinstance(header.get("alg"), str) or not isinstance(header.get("kid"), str):
        raise NotificationRejected("malformed", "the header's alg and kid must be strings")
    return header, claims, raw_signature


def _check_config(claims: dict[str, t.Any], config_id: str | None, token: str | None) -> None:
    """The notification was sent for the receiver's config: its id, and its token's hash."""
    if config_id is not None and claims.get(CONFIG_CLAIM) != config_id:
        raise NotificationRejected(
            "config", f"sent for config {claims.get(CONFIG_CLAIM)!r}, not {config_id!r}"
        )
    if token is not None:
        sent = claims.get(TOKEN_HASH_CLAIM)
        if not isinstance(sent, str) or not hmac.compare_digest(sent, token_hash(token)):
            raise NotificationRejected("token", "sent for a config with another token")


def _token_of(headers: t.Any) -> str | None:
    token = headers.get(JWT_HEADER)
    if token:
        return str(token).strip()
    authorization = str(headers.get("Authorization") or "")
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def _body_of(request: t.Any) -> bytes:
    get_data = getattr(request, "get_data", None)
    if callable(get_data):  # Flask / Werkzeug: cached, so the view can read it again
        return t.cast(bytes, get_data(cache=True))
    body = getattr(request, "body", b"")
    return body.encode() if isinstance(body, str) else bytes(body or b"")


_shared: collections.OrderedDict[tuple[str, bool], tuple[JWKSCache, ReplayCache]] = (
    collections.OrderedDict()
)
_shared_lock = threading.Lock()


def _caches(source: KeySource, allow_http: bool) -> tuple[JWKSCache, ReplayCache]:
    """The key and replay caches :func:`verify_notification` keeps per JWKS source."""
    named = source if isinstance(source, str) else json.dumps(jwk_list(source), sort_keys=True)
    key = (named, allow_http)
    with _shared_lock:
        found = _shared.get(key)
        if found is None:
            found = _shared[key] = (JWKSCache(source, allow_http=allow_http), ReplayCache())
            while len(_shared) > _SHARED_SOURCES:
                _shared.popitem(last=False)
        _shared.move_to_end(key)
        return found


def verify_notification(
    request: t.Any,
    jwks_url_or_keys: KeySource,
    *,
    audience: str | t.Collection[str],
    max_age: float = 300.0,
    issuer: str | None = None,
    leeway: float = 30.0,
    config_id: str | None = None,
    token: str | None = None,
    allow_http: bool = False,
) -> VerifiedNotification:
    """Verify a push notification in any Flask view (``flask.request``); raises
    :class:`NotificationRejected`. Keys and accepted ``jti`` s are cached per JWKS source, across
    calls, in this process (see :class:`NotificationVerifier` to hold them yourself).

    ``config_id`` and ``token``: the push config the receiver registered (either may be
    given); the notification must have been sent for it. ``allow_http``: accept an ``http://``
    JWKS URL (development and tests only).
    """
    jwks, replay = _caches(jwks_url_or_keys, allow_http)
    verifier = NotificationVerifier(
        jwks, audience=audience, max_age=max_age, issuer=issuer, leeway=leeway, replay=replay
    )
    return verifier.verify(request, config_id=config_id, token=token)
