"""The app the issue 24 wire tests serve (test client, werkzeug and ``gunicorn -k gevent``):
skills that declare media types, one that declares none, one that fails, one that pauses for
auth. Settings come from ``FLASK_A2A_*`` environment variables (``from_prefixed_env``)."""

from __future__ import annotations

import typing as t

from flask import Flask

from examples.agent import principal
from flask_a2a import A2A, Part, Skill, TaskContext, from_prefixed_env


def echo(task: TaskContext) -> None:
    task.artifact([Part(text=task.message.text or "ok")], name="echo")


def fail(task: TaskContext) -> None:
    raise RuntimeError("boom")


def sign_in(task: TaskContext) -> None:
    """Pauses for auth the first time; the message that resumes it completes it, saying which
    ``X-API-Key`` that resuming request carried (credentials are the request's, per run)."""
    if len(task.history) < 2:
        task.require_auth("sign in first")
        return
    task.artifact([Part(text=f"key={task.credentials.get('X-API-Key', '-')}")], name="auth")


def skills() -> list[Skill]:
    return [
        Skill(id="echo", name="Echo", description="Text in, text out.", handler=echo,
              input_modes=("text/plain",), output_modes=("text/plain",)),
        Skill(id="json_only", name="JSON", description="JSON in and out.", handler=echo,
              input_modes=("application/json",), output_modes=("application/json",)),
        Skill(id="images", name="Images", description="Any image in.", handler=echo,
              input_modes=("image/*",), output_modes=("text/plain",)),
        Skill(id="plain", name="Plain", description="Declares no modes.", handler=echo),
        Skill(id="fail", name="Fail", description="Raises.", handler=fail),
        Skill(id="sign_in", name="Sign in", description="Pauses for auth.", handler=sign_in,
              input_modes=("application/json",)),
    ]  # fmt: skip


def create_app(config: t.Mapping[str, t.Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config["A2A_BLOCKING_WRITE_DELAY"] = 0
    app.config["A2A_ALLOW_PRIVATE_PUSH"] = True
    from_prefixed_env(app.config)  # FLASK_A2A_CHECK_MEDIA_TYPES=refuse -> A2A_CHECK_…
    app.config.update(config or {})
    A2A(app, skills=skills(), principal=principal)
    return app
