"""The agent card: what ``/.well-known/agent-card.json`` says about this agent.

Skills come from the exchange (``A2A.skills()``), capabilities from what is really switched on,
and the JSON-RPC interface is advertised with an absolute URL so a client behind a proxy can
reach it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import typing as t

from .router import Skill

AGENT_CARD_PATH: t.Final = "/.well-known/agent-card.json"
PROTOCOL_VERSION: t.Final = "1.0"


@dataclasses.dataclass(frozen=True)
class AgentCard:
    """The parts of the card the host app decides; the rest is derived.

    :param security_schemes: name -> SecurityScheme in ProtoJSON, e.g.
        ``{"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}``.
    :param security_requirements: e.g. ``[{"schemes": {"bearer": {}}}]``.
    """

    name: str = "Flask A2A agent"
    description: str = "An A2A agent served by flask_a2a."
    version: str = "1.0.0"
    provider_organization: str | None = None
    provider_url: str | None = None
    documentation_url: str | None = None
    icon_url: str | None = None
    security_schemes: t.Mapping[str, t.Any] = dataclasses.field(
        default_factory=lambda: {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
    )
    security_requirements: t.Sequence[t.Mapping[str, t.Any]] = dataclasses.field(
        default_factory=lambda: [{"schemes": {"bearer": {}}}]
    )
    default_input_modes: tuple[str, ...] = ("text/plain", "application/json")
    default_output_modes: tuple[str, ...] = ("application/json", "text/plain")


def skill_entry(skill: Skill) -> dict[str, t.Any]:
    """An AgentSkill, keeping the skill's own input and output modes."""
    out: dict[str, t.Any] = {
        "id": skill.id,
        "name": skill.name,
        "description": skill.description,
        "tags": list(skill.tags) or [skill.id],
    }
    if skill.examples:
        out["examples"] = list(skill.examples)
    if skill.input_modes:
        out["inputModes"] = list(skill.input_modes)
    if skill.output_modes:
        out["outputModes"] = list(skill.output_modes)
    return out


def build_card(
    card: AgentCard,
    *,
    endpoint_url: str,
    skills: t.Iterable[Skill],
    streaming: bool,
    push: bool,
    extended: bool,
) -> dict[str, t.Any]:
    """The AgentCard in ProtoJSON (without signatures)."""
    out: dict[str, t.Any] = {
        "name": card.name,
        "description": card.description,
        "supportedInterfaces": [
            {
                "url": endpoint_url,
                "protocolBinding": "JSONRPC",
                "protocolVersion": PROTOCOL_VERSION,
            }
        ],
        "version": card.version,
        "capabilities": {
            "streaming": streaming,
            "pushNotifications": push,
            "extendedAgentCard": extended,
        },
        "defaultInputModes": list(card.default_input_modes),
        "defaultOutputModes": list(card.default_output_modes),
        "skills": [skill_entry(s) for s in skills if s.public],
    }
    if card.provider_organization and card.provider_url:
        out["provider"] = {"url": card.provider_url, "organization": card.provider_organization}
    if card.documentation_url:
        out["documentationUrl"] = card.documentation_url
    if card.security_schemes:
        out["securitySchemes"] = dict(card.security_schemes)
    if card.security_requirements:
        out["securityRequirements"] = [dict(r) for r in card.security_requirements]
    if card.icon_url:
        out["iconUrl"] = card.icon_url
    return out


def etag_of(body: str) -> str:
    return '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'


def encode_card(card: dict[str, t.Any]) -> str:
    return json.dumps(card, separators=(",", ":"), ensure_ascii=True)
