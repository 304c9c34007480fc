"""The official a2a-sdk client over gRPC (``a2a-sdk[grpc]``): every scenario of
``test_interop.py`` — send, stream, read, list, cancel, subscribe, the extended card, push
configs, refusals — with the SDK's ``GrpcTransport``, chosen from the card's GRPC interface.

The agent is examples/agent.py in one process serving both (``flask a2a grpc --http``): its
card (signed, verified with the SDK's verifier) over HTTP, the RPCs over gRPC, on one memory
store. Whatever the SDK cannot read is our bug.
"""

from __future__ import annotations

import pathlib
import typing as t

import pytest

pytest.importorskip("a2a.client", reason="the interop tests need a2a-sdk")
pytest.importorskip(
    "grpc_status", reason="the gRPC interop tests need a2a-sdk[grpc] and grpcio-status"
)

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

from tests.live.test_interop import (  # noqa: E402, F401  (the scenarios, collected here too)
    Agent,
    test_card_resolves_and_the_sdk_verifies_its_signature,
    test_extended_card_over_the_sdk,
    test_push_config_methods_over_the_sdk,
    test_send_get_list_over_the_sdk,
    test_streaming_refusals_are_a2a_errors_over_the_sdk,
    test_streaming_send_over_the_sdk,
    test_subscribe_then_cancel_over_the_sdk,
    test_subscribe_to_a_paused_task_sees_the_completion_over_the_sdk,
    test_subscribe_to_a_terminal_task_over_the_sdk,
)
from tests.live_server import HOST, LiveGrpc, free_port, wait_http  # noqa: E402

pytestmark = pytest.mark.interop

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[Agent]:
    """examples/agent.py: its card over HTTP (signed), its RPCs over gRPC, one process."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = tmp_path_factory.mktemp("keys") / "card-key.pem"
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    grpc_port, http_port = free_port(), free_port()
    base = f"http://{HOST}:{http_port}"
    grpc_url = f"{HOST}:{grpc_port}"
    env = {
        "PYTHONPATH": str(ROOT),
        "A2A_EXAMPLE_SIGNING_KEY": str(pem),
        "FLASK_A2A_PUBLIC_BASE_URL": base,
        "FLASK_A2A_GRPC_URL": grpc_url,
    }
    server = LiveGrpc(
        "examples/agent.py",
        chdir=str(ROOT),
        env=env,
        port=grpc_port,
        extra=["--http", f"{HOST}:{http_port}"],
    )
    try:
        card_url = base + "/.well-known/agent-card.json"
        assert wait_http(card_url), server.output()
        yield Agent(base, base + "/.well-known/jwks.json", grpc_url)
    finally:
        server.stop()


@pytest.fixture(params=["GRPC"])
def transport(request: pytest.FixtureRequest) -> str:
    """The SDK's ClientFactory restricted to gRPC."""
    return t.cast(str, request.param)
