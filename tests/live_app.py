"""The app the live tests run under gunicorn: demo tokens, an echo, and a gate a test opens.

Settings come from ``FLASK_A2A_*`` environment variables (Flask's ``from_prefixed_env``).
``POST /test/release`` opens the gate for every run waiting on it.
"""

from __future__ import annotations

import logging
import os
import threading

from flask import Flask

from examples.agent import principal
from flask_a2a import A2A, Part, Skill, TaskContext, from_prefixed_env

GATE = threading.Event()


def gate(task: TaskContext) -> None:
    task.working()
    while not GATE.wait(0.05):
        task.check()
    task.artifact([Part(text="released")], name="gate")


def echo(task: TaskContext) -> None:
    task.artifact([Part(text=task.message.text)], name="echo")


def create_app() -> Flask:
    app = Flask(__name__)
    from_prefixed_env(app.config)  # FLASK_A2A_KEEPALIVE_INTERVAL=0.5 -> A2A_KEEPALIVE_INTERVAL
    if os.environ.get("LIVE_LOG_LEVEL"):  # e.g. INFO: the library's INFO lines in the log
        logging.basicConfig(level=os.environ["LIVE_LOG_LEVEL"])
    A2A(
        app,
        skills=[
            Skill(id="echo", name="Echo", description="Echo.", handler=echo),
            Skill(id="gate", name="Gate", description="Waits for /test/release.", handler=gate),
        ],
        principal=principal,
    )

    @app.post("/test/release")
    def release() -> dict[str, bool]:
        GATE.set()
        return {"released": True}

    @app.get("/test/pid")
    def pid() -> dict[str, int]:
        return {"pid": os.getpid()}

    return app


def extensions(task: TaskContext) -> None:
    task.artifact([Part(text=",".join(sorted(task.extensions)))], name="extensions")


def boom(task: TaskContext) -> None:
    raise RuntimeError("boom \x1b[31m \u202e pwned \x9b")


def create_extensions_app() -> Flask:
    """Two declared extensions, a skill reporting the activated ones, and a raising skill."""
    from flask_a2a import AgentCard, AgentExtension

    app = Flask(__name__)
    A2A(
        app,
        skills=[
            Skill(id="extensions", name="Extensions", description="Reports.", handler=extensions),
            Skill(id="boom", name="Boom", description="Raises.", handler=boom),
        ],
        principal=principal,
        card=AgentCard(
            extensions=[
                AgentExtension("https://example.com/ext/geo/v1"),
                AgentExtension("https://example.com/ext/citations/v1"),
            ]
        ),
    )
    return app


def ask(task: TaskContext) -> None:
    """Asks for a name; the reply "again" asks once more; any other is greeted."""
    if len(task.history) < 2 or task.message.text == "again":
        task.require_input("name?")
        return
    task.artifact([Part(text=f"hi {task.message.text}")], name="greeting")


def create_ask_app() -> Flask:
    """A skill that pauses for input (SubscribeToTask on a paused task, issue 14 item 5)."""
    app = Flask(__name__)
    from_prefixed_env(app.config)
    A2A(
        app,
        skills=[Skill(id="ask", name="Ask", description="Asks a name.", handler=ask)],
        principal=principal,
    )
    return app
