"""A webhook receiver that acts on a notification only once ``verify_notification`` accepts it.

The agent signs every notification with its card's signing keys (docs/push.md); this receiver
checks the JWT against the agent's JWKS, the body against the JWT, its own URL against ``aud``,
the age, and the ``jti`` against the ones it already accepted, then the config's token.

    export AGENT_JWKS=https://agent.example.com/.well-known/jwks.json
    export WEBHOOK_URL=https://hooks.example.com/a2a     # the URL you register with the agent
    flask --app examples/push_receiver.py run --port 8001
"""

from __future__ import annotations

import hmac
import os
import typing as t

from flask import Flask, current_app, request

from flask_a2a.push import NotificationRejected, ReplayedNotification, verify_notification

#: Seconds after it was signed that a notification is still accepted.
MAX_AGE = 300


def notification() -> tuple[t.Any, int]:
    """``POST /a2a``: one notification; 204 once handled, 401 when it does not verify."""
    config = current_app.config
    try:
        note = verify_notification(
            request, config["AGENT_JWKS"], audience=config["WEBHOOK_URL"], max_age=MAX_AGE
        )
    except ReplayedNotification:
        # Seen and handled already: a sender's retry whose answer was lost, or a replay.
        # Acknowledge it so a retry stops, and do nothing again.
        return "", 200
    except NotificationRejected as exc:
        current_app.logger.warning("rejected a push notification: %s", exc)
        return {"error": exc.reason}, 401
    # The token you chose when registering the config (A2A §13.2: check it too).
    expected = config["NOTIFICATION_TOKENS"].get(note.task_id)
    sent = request.headers.get("X-A2A-Notification-Token", "")
    if expected is not None and not hmac.compare_digest(sent, expected):
        return {"error": "token"}, 401
    event = note.json()  # the bare StreamResponse the signature covers
    current_app.extensions["notifications"].append((note.task_id, event))
    return "", 204


def create_receiver(
    agent_jwks: t.Any = None,
    webhook_url: str | None = None,
    tokens: dict[str, str] | None = None,
) -> Flask:
    """The receiver app: ``agent_jwks`` is the agent's JWKS URL or the JWKS document itself.

    ``app.extensions["notifications"]`` collects ``(task id, event)`` as they are accepted.
    """
    app = Flask(__name__)
    app.config["AGENT_JWKS"] = agent_jwks or os.environ["AGENT_JWKS"]
    app.config["WEBHOOK_URL"] = webhook_url or os.environ["WEBHOOK_URL"]
    app.config["NOTIFICATION_TOKENS"] = dict(tokens or {})
    app.extensions["notifications"] = []
    app.add_url_rule("/a2a", "notification", notification, methods=["POST"])
    return app


#: ``flask --app examples/push_receiver.py run`` calls it (configured from the environment).
create_app = create_receiver
