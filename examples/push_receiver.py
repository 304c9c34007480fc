"""A webhook receiver that acts only on notifications for the push configs it registered.

The agent signs every notification with its card's signing keys (docs/push.md), and
``verify_notification`` checks the JWT against the agent's JWKS, the body against the JWT, this
receiver's URL against ``aud``, the age, and the ``jti`` against the ones it already accepted.
That proves **the agent** sent it, not that it is about **your** task: anyone who can create a
task on the agent can register a webhook of their own at this URL, and the agent signs those
notifications too. So this receiver accepts only what it asked for:

- each push config you create carries a token you chose, registered here first
  (:func:`expect`, or ``tokens=`` when the task id is known); a notification whose
  ``A2A-Notification-Token`` is none of them is refused (``token``);
- ``verify_notification(..., token=...)`` checks that the signed ``token_sha256`` claim is the
  hash of that token (the notification was made for a config holding it), and ``config_id=``
  that it names the same config as before (``config``);
- its task must be the one registered with the token: given to :func:`expect`, else the task
  of the first notification verified with it (a config's first notification is its task);
  another task id is refused (``unknown_task``).

    export AGENT_JWKS=https://agent.example.com/.well-known/jwks.json
    export WEBHOOK_URL=https://hooks.example.com/a2a     # the URL you register with the agent
    flask --app examples/push_receiver.py run --port 8001
"""

from __future__ import annotations

import dataclasses
import os
import threading
import typing as t

from flask import Flask, current_app, request

from flask_a2a import NotificationRejected
from flask_a2a.push import ReplayedNotification, token_hash, verify_notification

#: Seconds after it was signed that a notification is still accepted.
MAX_AGE = 300


@dataclasses.dataclass
class Expected:
    """A push config this receiver asked for: its token, and its task and id once known."""

    token: str
    task_id: str | None = None
    config_id: str | None = None


_pinning = threading.Lock()


def expect(app: Flask, token: str, task_id: str | None = None) -> None:
    """Register a config's token before creating the config (and its task, when known)."""
    app.extensions["push_expected"][token_hash(token)] = Expected(token, task_id)


def notification() -> tuple[t.Any, int]:
    """``POST /a2a``: one notification; 204 once handled, 401 when it is not one of ours."""
    config = current_app.config
    sent = request.headers.get("A2A-Notification-Token") or request.headers.get(
        "X-A2A-Notification-Token", ""
    )
    expected = current_app.extensions["push_expected"].get(token_hash(sent)) if sent else None
    if expected is None:
        current_app.logger.warning("refused a push notification: not a token we registered")
        return {"error": "token"}, 401
    try:
        note = verify_notification(
            request,
            config["AGENT_JWKS"],
            audience=config["WEBHOOK_URL"],
            max_age=MAX_AGE,
            config_id=expected.config_id,
            token=expected.token,
            allow_http=config["AGENT_JWKS_ALLOW_HTTP"],
        )
    except ReplayedNotification:
        # Seen and handled already: a sender's retry whose answer was lost, or a replay.
        # Acknowledge it so a retry stops, and do nothing again.
        return "", 200
    except NotificationRejected as exc:
        current_app.logger.warning("refused a push notification: %s", exc)
        return {"error": exc.reason}, 401
    with _pinning:
        if expected.task_id is None:
            expected.task_id = note.task_id
        if expected.config_id is None:
            expected.config_id = note.config_id
    if note.task_id != expected.task_id:
        current_app.logger.warning("refused a push notification for task %s", note.task_id)
        return {"error": "unknown_task"}, 401
    event = note.json()  # the bare StreamResponse the signature covers
    current_app.extensions["notifications"].append((note.task_id, event))
    return "", 204


def create_receiver(
    agent_jwks: t.Any = None,
    webhook_url: str | None = None,
    tokens: dict[str, str] | None = None,
    *,
    allow_http: bool | None = None,
) -> Flask:
    """The receiver app: ``agent_jwks`` is the agent's JWKS URL or the JWKS document itself.

    ``tokens`` maps a task id to the token of its config; :func:`expect` adds one whose task
    is not known yet. ``allow_http`` (or ``AGENT_JWKS_ALLOW_HTTP=1``) accepts an ``http://``
    JWKS URL: development only. ``app.extensions["notifications"]`` collects
    ``(task id, event)`` as they are accepted.
    """
    app = Flask(__name__)
    app.config["AGENT_JWKS"] = agent_jwks or os.environ["AGENT_JWKS"]
    app.config["WEBHOOK_URL"] = webhook_url or os.environ["WEBHOOK_URL"]
    if allow_http is None:
        allow_http = os.environ.get("AGENT_JWKS_ALLOW_HTTP") == "1"
    app.config["AGENT_JWKS_ALLOW_HTTP"] = allow_http
    app.extensions["push_expected"] = {}
    for task_id, token in (tokens or {}).items():
        expect(app, token, task_id)
    app.extensions["notifications"] = []
    app.add_url_rule("/a2a", "notification", notification, methods=["POST"])
    return app


#: ``flask --app examples/push_receiver.py run`` calls it (configured from the environment).
create_app = create_receiver
