"""The app the reply and follow-up interop tests run under gunicorn -k gevent.

``ping`` answers with a message (``task.reply()``); ``chat`` reads follow-ups until "bye".
"""

from __future__ import annotations

from flask import Flask

from examples.agent import principal
from flask_a2a import A2A, Part, Skill, TaskContext, from_prefixed_env


def ping(task: TaskContext) -> None:
    task.reply(f"pong: {task.message.text}")


def chat(task: TaskContext) -> None:
    task.working("listening")
    heard: list[str] = []
    for _ in range(100):
        message = task.receive(timeout=20)
        if message is None:
            break
        heard.append(message.text)
        if message.text == "bye":
            break
    task.artifact([Part(text=" ".join(heard))], name="heard")


def create_app() -> Flask:
    app = Flask(__name__)
    from_prefixed_env(app.config)
    A2A(
        app,
        skills=[
            Skill(id="ping", name="Ping", description="Answers with a message.", handler=ping),
            Skill(id="chat", name="Chat", description="Reads follow-ups.", handler=chat),
        ],
        principal=principal,
    )
    return app
