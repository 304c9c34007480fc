"""The system under test for the A2A v0.3 conformance suite (a2aproject/a2a-tck, 0.3.x).

One skill: the task shows ``working`` for a moment (so resubscribe tests find it running),
answers with an artifact, then asks for input (a conversation the suite can follow up on and
cancel); "goodbye" completes it. The
suite sends no credentials, so every caller is one owner and the card declares no security
scheme. Served by gunicorn -k gevent with ``A2A_PROTOCOL_VERSIONS=["1.0", "0.3"]``.
"""

from __future__ import annotations

import threading

from flask import Flask

from flask_a2a import A2A, AgentCard, Part, Skill, TaskContext, from_prefixed_env
from flask_a2a.protocol.model import Principal

#: How long a task stays working before it answers (the reference agent takes about 1.2 s).
WORKING_SECONDS = 0.5


def core(task: TaskContext) -> None:
    """A conversation: each message is answered and the task asks for more (so the suite can
    cancel it and send follow-ups on it), until one says goodbye."""
    task.working()
    pause = threading.Event()
    for _ in range(int(WORKING_SECONDS / 0.05)):  # bounded; a cancel ends it at the check
        pause.wait(0.05)
        task.check()
    text = task.message.text
    task.artifact([Part(text=f"Hello World! You said: {text!r}.")], name="response")
    if "goodbye" in text.lower():
        task.complete("Goodbye!")
    else:
        task.require_input("Anything else?")


def create_app() -> Flask:
    app = Flask(__name__)
    app.config["A2A_PROTOCOL_VERSIONS"] = ["1.0", "0.3"]
    from_prefixed_env(app.config)
    A2A(
        app,
        skills=[Skill(id="core", name="Core", description="Answers a message.", handler=core)],
        principal=lambda: Principal(owner="tck"),
        card=AgentCard(name="flask_a2a TCK agent", security_schemes={}, security_requirements=[]),
    )
    return app
