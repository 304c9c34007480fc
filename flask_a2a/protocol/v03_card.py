"""The A2A v0.3 fields of the agent card, beside the v1.0 ones (docs/protocol-versions.md).

With 0.3 served, the card stays a v1.0 card and gains what a v0.3 resolver reads (``url``,
``protocolVersion``, ``preferredTransport``, ``additionalInterfaces``, ``security``, the v0.3
keys of each security scheme). :func:`without_card_fields` takes them off again: the signed
payload is the card as a v1.0 proto parse sees it (``card/signing.py``).
"""

from __future__ import annotations

import typing as t

from .v03 import PROTOCOL_VERSION


def card_fields(card: dict[str, t.Any], interfaces: list[dict[str, t.Any]]) -> dict[str, t.Any]:
    """The v1.0 card with the fields a v0.3 resolver reads added beside ``supportedInterfaces``.

    ``interfaces``: the v0.3 interfaces (``url``, ``protocolBinding``), the preferred first.
    """
    out = dict(card)
    first = interfaces[0]
    out["protocolVersion"] = PROTOCOL_VERSION
    out["url"] = first["url"]
    out["preferredTransport"] = first["protocolBinding"]
    out["additionalInterfaces"] = [
        {"url": i["url"], "transport": i["protocolBinding"]} for i in interfaces
    ]
    extended = card.get("capabilities", {}).get("extendedAgentCard")
    if extended:
        out["supportsAuthenticatedExtendedCard"] = True
    schemes = card.get("securitySchemes")
    if schemes:
        out["securitySchemes"] = {name: _both_schemes(s) for name, s in schemes.items()}
    if card.get("securityRequirements"):
        out["security"] = _security(card["securityRequirements"])
    skills = []
    for skill in card.get("skills", ()):
        if skill.get("securityRequirements"):
            skill = {**skill, "security": _security(skill["securityRequirements"])}
        skills.append(skill)
    out["skills"] = skills
    return out


#: What :func:`card_fields` adds at the card's top level (none is a v1.0 AgentCard field).
CARD_FIELDS: t.Final = frozenset(
    {
        "protocolVersion",
        "url",
        "preferredTransport",
        "additionalInterfaces",
        "supportsAuthenticatedExtendedCard",
        "security",
    }
)


def without_card_fields(card: dict[str, t.Any]) -> dict[str, t.Any]:
    """The card as a v1.0 proto parse sees it: what :func:`card_fields` added taken off (the
    signed payload, ``card/signing.py``: a v1.0 verifier never sees those fields)."""
    if not any(key in card for key in CARD_FIELDS):
        return card
    out = {k: v for k, v in card.items() if k not in CARD_FIELDS}
    schemes = out.get("securitySchemes")
    if isinstance(schemes, dict):
        out["securitySchemes"] = {name: _member_only(s) for name, s in schemes.items()}
    if isinstance(out.get("skills"), list):
        out["skills"] = [
            {k: v for k, v in skill.items() if k != "security"}
            if isinstance(skill, dict)
            else skill
            for skill in out["skills"]
        ]
    return out


def _member_only(scheme: t.Any) -> t.Any:
    if isinstance(scheme, dict):
        members = [key for key in scheme if key in _SCHEME_TYPES]
        if len(members) == 1:
            return {members[0]: scheme[members[0]]}
    return scheme


#: v1.0 SecurityScheme member -> the v0.3 ``type`` and the keys it renames.
_SCHEME_TYPES: t.Final[dict[str, tuple[str, dict[str, str]]]] = {
    "apiKeySecurityScheme": ("apiKey", {"location": "in"}),
    "httpAuthSecurityScheme": ("http", {}),
    "oauth2SecurityScheme": ("oauth2", {}),
    "openIdConnectSecurityScheme": ("openIdConnect", {}),
    "mtlsSecurityScheme": ("mutualTLS", {}),
}


def _both_schemes(scheme: t.Any) -> t.Any:
    """A v1.0 SecurityScheme (``{"httpAuthSecurityScheme": {...}}``) with the v0.3 keys
    (``type`` and the member's fields) beside it: both readers ignore the other's keys (the
    a2a-sdk 1.x resolver folds the v0.3 keys back into the same member)."""
    if not isinstance(scheme, dict) or len(scheme) != 1:
        return scheme
    ((member, fields),) = scheme.items()
    known = _SCHEME_TYPES.get(member)
    if known is None or not isinstance(fields, dict):
        return scheme
    kind, renames = known
    legacy = {renames.get(k, k): v for k, v in fields.items()}
    return {**legacy, "type": kind, member: fields}


def _security(requirements: t.Any) -> list[dict[str, list[str]]]:
    """v1.0 ``securityRequirements`` (``[{"schemes": {name: {"list": scopes}}}]``) as the
    v0.3 ``security`` (``[{name: scopes}]``)."""
    out = []
    for requirement in requirements if isinstance(requirements, list) else ():
        schemes = requirement.get("schemes") if isinstance(requirement, dict) else None
        if isinstance(schemes, dict):
            out.append(
                {
                    name: list(scopes.get("list") or []) if isinstance(scopes, dict) else []
                    for name, scopes in schemes.items()
                }
            )
    return out
