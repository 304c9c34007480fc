"""Agent card signatures: detached-payload JWS (ES256 / RS256) over RFC 8785 canonical JSON.

The payload is the card without ``signatures``, in the normal form the official SDK verifier
rebuilds from its protobuf parse (wire sheet §7): empty strings, lists and objects are dropped
(cascading, so ``[{"schemes": {"bearer": {}}}]`` vanishes), and so are the two proto3 default
booleans the proto does not track presence for. Signing anything else would give signatures the
SDK rejects. The fields a card carries for v0.3 resolvers (docs/protocol-versions.md) are not
in the v1.0 proto, so they are left out of the payload too. Needs the ``signing`` extra
(``cryptography``, ``rfc8785``).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import typing as t

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from ..config import ConfigError
from ..protocol import v03_card

PrivateKey = t.Union[ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey]
PublicKey = t.Union[ec.EllipticCurvePublicKey, rsa.RSAPublicKey]

ALGORITHMS: t.Final = ("ES256", "RS256")
_EC_COORD_BYTES: t.Final = 32


class CardSignatureError(Exception):
    """No signature on the card verifies against the given keys."""


# -- base64url, canonical payload


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _drop_default_flags(card: dict[str, t.Any]) -> None:
    """Remove ``false`` where the proto field has no presence (MessageToDict omits it)."""
    for extension in card.get("capabilities", {}).get("extensions", ()) or ():
        if isinstance(extension, dict) and extension.get("required") is False:
            del extension["required"]
    for scheme in (card.get("securitySchemes") or {}).values():
        flow = (
            (scheme or {}).get("oauth2SecurityScheme", {}).get("flows", {}).get("authorizationCode")
            if isinstance(scheme, dict)
            else None
        )
        if isinstance(flow, dict) and flow.get("pkceRequired") is False:
            del flow["pkceRequired"]


def _clean_empty(value: t.Any) -> t.Any:
    """Drop empty strings, lists and objects, bottom-up (None = dropped)."""
    if isinstance(value, dict):
        kept = {k: c for k, v in value.items() if (c := _clean_empty(v)) is not None}
        return kept or None
    if isinstance(value, list):
        items = [c for v in value if (c := _clean_empty(v)) is not None]
        return items or None
    if isinstance(value, str) and not value:
        return None
    return value


def canonical_payload(card: t.Mapping[str, t.Any]) -> bytes:
    """The bytes a signature covers: the card minus ``signatures``, normalized, then JCS."""
    body = json.loads(json.dumps({k: v for k, v in card.items() if k != "signatures"}))
    body = v03_card.without_card_fields(body)  # as the SDK's proto parse drops them
    _drop_default_flags(body)
    return rfc8785.dumps(_clean_empty(body) or {})


# -- keys


@dataclasses.dataclass(frozen=True)
class SigningKey:
    """A private key that signs the card; its public half is published in the JWKS.

    :param kid: the key id in the JWS header and the JWKS (``from_pem`` defaults it to the
        RFC 7638 thumbprint).
    :param alg: ``ES256`` (P-256 key) or ``RS256`` (RSA key, >= 2048 bits); taken from the key
        when not given.
    """

    kid: str
    private_key: PrivateKey
    alg: str = ""

    def __post_init__(self) -> None:
        if not self.kid:
            raise ConfigError("SigningKey.kid must be a non-empty string")
        alg = self.alg or _alg_for(self.private_key)
        if alg != _alg_for(self.private_key):
            raise ConfigError(f"SigningKey {self.kid!r}: alg {alg!r} does not fit the key type")
        object.__setattr__(self, "alg", alg)

    @classmethod
    def from_pem(
        cls, pem: bytes | str, kid: str | None = None, password: bytes | None = None
    ) -> SigningKey:
        data = pem.encode() if isinstance(pem, str) else pem
        key = serialization.load_pem_private_key(data, password=password)
        if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
            raise ConfigError("only EC P-256 (ES256) and RSA (RS256) keys can sign the card")
        jwk = public_jwk(key.public_key())
        return cls(kid=kid or thumbprint(jwk), private_key=key)

    def jwk(self) -> dict[str, str]:
        """The public JWK, as published in the JWKS."""
        return {
            **public_jwk(self.private_key.public_key()),
            "kid": self.kid,
            "alg": self.alg,
            "use": "sig",
        }

    def sign(self, signing_input: bytes) -> bytes:
        key = self.private_key
        if isinstance(key, ec.EllipticCurvePrivateKey):
            r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
            return r.to_bytes(_EC_COORD_BYTES, "big") + s.to_bytes(_EC_COORD_BYTES, "big")
        return key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())


def _alg_for(key: PrivateKey | PublicKey) -> str:
    if isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)):
        if not isinstance(key.curve, ec.SECP256R1):
            raise ConfigError("EC signing keys must be on P-256 (ES256)")
        return "ES256"
    if isinstance(key, (rsa.RSAPrivateKey, rsa.RSAPublicKey)):
        if key.key_size < 2048:
            raise ConfigError("RSA signing keys must have at least 2048 bits")
        return "RS256"
    raise ConfigError("only EC P-256 (ES256) and RSA (RS256) keys can sign the card")


def _int_b64(value: int, size: int | None = None) -> str:
    size = size or max(1, (value.bit_length() + 7) // 8)
    return b64url(value.to_bytes(size, "big"))


def public_jwk(key: PublicKey) -> dict[str, str]:
    """A public key as a JWK (RFC 7517) without kid/alg/use."""
    if isinstance(key, ec.EllipticCurvePublicKey):
        _alg_for(key)
        numbers = key.public_numbers()
        return {
            "kty": "EC",
            "crv": "P-256",
            "x": _int_b64(numbers.x, _EC_COORD_BYTES),
            "y": _int_b64(numbers.y, _EC_COORD_BYTES),
        }
    rsa_numbers = key.public_numbers()
    return {"kty": "RSA", "n": _int_b64(rsa_numbers.n), "e": _int_b64(rsa_numbers.e)}


def thumbprint(jwk: t.Mapping[str, str]) -> str:
    """RFC 7638 JWK thumbprint (SHA-256, base64url)."""
    members = ("crv", "kty", "x", "y") if jwk["kty"] == "EC" else ("e", "kty", "n")
    data = json.dumps({m: jwk[m] for m in members}, separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(data.encode()).digest())


def jwks(keys: t.Iterable[SigningKey]) -> dict[str, t.Any]:
    return {"keys": [key.jwk() for key in keys]}


def key_from_jwk(jwk: t.Mapping[str, t.Any]) -> PublicKey:
    """The public key a JWK holds (EC P-256 or RSA); ValueError for any other kind."""
    if jwk.get("kty") == "EC" and jwk.get("crv") == "P-256":
        x = int.from_bytes(b64url_decode(jwk["x"]), "big")
        y = int.from_bytes(b64url_decode(jwk["y"]), "big")
        return ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
    if jwk.get("kty") == "RSA":
        n = int.from_bytes(b64url_decode(jwk["n"]), "big")
        e = int.from_bytes(b64url_decode(jwk["e"]), "big")
        return rsa.RSAPublicNumbers(e, n).public_key()
    raise ValueError(f"unsupported JWK: kty={jwk.get('kty')!r}")


# -- signing and verifying


def sign_card(
    card: t.Mapping[str, t.Any], keys: t.Sequence[SigningKey], jku: str | None
) -> dict[str, t.Any]:
    """The card with one signature per key (key rotation: verifiers need any one)."""
    payload = b64url(canonical_payload(card))
    signatures = []
    for key in keys:
        header: dict[str, str] = {"alg": key.alg, "kid": key.kid, "typ": "JOSE"}
        if jku:
            header["jku"] = jku
        protected = b64url(json.dumps(header, separators=(",", ":"), sort_keys=True).encode())
        signature = key.sign(f"{protected}.{payload}".encode("ascii"))
        signatures.append({"protected": protected, "signature": b64url(signature)})
    unsigned = {k: v for k, v in card.items() if k != "signatures"}
    return {**unsigned, "signatures": signatures}


def verify_signature(key: PublicKey, alg: str, signing_input: bytes, signature: bytes) -> bool:
    """Whether ``signature`` (JWS form) is ``key``'s under ``alg``; an alg that does not fit
    the key is False (no algorithm confusion)."""
    try:
        if alg == "ES256" and isinstance(key, ec.EllipticCurvePublicKey):
            if len(signature) != 2 * _EC_COORD_BYTES:
                return False
            r = int.from_bytes(signature[:_EC_COORD_BYTES], "big")
            s = int.from_bytes(signature[_EC_COORD_BYTES:], "big")
            key.verify(encode_dss_signature(r, s), signing_input, ec.ECDSA(hashes.SHA256()))
            return True
        if alg == "RS256" and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
            return True
    except InvalidSignature:
        return False
    return False


def verify_card(
    card: t.Mapping[str, t.Any],
    jwks_doc: t.Mapping[str, t.Any],
    algorithms: t.Collection[str] = ALGORITHMS,
) -> str:
    """Check the card's signatures against a JWKS; returns the kid of the first valid one.

    The key is looked up by the header's ``kid``; the header's ``alg`` must be allowed and must
    fit the key (no algorithm confusion). Raises :class:`CardSignatureError` when none verifies.
    """
    signatures = card.get("signatures") or []
    if not signatures:
        raise CardSignatureError("the card carries no signatures")
    by_kid = {k.get("kid"): k for k in jwks_doc.get("keys", ()) if isinstance(k, dict)}
    payload = b64url(canonical_payload(card))
    for entry in signatures:
        try:
            protected = str(entry["protected"])
            header = json.loads(b64url_decode(protected))
            alg, kid = header["alg"], header["kid"]
            signature = b64url_decode(str(entry["signature"]))
        except (KeyError, TypeError, ValueError):
            continue
        jwk = by_kid.get(kid)
        if alg not in algorithms or jwk is None or jwk.get("alg", alg) != alg:
            continue
        try:
            key = key_from_jwk(jwk)
        except (KeyError, ValueError):
            continue
        if verify_signature(key, alg, f"{protected}.{payload}".encode("ascii"), signature):
            return str(kid)
    raise CardSignatureError("no signature on the card verifies")
