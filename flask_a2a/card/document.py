"""The agent card: what ``/.well-known/agent-card.json`` says about this agent.

Skills come from the exchange (``A2A.skills()``), capabilities from what is really switched on,
and the JSON-RPC interface is advertised with an absolute URL so a client behind a proxy can
reach it. :class:`CardPublisher` also serves the JWKS that verifies the card's signatures, the
RFC 9728 protected-resource metadata and, in the agent role, the health route.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import threading
import time
import typing as t

from flask import Flask, Response, abort, has_request_context, request
from werkzeug.http import http_date

from ..config import ConfigError, ConfigRuntimeError, ConfigTypeError
from ..exchange.router import Skill
from ..protocol import v03_card
from ..protocol.extensions import AgentExtension, declared_extensions

if t.TYPE_CHECKING:
    from ..config import Settings
    from ..exchange.methods import Exchange
    from .signing import SigningKey

AGENT_CARD_PATH: t.Final = "/.well-known/agent-card.json"
PROTECTED_RESOURCE_PATH: t.Final = "/.well-known/oauth-protected-resource"
HEALTH_PATH: t.Final = "/healthz"
PROTOCOL_VERSION: t.Final = "1.0"
#: The v0.3 interfaces the card lists when A2A_PROTOCOL_VERSIONS has 0.3: the bindings that
#: serve it (``bindings/v03.py``).
V03_BINDINGS: t.Final = frozenset({"JSONRPC", "HTTP+JSON"})

#: Signed cards kept per distinct unsigned card (the base URL may vary with the Host header).
_SIGNED_CACHE_SIZE: t.Final = 32

#: The blueprint endpoints the agent role serves (plus the host's own health route, if any).
AGENT_ROLE_ENDPOINTS: t.Final = frozenset(
    {
        "a2a.exchange",
        "a2a.rest",
        "a2a.rest_root",
        "a2a.agent_card",
        "a2a.agent_card_root",
        "a2a.jwks",
        "a2a.protected_resource",
        "a2a.protected_resource_for_path",
        "a2a.healthz",
        "a2a.metrics",
    }
)


@dataclasses.dataclass(frozen=True)
class AgentCard:
    """The parts of the card the host app decides; the rest is derived.

    :param security_schemes: name -> SecurityScheme in ProtoJSON, e.g.
        ``{"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}``.
    :param security_requirements: e.g. ``[{"schemes": {"bearer": {}}}]``.
    :param endpoint_path: the path the card advertises as its JSON-RPC interface; ``None``
        means ``A2A_PATH``. Anything else fails at startup: the card only advertises, the
        extension is what mounts, and the two must name the same path.
    :param extensions: the extensions the agent supports, for ``capabilities.extensions``:
        :class:`AgentExtension` objects (or their ProtoJSON mappings). Those of the public card
        are the ones a request can activate (``A2A-Extensions``); a ``required`` one refuses
        every request that does not (-32008).
    """

    #: The agent's name; by default the app's (``app.name``, and the agent's own name when
    #: an app serves several), filled in by ``A2A.init_app``.
    name: str = ""
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
    endpoint_path: str | None = None
    extensions: t.Sequence[AgentExtension | t.Mapping[str, t.Any]] = ()

    def __post_init__(self) -> None:
        # Checked here, so a bad declaration fails at startup; a mapping is served as written.
        extensions = tuple(self.extensions)
        declared_extensions(extensions)
        object.__setattr__(self, "extensions", extensions)


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
    include_unlisted: bool = False,
    rest_url: str | None = None,
    grpc_url: str | None = None,
    preferred: str = "JSONRPC",
    protocol_versions: t.Collection[str] = ("1.0",),
) -> dict[str, t.Any]:
    """The AgentCard in ProtoJSON (without signatures); ``rest_url``: the HTTP+JSON
    interface, ``grpc_url``: the gRPC one (``host:port``, the spec's form), listed after the
    JSON-RPC one in that order, but the ``preferred`` binding first. With ``"0.3"`` in
    ``protocol_versions`` the same URLs of JSON-RPC and HTTP+JSON are listed again as v0.3
    interfaces, and the card carries the fields a v0.3 resolver reads (``url``,
    ``protocolVersion``...)."""
    capabilities: dict[str, t.Any] = {
        "streaming": streaming,
        "pushNotifications": push,
        "extendedAgentCard": extended,
    }
    if card.extensions:
        capabilities["extensions"] = [
            e.to_wire() if isinstance(e, AgentExtension) else dict(e) for e in card.extensions
        ]
    urls = {"JSONRPC": endpoint_url, "HTTP+JSON": rest_url, "GRPC": grpc_url}
    interfaces = [
        {"url": url, "protocolBinding": binding, "protocolVersion": PROTOCOL_VERSION}
        for binding, url in urls.items()
        if url is not None
    ]
    interfaces.sort(key=lambda i: i["protocolBinding"] != preferred)  # stable: the rest in order
    legacy = []
    if "0.3" in protocol_versions:
        legacy = [
            {**i, "protocolVersion": "0.3"}
            for i in interfaces
            if i["protocolBinding"] in V03_BINDINGS
        ]
    out: dict[str, t.Any] = {
        "name": card.name,
        "description": card.description,
        "supportedInterfaces": interfaces + legacy,
        "version": card.version,
        "capabilities": capabilities,
        "defaultInputModes": list(card.default_input_modes),
        "defaultOutputModes": list(card.default_output_modes),
        "skills": [skill_entry(s) for s in skills if s.public or include_unlisted],
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
    return v03_card.card_fields(out, legacy) if legacy else out


def etag_of(body: str) -> str:
    return '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'


def encode_card(card: dict[str, t.Any]) -> str:
    return json.dumps(card, separators=(",", ":"), ensure_ascii=True)


def check_card_config(
    card: AgentCard, settings: Settings, signing_keys: t.Sequence[SigningKey], app: Flask
) -> None:
    """Refuse, at startup, configurations that would advertise or sign the wrong thing."""
    path = card.endpoint_path
    if path is not None and path != settings.path:
        raise ConfigRuntimeError(
            f"the agent card (card=) advertises endpoint_path {path!r} but the exchange is "
            f"mounted at A2A_PATH {settings.path!r}; the two must name the same path"
        )
    if signing_keys:
        check_signing_keys(signing_keys)
        kids = [k.kid for k in signing_keys]
        if len(set(kids)) != len(kids):
            raise ConfigError(f"A2A signing_keys= must have distinct kids, got {kids}")
        if not settings.public_base_url and not app.config.get("TRUSTED_HOSTS"):
            raise ConfigRuntimeError(
                "A2A signing_keys=: a signed card built from the request's Host header would "
                "sign any host a caller names: set A2A_PUBLIC_BASE_URL or TRUSTED_HOSTS"
            )


def check_signing_keys(signing_keys: t.Sequence[t.Any]) -> None:
    """Each key is a ``SigningKey`` (a JWK dict or a PEM is not: say what to pass instead)."""
    try:
        from .signing import SigningKey
    except ImportError:
        raise ConfigRuntimeError(
            "A2A signing_keys= needs the signing extra: pip install 'flask-a2a[signing]'"
        ) from None
    for index, key in enumerate(signing_keys):
        if not isinstance(key, SigningKey):
            raise ConfigTypeError(
                f"A2A signing_keys= takes flask_a2a.card.signing.SigningKey objects "
                f"(SigningKey.from_pem(pem), or SigningKey(kid, private_key)); "
                f"signing_keys[{index}] is a {type(key).__name__}"
            )


class CardPublisher:
    """Renders, signs and serves the card and the discovery documents of one app."""

    def __init__(
        self,
        card: AgentCard,
        settings: Settings,
        exchange: Exchange,
        signing_keys: t.Sequence[SigningKey] = (),
    ) -> None:
        self.card = card
        self.settings = settings
        self.exchange = exchange
        self.signing_keys = tuple(signing_keys)
        #: The card's content is fixed at startup (only the base URL follows the request).
        self.last_modified = int(time.time())
        self._signed: collections.OrderedDict[str, dict[str, t.Any]] = collections.OrderedDict()
        self._lock = threading.Lock()

    # -- rendering

    def base_url(self) -> str:
        """The public base URL: configured, or the request's (ProxyFix-aware) root URL."""
        if self.settings.public_base_url:
            return self.settings.public_base_url.rstrip("/")
        if not has_request_context():
            raise RuntimeError("the card's URL needs a request or A2A_PUBLIC_BASE_URL")
        return request.root_url.rstrip("/")

    def jku(self) -> str:
        return self.base_url() + self.settings.jwks_path

    def render(
        self, card: AgentCard | None = None, *, include_unlisted: bool = False
    ) -> dict[str, t.Any]:
        """The card as served: derived fields filled in, signed when keys are configured."""
        rest = self.settings.rest_mount
        unsigned = build_card(
            card or self.card,
            endpoint_url=self.base_url() + self.settings.path,
            skills=self.exchange.skills.values(),
            streaming=True,
            push=self.exchange.push is not None,
            extended=self.exchange.extended_card is not None,
            include_unlisted=include_unlisted,
            rest_url=None if rest is None else self.base_url() + rest,
            grpc_url=self.settings.grpc_url,
            preferred=self.settings.preferred_binding,
            protocol_versions=self.settings.protocol_versions,
        )
        return self.sign(unsigned)

    def sign(self, unsigned: dict[str, t.Any]) -> dict[str, t.Any]:
        """Signatures are cached per content so the ETag stays stable (ES256 is randomized)."""
        if not self.signing_keys:
            return unsigned
        from .signing import sign_card

        key = encode_card(unsigned)
        with self._lock:
            found = self._signed.get(key)
            if found is not None:
                self._signed.move_to_end(key)
                return found
        signed = sign_card(unsigned, self.signing_keys, self.jku())
        with self._lock:
            self._signed[key] = signed
            while len(self._signed) > _SIGNED_CACHE_SIZE:
                self._signed.popitem(last=False)
        return signed

    def extended(self, found: t.Any) -> t.Any:
        """What the host's ``extended_card(principal)`` returned, as GetExtendedAgentCard
        answers it: an AgentCard becomes a full card, listing unlisted skills too (its callers
        are authenticated)."""
        if isinstance(found, AgentCard):
            return self.render(found, include_unlisted=True)
        return found

    def jwks(self) -> dict[str, t.Any]:
        from .signing import jwks

        return jwks(self.signing_keys)

    def protected_resource(self, resource: str) -> dict[str, t.Any]:
        """RFC 9728 metadata for ``resource``."""
        out: dict[str, t.Any] = {
            "resource": resource,
            "authorization_servers": list(self.settings.authorization_servers),
            "bearer_methods_supported": ["header"],
            "resource_name": self.card.name,
        }
        if self.settings.scopes_supported:
            out["scopes_supported"] = list(self.settings.scopes_supported)
        if self.card.documentation_url:
            out["resource_documentation"] = self.card.documentation_url
        if self.signing_keys:
            out["jwks_uri"] = self.jku()
        return out

    # -- views

    def conditional(self, document: dict[str, t.Any]) -> Response:
        """JSON with ETag / Last-Modified / Cache-Control; 304 when the client is current."""
        body = encode_card(document)
        etag = etag_of(body)
        headers = {
            "ETag": etag,
            "Cache-Control": f"public, max-age={self.settings.card_max_age}",
            "Last-Modified": http_date(self.last_modified),
            "Access-Control-Allow-Origin": "*",
        }
        if request.if_none_match:
            if request.if_none_match.contains_weak(etag.strip('"')):  # RFC 9110: weak compare
                return Response(status=304, headers=headers)
        elif request.if_modified_since is not None:
            if request.if_modified_since.timestamp() >= self.last_modified:
                return Response(status=304, headers=headers)
        return Response(body, 200, headers, mimetype="application/json")

    def card_view(self) -> Response:
        return self.conditional(self.render())

    def jwks_view(self) -> Response:
        return self.conditional(self.jwks())

    def protected_resource_view(self) -> Response:
        return self.conditional(self.protected_resource(self.base_url()))

    def protected_resource_for_path_view(self) -> Response:
        return self.conditional(self.protected_resource(self.base_url() + self.settings.path))

    def healthz_view(self) -> Response:
        from ..ops.health import report

        status, body = report(self.exchange)
        return Response(json.dumps(body), status, mimetype="application/json")

    # -- wiring

    def add_routes(self, bp: t.Any, prefix: str = "", well_known: bool = True) -> None:
        """The discovery routes on the extension's blueprint (card, JWKS, RFC 9728, health).

        An agent mounted under ``prefix`` serves its card at ``<prefix>`` + the card path, and
        also at the card path itself when it is the app's ``well_known`` agent.
        """
        bp.add_url_rule(prefix + AGENT_CARD_PATH, "agent_card", self.card_view, methods=["GET"])
        if prefix and well_known:
            bp.add_url_rule(AGENT_CARD_PATH, "agent_card_root", self.card_view, methods=["GET"])
        if self.signing_keys:
            bp.add_url_rule(self.settings.jwks_path, "jwks", self.jwks_view, methods=["GET"])
        if self.settings.authorization_servers and well_known:
            bp.add_url_rule(
                PROTECTED_RESOURCE_PATH,
                "protected_resource",
                self.protected_resource_view,
                methods=["GET"],
            )
        if self.settings.authorization_servers:
            bp.add_url_rule(
                PROTECTED_RESOURCE_PATH + self.settings.path,
                "protected_resource_for_path",
                self.protected_resource_for_path_view,
                methods=["GET"],
            )
        if self.settings.role == "agent":
            bp.add_url_rule(prefix + HEALTH_PATH, "healthz", self.healthz_view, methods=["GET"])

    def guard_agent_role(
        self, app: Flask, endpoints: t.Container[str] = AGENT_ROLE_ENDPOINTS
    ) -> None:
        """``A2A_ROLE=agent``: every endpoint but the agent's answers 404, before any other hook.

        The one place the extension affects the whole app: replicas in this role serve agents
        alone, so the host's pages and APIs must not be reachable through them. ``endpoints``
        are those served (every agent's, when an app has several: the extension passes one
        set they all add to, and guards once).
        """
        if self.settings.role != "agent":
            return

        def only_agent_routes() -> None:
            if request.endpoint not in endpoints:
                abort(404)

        app.before_request_funcs.setdefault(None, []).insert(0, only_agent_routes)
