"""Several agents in one app: support (the default, at /a2a), billing (/billing) and search
(/search), each with its own skills, card and limits, sharing one store and run pool.

Run it with ``flask --app examples/several_agents.py run``; the cards are at
``/.well-known/agent-card.json`` (support), ``/billing/.well-known/agent-card.json`` and
``/search/.well-known/agent-card.json``. Pick an agent in the CLI with ``--agent``:
``flask --app examples/several_agents.py a2a --agent billing skills``.

Demo tokens as in ``examples/agent.py`` (``Authorization: Bearer alice-token``).
"""

from __future__ import annotations

import typing as t

from flask import Flask

from examples.agent import principal
from flask_a2a import A2A, AgentCard, Part, Skill, TaskContext

INVOICES: dict[str, list[dict[str, t.Any]]] = {
    "alice": [{"id": "1", "total": "120.00"}, {"id": "2", "total": "35.50"}],
    "bob": [{"id": "3", "total": "999.99"}],
}
ARTICLES = ["Resetting a password", "Changing the billing address", "Exporting invoices"]


def open_ticket(task: TaskContext) -> None:
    """Support: turn the message into a ticket (here, just its text back)."""
    task.artifact([Part(data={"ticket": task.message.text})], name="ticket")


def invoice_total(task: TaskContext) -> None:
    """Billing: the caller's own invoices, summed."""
    mine = INVOICES.get(task.principal.owner, [])
    total = sum(float(row["total"]) for row in mine)
    task.artifact([Part(data={"invoices": len(mine), "total": f"{total:.2f}"})], name="total")


def search(task: TaskContext) -> None:
    """Search: the help articles whose title holds the message's words."""
    words = task.message.text.lower().split()
    found = [a for a in ARTICLES if all(w in a.lower() for w in words)]
    task.artifact([Part(data={"articles": found})], name="results")


support = A2A(
    skills=[
        Skill(
            id="open-ticket",
            name="Open a ticket",
            description="Opens a support ticket.",
            handler=open_ticket,
        )
    ],
    principal=principal,
    card=AgentCard(name="Support", description="Opens support tickets."),
)
billing = A2A(
    name="billing",
    url_prefix="/billing",
    skills=[
        Skill(
            id="invoice-total",
            name="Invoice total",
            description="Sums the caller's invoices.",
            handler=invoice_total,
        )
    ],
    principal=principal,
    card=AgentCard(name="Billing", description="Answers questions about your invoices."),
    config={"A2A_MAX_CONCURRENT_RUNS_PER_OWNER": 2},  # billing's own limit
)
search_agent = A2A(
    name="search",
    url_prefix="/search",
    skills=[
        Skill(
            id="search-help",
            name="Search help",
            description="Searches help articles.",
            handler=search,
        )
    ],
    principal=principal,
    card=AgentCard(name="Search", description="Searches the help center."),
    config={"A2A_TASK_TIMEOUT": 10.0},
)


def create_app() -> Flask:
    app = Flask(__name__)
    for agent in (support, billing, search_agent):  # the first registered is the default
        agent.init_app(app)
    return app


app = create_app()
