"""What signing a push notification costs: ``python bench/push_signing.py``.

One notification = one JWT made by ``NotificationSigner.add_to`` (claims, SHA-256 of the body,
one signature) for a typical body (a COMPLETED status update, about 300 bytes). Reports the
mean CPU microseconds per notification for each key type, and what the receiver's check
(``NotificationVerifier.verify_parts``, JWKS already cached) costs, best of ``--rounds``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)

from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: E402

from flask_a2a.card.signing import SigningKey  # noqa: E402
from flask_a2a.protocol.model import PushConfig  # noqa: E402
from flask_a2a.push.tokens import NotificationSigner  # noqa: E402
from flask_a2a.push.verify import NotificationVerifier  # noqa: E402

URL = "https://hooks.example.com/a2a"
CONFIG = PushConfig(id="hook-1", task_id="task", url=URL, token="per-task-secret")
BODY = json.dumps(
    {
        "statusUpdate": {
            "taskId": "8d9e4a02-51cd-435f-a3f0-ecaba310d3c1",
            "contextId": "83d49668-4847-487c-8426-79e1b36d15ce",
            "status": {
                "state": "TASK_STATE_COMPLETED",
                "timestamp": "2026-12-03T21:43:45.791Z",
                "message": {
                    "messageId": "m-1",
                    "role": "ROLE_AGENT",
                    "parts": [{"text": "report ready"}],
                },
            },
        }
    },
    separators=(",", ":"),
).encode()


def per_call_us(call: object, count: int, rounds: int) -> float:
    """Best mean CPU microseconds per call over ``rounds`` runs of ``count`` calls."""
    assert callable(call)
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for n in range(count):
            call(n)
        best = min(best, (time.process_time() - start) / count * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    keys = {
        "ES256 (P-256)": SigningKey("ec", ec.generate_private_key(ec.SECP256R1())),
        "RS256 (2048)": SigningKey("rsa", rsa.generate_private_key(65537, 2048)),
    }
    print(f"body {len(BODY)} bytes; best of {args.rounds} x {args.count} calls, CPU us/call")
    print(f"{'key':16} {'sign (sender)':>14} {'verify (receiver)':>18}")
    for name, key in keys.items():
        signer = NotificationSigner([key], "https://agent.example.com")
        headers: dict[str, str] = {}

        def sign(n: int, signer: NotificationSigner = signer) -> None:
            signer.add_to({}, CONFIG, f"jti-{n}", BODY)

        signer.add_to(headers, CONFIG, "probe", BODY)
        token = headers["Authorization"].removeprefix("Bearer ")
        verifier = NotificationVerifier({"keys": [key.jwk()]}, audience=URL)
        verifier.replay.first_use = lambda jti, until: True  # type: ignore[method-assign]

        def verify(n: int, verifier: NotificationVerifier = verifier, token: str = token) -> None:
            verifier.verify_parts(token, BODY, config_id=CONFIG.id, token=CONFIG.token)

        signing = per_call_us(sign, args.count, args.rounds)
        checking = per_call_us(verify, args.count, args.rounds)
        print(f"{name:16} {signing:14.1f} {checking:18.1f}")


if __name__ == "__main__":
    main()
