"""Signed push notifications: one compact JWS (a JWT) per notification, made with the app's keys.

A config's ``token`` proves nothing to the receiver about who sent a POST: anyone who learns it
can forge notifications, and the agent cannot rotate it. With signing keys configured (the ones
that sign the agent card, published in its JWKS) every notification also carries a JWT, as the
A2A push-notification security guidance describes: header ``alg``, ``kid`` (``typ`` JWT);
claims ``iss`` (``A2A_PUBLIC_BASE_URL``, when set), ``aud`` (the webhook URL), ``iat``, a short
``exp``, ``jti`` (one per notification: a retry of the same notification carries the same one),
``taskId``, ``request_body_sha256``, the hex SHA-256 of the exact body bytes sent (the name
the A2A samples used), so the token cannot be moved to another body, and the push config it
was sent for: ``configId`` and ``token_sha256`` (the hex SHA-256 of the config's ``token``,
left out when it has none). The signature proves the agent sent the notification; those two
claims let a receiver prove it was sent for a config it registered, not for another caller's
task pointed at its URL (the receiver checks them with ``config_id=`` and ``token=``).

The JWT travels in ``Authorization: Bearer <jwt>`` when the config has no ``authentication`` of
its own; when it has, its ``Authorization`` stays and the JWT goes in :data:`JWT_HEADER`. Built
with ``cryptography`` as the card's signatures are (the ``signing`` extra); no JWT library.
Receivers check it with :func:`flask_a2a.push.verify.verify_notification`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import typing as t

from ..card.signing import SigningKey, b64url
from ..protocol.model import PushConfig

log = logging.getLogger("flask_a2a")

#: Where the JWT goes when the config's own ``authentication`` holds ``Authorization``.
JWT_HEADER: t.Final = "A2A-Notification-JWT"
#: Seconds a notification's JWT is valid after it is made (one per attempt): long enough for a
#: slow receiver and some clock skew, short enough that a captured token soon stops working.
TOKEN_LIFETIME: t.Final = 120
#: The claim holding the hex SHA-256 of the body bytes.
BODY_HASH_CLAIM: t.Final = "request_body_sha256"
#: The claim holding the push config's id.
CONFIG_CLAIM: t.Final = "configId"
#: The claim holding the hex SHA-256 of the config's token (absent when it has none).
TOKEN_HASH_CLAIM: t.Final = "token_sha256"


def token_hash(token: str) -> str:
    """What :data:`TOKEN_HASH_CLAIM` holds for ``token``: its UTF-8 bytes' hex SHA-256."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class NotificationSigner:
    """Signs notifications with the first (newest) of the app's signing keys.

    :param keys: the app's :class:`~flask_a2a.card.signing.SigningKey` objects, newest first;
        the first signs, and every one stays in the JWKS so a receiver still verifies a token
        made before a rotation.
    :param issuer: the ``iss`` claim (the agent's public base URL); None leaves it out.
    """

    def __init__(
        self,
        keys: t.Sequence[SigningKey],
        issuer: str | None,
        clock: t.Callable[[], float] = time.time,
    ) -> None:
        if not keys:
            raise ValueError("NotificationSigner needs at least one signing key")
        self.key = keys[0]
        self.issuer = issuer.rstrip("/") if issuer else None
        if self.issuer is None:
            log.warning(
                "a2a: A2A_PUBLIC_BASE_URL is not set: signed push notifications carry no 'iss' "
                "claim (receivers cannot check the issuer)"
            )
        #: A test seam: seconds since the epoch.
        self.clock = clock
        header = {"alg": self.key.alg, "kid": self.key.kid, "typ": "JWT"}
        self._header = b64url(json.dumps(header, separators=(",", ":")).encode())

    def token(self, config: PushConfig, jti: str, body: bytes) -> str:
        """The compact JWS for one attempt at one notification to ``config``."""
        now = int(self.clock())
        claims: dict[str, t.Any] = {}
        if self.issuer:
            claims["iss"] = self.issuer
        claims.update(
            aud=config.url,
            iat=now,
            exp=now + TOKEN_LIFETIME,
            jti=jti,
            taskId=config.task_id,
            **{BODY_HASH_CLAIM: hashlib.sha256(body).hexdigest(), CONFIG_CLAIM: config.id},
        )
        if config.token:
            claims[TOKEN_HASH_CLAIM] = token_hash(config.token)
        payload = b64url(json.dumps(claims, separators=(",", ":")).encode())
        signing_input = f"{self._header}.{payload}"
        return f"{signing_input}.{b64url(self.key.sign(signing_input.encode('ascii')))}"

    def add_to(self, headers: dict[str, str], config: PushConfig, jti: str, body: bytes) -> None:
        """Put the JWT where it goes: ``Authorization`` when the config left it free."""
        jwt = self.token(config, jti, body)
        if "Authorization" in headers:
            headers[JWT_HEADER] = jwt
        else:
            headers["Authorization"] = f"Bearer {jwt}"
