"""The example agent: bearer-token demo users and three small skills, on the memory store.

Run it with ``flask --app examples/agent.py run`` (or under gunicorn with gevent:
``gunicorn -k gevent -b 127.0.0.1:5000 'examples.agent:create_app()'``).

Demo tokens (``Authorization: Bearer <token>``):

- ``alice-token``: Alice's session (sees all her tasks)
- ``bob-token``: Bob's session
- ``alice-readonly``: a token of Alice's narrowed to the ``tasks:read`` scope (sees only the
  tasks made with that same token)
"""

from __future__ import annotations

import os
import time
import typing as t

from flask import Flask, request

from flask_a2a import A2A, AgentCard, Part, Principal, Skill, TaskContext, from_prefixed_env

#: token -> principal. A real app resolves its own sessions or API tokens here.
DEMO_TOKENS: dict[str, Principal] = {
    "alice-token": Principal(owner="alice"),
    "bob-token": Principal(owner="bob"),
    "alice-readonly": Principal(owner="alice", scopes=frozenset({"tasks:read"})),
}


def principal() -> Principal | None:
    """Runs inside the request, after the app's own auth: who is calling?"""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return DEMO_TOKENS.get(token.strip())


def echo(task: TaskContext) -> None:
    """Send back what was sent: the text, and the data part if there was one."""
    parts = [Part(text=task.message.text)] if task.message.text else []
    data = task.message.data
    if data is not None:
        parts.append(Part(data=data))
    task.artifact(parts or [Part(text="")], name="echo")


def countdown(task: TaskContext) -> None:
    """Stream a few artifact chunks slowly, appended to one artifact."""
    data = task.message.data if isinstance(task.message.data, dict) else {}
    steps = max(1, min(int(data.get("steps", 3)), 20))
    delay = max(0.0, min(float(data.get("delay", 0.5)), 5.0))
    task.working()
    artifact_id = None
    for n in range(steps, 0, -1):
        time.sleep(delay)
        task.check()
        artifact_id = task.artifact(
            [Part(text=f"{n}...")],
            name="countdown",
            artifact_id=artifact_id,
            append=artifact_id is not None,
            last_chunk=n == 1,
        )
    task.complete("liftoff")


def greet(task: TaskContext) -> None:
    """Ask for a name, then greet on resume (the handler runs again with the new message)."""
    if len(task.history) < 2:
        task.require_input("What is your name?")
        return
    name = task.message.text.strip() or "stranger"
    task.artifact([Part(text=f"Hello, {name}!")], name="greeting")


SKILLS = [
    Skill(
        id="echo",
        name="Echo",
        description="Answers with the text and data it was sent.",
        handler=echo,
        tags=("demo",),
        examples=("hello",),
    ),
    Skill(
        id="countdown",
        name="Countdown",
        description='Streams a countdown as artifact chunks. Data: {"steps": 3, "delay": 0.5}.',
        handler=countdown,
        tags=("demo", "streaming"),
    ),
    Skill(
        id="greet",
        name="Greet",
        description="Asks for your name, then greets you.",
        handler=greet,
        tags=("demo", "input-required"),
    ),
]


def extended_card(caller: Principal) -> AgentCard:
    """The card authenticated callers get from GetExtendedAgentCard."""
    return AgentCard(
        name="flask_a2a example agent (extended)",
        description=f"Demo skills for flask_a2a, as seen by {caller.owner}.",
    )


def signing_keys() -> list[t.Any]:
    """``A2A_EXAMPLE_SIGNING_KEY=path/to/key.pem`` signs the card (needs the signing extra)."""
    path = os.environ.get("A2A_EXAMPLE_SIGNING_KEY")
    if not path:
        return []
    from flask_a2a.card import SigningKey

    with open(path, "rb") as pem:
        return [SigningKey.from_pem(pem.read())]


def create_app(config: t.Mapping[str, t.Any] | None = None) -> Flask:
    app = Flask(__name__)
    # FLASK_A2A_PUBLIC_BASE_URL=... in the environment sets A2A_PUBLIC_BASE_URL, and so on.
    from_prefixed_env(app.config)
    app.config.update(config or {})
    A2A(
        app,
        skills=SKILLS,
        principal=principal,
        card=AgentCard(name="flask_a2a example agent", description="Demo skills for flask_a2a."),
        extended_card=extended_card,
        signing_keys=signing_keys(),
    )

    @app.get("/")
    def index() -> dict[str, t.Any]:
        return {"agent": "flask_a2a example", "card": "/.well-known/agent-card.json"}

    return app


app = create_app()
