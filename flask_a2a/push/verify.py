"""Checking a signed push notification on the receiving side: :func:`verify_notification`.

A receiver of this agent's webhooks calls it in its view, with the request and the agent's JWKS
(its URL, or the keys themselves). It accepts a notification only when its JWT (see
``push/tokens.py``) is signed by a key of that JWKS, is meant for this receiver (``aud``), is
fresh (``exp``, and ``iat`` within ``max_age``), covers exactly the body received
(``request_body_sha256``), and its ``jti`` was not accepted before within ``max_age``. Anything
else raises :class:`NotificationRejected` (a replay: :class:`ReplayedNotification`, which a
receiver may acknowledge with a 2xx without acting again, since a retry of a notification it
already processed carries the same ``jti``).

The JWKS is cached by ``kid`` for the ``max-age`` its response gives (300 s without one) and
fetched again, once, when a token names a ``kid`` it does not hold (at most once per
:data:`MIN_REFETCH` seconds, so forged kids cannot make the receiver hammer the agent). A key
removed from the JWKS stops verifying when the cache is next refreshed. Needs ``cryptography``
(the ``signing`` extra); imports no Flask: any object with ``headers`` and ``get_data()`` (or
``body``) will do.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import hmac
import json
import re
import threading
import time
import typing as t

import requests

from ..card.signing import ALGORITHMS, SigningKey, b64url_decode, key_from_jwk, verify_signature
from .tokens import BODY_HASH_CLAIM, JWT_HEADER

#: Seconds between two fetches a kid the cache does not hold may cause.
MIN_REFETCH: t.Final = 10.0
#: How long a JWKS is kept when its response names no ``max-age``.
DEFAULT_JWKS_TTL: t.Final = 300.0
#: The longest a JWKS is kept, whatever its response says.
MAX_JWKS_TTL: t.Final = 86400.0
#: Accepted ``jti`` s one replay cache remembers (the oldest go first past it).
REPLAY_CAPACITY: t.Final = 100_000
#: Verifier caches kept by :func:`verify_notification`, one per JWKS source.
_SHARED_SOURCES: t.Final = 64
_MAX_AGE_RE: t.Final = re.compile(r"max-age=(\d+)")

#: A JWKS URL; a JWKS document; a list of JWKs; or the app's own signing keys.
KeySource = t.Union[str, t.Mapping[str, t.Any], t.Sequence[t.Any]]


class NotificationRejected(Exception):
    """The notification does not verify; ``reason`` says why, in a word a receiver can log:
    ``no_token``, ``malformed``, ``algorithm``, ``unknown_kid``, ``jwks_unavailable``,
    ``signature``, ``audience``, ``issuer``, ``expired``, ``not_yet_valid``, ``too_old``,
    ``body_mismatch``, ``claims``, ``replayed``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class ReplayedNotification(NotificationRejected):
    """A valid notification whose ``jti`` was accepted before (a replay or a sender's retry)."""

    def __init__(self, jti: str) -> None:
        super().__init__("replayed", f"jti {jti!r} was already accepted")
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

    def json(self) -> t.Any:
        """The body: the bare StreamResponse (``{"statusUpdate": ...}`` and so on)."""
        return json.loads(self.body)


class JWKSCache:
    """The agent's public keys by ``kid``: given once, or fetched from a URL and refreshed."""

    def __init__(
        self,
        source: KeySource,
        *,
        session: requests.Session | None = None,
        timeout: float = 5.0,
        clock: t.Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = source if isinstance(source, str) else None
        self.session = session
        self.timeout = timeout
        #: A test seam: seconds, monotonic.
        self.clock = clock
        #: How many times the URL was fetched (a receiver's health check may read it).
        self.fetches = 0
        self._lock = threading.Lock()
        self._keys: dict[str, dict[str, t.Any]] = {}
        self._expires = -1.0
        #: When a kid the cache lacked last caused a fetch.
        self._missed_at: float | None = None
        if self.url is None:
            self._keys = _by_kid(_jwk_list(source))

    def jwk(self, kid: str) -> dict[str, t.Any] | None:
        """The JWK for ``kid``; a stale cache is refreshed, an unknown kid fetches once."""
        if self.url is None:
            return self._keys.get(kid)
        with self._lock:
            now = self.clock()
            if now >= self._expires:
                self._fetch(now)
            elif kid not in self._keys and (
                self._missed_at is None or now - self._missed_at >= MIN_REFETCH
            ):
                self._missed_at = now
                self._fetch(now)
            return self._keys.get(kid)

    def _fetch(self, now: float) -> None:
        assert self.url is not None
        self.fetches += 1
        getter = self.session.get if self.session is not None else requests.get
        try:
            response = getter(self.url, timeout=self.timeout)
            response.raise_for_status()
            document = response.json()
            keys = _by_kid(_jwk_list(document))
        except (requests.RequestException, ValueError, TypeError) as exc:
            if not self._keys:
                raise NotificationRejected("jwks_unavailable", str(exc)) from None
            # Keep serving the keys we have; ask again in a while, not at every notification.
            self._expires = now + MIN_REFETCH
            return
        self._keys = keys
        self._expires = now + _ttl(response.headers.get("Cache-Control", ""))


def _ttl(cache_control: str) -> float:
    if "no-cache" in cache_control or "no-store" in cache_control:
        return 0.0
    found = _MAX_AGE_RE.search(cache_control)
    return min(float(found.group(1)), MAX_JWKS_TTL) if found else DEFAULT_JWKS_TTL


def _jwk_list(source: t.Any) -> list[dict[str, t.Any]]:
    if isinstance(source, t.Mapping):
        source = source.get("keys", ())
    out = []
    for item in source:
        if isinstance(item, SigningKey):
            out.append(item.jwk())
        elif isinstance(item, t.Mapping):
            out.append(dict(item))
        else:
            raise TypeError(f"not a JWK or a SigningKey: {type(item).__name__}")
    return out


def _by_kid(jwks: list[dict[str, t.Any]]) -> dict[str, dict[str, t.Any]]:
    return {str(jwk["kid"]): jwk for jwk in jwks if jwk.get("kid")}


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
    ) -> None:
        self.jwks = keys if isinstance(keys, JWKSCache) else JWKSCache(keys, session=session)
        self.audiences = {audience} if isinstance(audience, str) else set(audience)
        self.max_age = max_age
        self.issuer = issuer.rstrip("/") if issuer else None
        self.leeway = leeway
        self.replay = replay if replay is not None else ReplayCache()
        self.algorithms = frozenset(algorithms)
        #: A test seam: seconds since the epoch.
        self.clock = clock

    def verify(self, request: t.Any) -> VerifiedNotification:
        """Check ``request`` (headers and exact body); raises :class:`NotificationRejected`."""
        return self.verify_parts(_token_of(request.headers), _body_of(request))

    def verify_parts(self, token: str | None, body: bytes) -> VerifiedNotification:
        """Check a JWT and the body bytes it came with."""
        if not token:
            raise NotificationRejected("no_token", f"neither {JWT_HEADER} nor a Bearer token")
        try:
            protected, payload, signature = token.split(".")
            header = json.loads(b64url_decode(protected))
            claims = json.loads(b64url_decode(payload))
            raw_signature = b64url_decode(signature)
            alg, kid = str(header["alg"]), str(header["kid"])
        except (ValueError, KeyError, TypeError) as exc:
            raise NotificationRejected("malformed", str(exc)) from None
        if not isinstance(claims, dict):
            raise NotificationRejected("malformed", "the claims are not an object")
        if alg not in self.algorithms:
            raise NotificationRejected("algorithm", f"alg {alg!r} is not accepted")
        jwk = self.jwks.jwk(kid)
        if jwk is None:
            raise NotificationRejected("unknown_kid", f"no key {kid!r} in the JWKS")
        if jwk.get("alg", alg) != alg:
            raise NotificationRejected("algorithm", f"key {kid!r} is not an {alg} key")
        try:
            key = key_from_jwk(jwk)
        except (KeyError, ValueError) as exc:
            raise NotificationRejected("unknown_kid", f"key {kid!r}: {exc}") from None
        if not verify_signature(key, alg, f"{protected}.{payload}".encode("ascii"), raw_signature):
            raise NotificationRejected("signature", f"not signed by key {kid!r}")
        self._check_claims(claims, body)
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


_shared: collections.OrderedDict[str, tuple[JWKSCache, ReplayCache]] = collections.OrderedDict()
_shared_lock = threading.Lock()


def _caches(source: KeySource) -> tuple[JWKSCache, ReplayCache]:
    """The key and replay caches :func:`verify_notification` keeps per JWKS source."""
    key = source if isinstance(source, str) else json.dumps(_jwk_list(source), sort_keys=True)
    with _shared_lock:
        found = _shared.get(key)
        if found is None:
            found = _shared[key] = (JWKSCache(source), ReplayCache())
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
) -> VerifiedNotification:
    """Verify a push notification in any Flask view (``flask.request``); raises
    :class:`NotificationRejected`. Keys and accepted ``jti`` s are cached per JWKS source, across
    calls, in this process (see :class:`NotificationVerifier` to hold them yourself).
    """
    jwks, replay = _caches(jwks_url_or_keys)
    verifier = NotificationVerifier(
        jwks, audience=audience, max_age=max_age, issuer=issuer, leeway=leeway, replay=replay
    )
    return verifier.verify(request)
