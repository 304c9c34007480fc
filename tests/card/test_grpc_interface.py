"""The card's GRPC interface: listed at ``A2A_GRPC_URL`` (``host:port``, the spec's form) when it
is configured, and only then; ``A2A_PREFERRED_BINDING="GRPC"`` lists it first. Needs no extra:
the card is served by the web workers, which may run without grpcio."""

from __future__ import annotations

import typing as t

import pytest
from flask import Flask

from flask_a2a import A2A, ConfigError, Principal, Skill
from tests.conftest import echo


def card_of(config: dict[str, t.Any]) -> dict[str, t.Any]:
    app = Flask("grpc_card")
    app.config.update(config)
    a2a = A2A(
        app,
        skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
        principal=lambda: Principal("alice"),
    )
    try:
        answer = app.test_client().get("/.well-known/agent-card.json")
        assert answer.status_code == 200
        return t.cast(dict[str, t.Any], answer.get_json())
    finally:
        a2a.shutdown(2, app)


def interfaces(card: dict[str, t.Any]) -> list[tuple[str, str]]:
    return [(i["protocolBinding"], i["url"]) for i in card["supportedInterfaces"]]


def test_no_grpc_interface_unless_configured() -> None:
    assert [b for b, _ in interfaces(card_of({}))] == ["JSONRPC", "HTTP+JSON"]


def test_the_grpc_interface_is_host_and_port() -> None:
    card = card_of({"A2A_GRPC_URL": "agent.example.com:50051"})
    assert interfaces(card) == [
        ("JSONRPC", "http://localhost/a2a"),
        ("HTTP+JSON", "http://localhost/a2a/rest"),
        ("GRPC", "agent.example.com:50051"),
    ]
    grpc = card["supportedInterfaces"][2]
    assert grpc["protocolVersion"] == "1.0"
    # Without REST, still after JSON-RPC; with 0.3 served, never a v0.3 gRPC interface.
    versions = ["1.0", "0.3"]
    alone = card_of(
        {"A2A_GRPC_URL": "[::1]:50051", "A2A_REST_PATH": "", "A2A_PROTOCOL_VERSIONS": versions}
    )
    listed = [(i["protocolBinding"], i["protocolVersion"]) for i in alone["supportedInterfaces"]]
    assert listed == [("JSONRPC", "1.0"), ("GRPC", "1.0"), ("JSONRPC", "0.3")]


def test_grpc_can_be_the_preferred_interface() -> None:
    card = card_of({"A2A_GRPC_URL": "127.0.0.1:50051", "A2A_PREFERRED_BINDING": "GRPC"})
    assert [b for b, _ in interfaces(card)] == ["GRPC", "JSONRPC", "HTTP+JSON"]


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"A2A_GRPC_URL": "https://agent.example.com:443"}, "must be host:port"),
        ({"A2A_GRPC_URL": "agent.example.com"}, "must be host:port"),
        ({"A2A_GRPC_URL": "agent.example.com:0"}, "must be host:port"),
        ({"A2A_GRPC_URL": "agent.example.com:50051/a2a"}, "must be host:port"),
        ({"A2A_PREFERRED_BINDING": "GRPC"}, "A2A_GRPC_URL is unset"),
        ({"A2A_GRPC_THREADS": 0}, "A2A_GRPC_THREADS must be at least 1"),
    ],
)
def test_bad_grpc_settings_fail_at_startup(config: dict[str, t.Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        card_of(config)
