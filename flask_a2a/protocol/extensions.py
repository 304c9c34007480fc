"""A2A extensions: what the card declares, and which ones a request activates.

The card declares extensions (``AgentCard.extensions``, ``capabilities.extensions`` on the
wire). A request asks for some in its ``A2A-Extensions`` header: comma-separated URIs, in one
header line or several. The activated ones are those asked for that the card declares (others
are ignored, as the spec says); they are echoed in the response's ``A2A-Extensions`` header
and handed to the run (``TaskContext.extensions``). A declared ``required`` extension the
request did not ask for refuses it with -32008 before its method runs, so nothing is written;
only GetExtendedAgentCard is spared, being discovery like the public card (a client learns
there what it must activate). Imports nothing of Flask.
"""

from __future__ import annotations

import dataclasses
import typing as t

from ..config import ConfigError, ConfigTypeError
from .errors import ExtensionSupportRequiredError

if t.TYPE_CHECKING:
    from ..exchange.calls import HeaderLookup

HEADER: t.Final = "A2A-Extensions"
#: Methods that read about the agent rather than use it: a required extension is not enforced.
DISCOVERY_METHODS: t.Final = frozenset(
    {"GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"}
)


@dataclasses.dataclass(frozen=True)
class AgentExtension:
    """One extension the agent supports, as the card lists it.

    :param uri: what identifies it (and what a client names in ``A2A-Extensions``); include
        its version, e.g. ``https://example.com/ext/geo/v1``.
    :param required: every request must activate it, or it answers -32008.
    :param params: extension-specific configuration, JSON as the card shows it.
    """

    uri: str
    description: str | None = None
    required: bool = False
    params: t.Mapping[str, t.Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.uri, str) or not self.uri.strip() or "," in self.uri:
            raise ConfigError(f"AgentExtension.uri must be a non-empty URI, got {self.uri!r}")
        if self.uri != self.uri.strip():
            raise ConfigError(f"AgentExtension.uri has surrounding blanks: {self.uri!r}")
        if not isinstance(self.required, bool):
            raise ConfigTypeError(f"AgentExtension {self.uri!r}: required must be a bool")

    @classmethod
    def of(cls, declared: AgentExtension | t.Mapping[str, t.Any]) -> AgentExtension:
        """An AgentExtension, or one written as its ProtoJSON mapping."""
        if isinstance(declared, AgentExtension):
            return declared
        if not isinstance(declared, t.Mapping):
            raise ConfigTypeError(f"an extension must be an AgentExtension, not {declared!r}")
        unknown = set(declared) - {"uri", "description", "required", "params"}
        if unknown:
            raise ConfigError(f"extension {declared.get('uri')!r}: unknown keys {sorted(unknown)}")
        return cls(
            uri=declared.get("uri"),  # type: ignore[arg-type]  # checked in __post_init__
            description=declared.get("description"),
            required=bool(declared.get("required", False)),
            params=declared.get("params"),
        )

    def to_wire(self) -> dict[str, t.Any]:
        """The AgentExtension in ProtoJSON (unset fields omitted)."""
        out: dict[str, t.Any] = {"uri": self.uri}
        if self.description:
            out["description"] = self.description
        if self.required:
            out["required"] = True
        if self.params is not None:
            out["params"] = dict(self.params)
        return out


def declared_extensions(
    extensions: t.Iterable[AgentExtension | t.Mapping[str, t.Any]],
) -> tuple[AgentExtension, ...]:
    """The card's extensions as AgentExtension objects; two with one URI fail at startup."""
    out = tuple(AgentExtension.of(e) for e in extensions)
    uris = [e.uri for e in out]
    if len(set(uris)) != len(uris):
        raise ConfigError(f"AgentCard extensions=: two extensions share a uri: {uris}")
    return out


def requested(headers: HeaderLookup) -> frozenset[str]:
    """The URIs a request's ``A2A-Extensions`` header lines name, blanks trimmed."""
    getlist = getattr(headers, "getlist", None)
    values = getlist(HEADER) if callable(getlist) else [headers.get(HEADER)]
    uris = (uri.strip() for value in values if value for uri in str(value).split(","))
    return frozenset(uri for uri in uris if uri)


class Activation:
    """Decides, per request, which declared extensions are active."""

    def __init__(self, declared: t.Iterable[AgentExtension]) -> None:
        self.declared = tuple(declared)
        self.required = tuple(e.uri for e in self.declared if e.required)

    def activate(self, headers: HeaderLookup, method: str) -> tuple[str, ...]:
        """The declared extensions the request asks for, in the card's order.

        Raises -32008 naming the required extensions the request did not ask for (but for
        the discovery methods).
        """
        if not self.declared:
            return ()
        asked = requested(headers)
        missing = [uri for uri in self.required if uri not in asked]
        if missing and method not in DISCOVERY_METHODS:
            raise ExtensionSupportRequiredError(
                "Extension support is required: " + ", ".join(missing),
                metadata={"extensions": ",".join(missing)},
            )
        return tuple(e.uri for e in self.declared if e.uri in asked)
