"""The app a push worker runs in for tests/push/test_push_queue.py: ``create_app()``, from the env.

The queue settings come as ``A2A_*`` variables (``from_prefixed_env``-style JSON values);
``PUSH_TEST_RESOLVER=loopback`` makes every name resolve to 127.0.0.1 (the DNS-rebinding
case: a private answer at dial time), and ``PUSH_TEST_SIGNING_PEM`` gives the signing key.
"""

from __future__ import annotations

import json
import os

from flask import Flask

from flask_a2a import A2A, Principal, Skill, TaskContext

#: The A2A_* settings a test passes to the worker (and uses in its own app).
KEYS = (
    "A2A_PUSH_QUEUE",
    "A2A_PUSH_QUEUE_URL",
    "A2A_REDIS_PREFIX",
    "A2A_PUSH_RETRY_ATTEMPTS",
    "A2A_PUSH_RETRY_BACKOFF",
    "A2A_PUSH_RETRY_MAX_DELAY",
    "A2A_PUSH_PAUSE_AFTER",
    "A2A_PUSH_PAUSE_SECONDS",
    "A2A_ALLOW_PRIVATE_PUSH",
    "A2A_PUSH_TIMEOUT",
    "A2A_PUBLIC_BASE_URL",
    "A2A_PUSH_QUEUE_MAX_BYTES_PER_OWNER",
)


def settings_from_env() -> dict[str, object]:
    out: dict[str, object] = {}
    for key in KEYS:
        if key in os.environ:
            raw = os.environ[key]
            try:
                out[key] = json.loads(raw)
            except ValueError:
                out[key] = raw
    return out


def noop(task: TaskContext) -> None:
    task.complete("ok")


def create_app() -> Flask:
    app = Flask("push_worker")
    app.config.update(settings_from_env())
    options: dict[str, object] = {}
    if os.environ.get("PUSH_TEST_RESOLVER") == "loopback":
        options["push_resolver"] = lambda host: ["127.0.0.1"]
    pem = os.environ.get("PUSH_TEST_SIGNING_PEM")
    if pem:
        from flask_a2a.card.signing import SigningKey

        options["signing_keys"] = [SigningKey.from_pem(pem, kid="push-test")]
    A2A(
        app,
        skills=[Skill(id="noop", name="Noop", description="Nothing.", handler=noop)],
        principal=lambda: Principal(owner="worker"),
        **options,  # type: ignore[arg-type]
    )
    return app
