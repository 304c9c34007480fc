"""An app whose invoices are an entity skill: ``entity.invoices`` over a generated CRUD API.

Run it with ``flask --app examples/invoices.py run`` (SQLite in a fresh temporary file, seeded
with a few invoices for Alice and Bob). The app serves ``/api/invoices`` itself (the generated,
owner-scoped blueprint); the exchange re-enters those routes with the caller's credentials, so
Alice's ``entity.invoices`` list is exactly what her own ``GET /api/invoices`` returns::

    curl -s http://127.0.0.1:5000/a2a -H 'Authorization: Bearer alice-token' \\
      -H 'Content-Type: application/json' \\
      -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{
           "messageId":"m-1","role":"ROLE_USER","parts":[{"data":{
           "skill":"entity.invoices","operation":"list","arguments":{"limit":10}}}]}}}'

Demo tokens (``Authorization: Bearer <token>``): ``alice-token``, ``bob-token``.
"""

from __future__ import annotations

import datetime
import decimal
import os
import tempfile
import typing as t
import uuid

import sqlalchemy as sa
from flask import Flask, request
from marshmallow import Schema, fields
from sqlalchemy.orm import declarative_base, sessionmaker

from flask_a2a import A2A, AgentCard, Entity, Principal
from flask_a2a.entities import crud_blueprint

DEMO_TOKENS: dict[str, Principal] = {
    "alice-token": Principal(owner="alice"),
    "bob-token": Principal(owner="bob"),
}


Base: t.Any = declarative_base()  # the declarative spelling SQLAlchemy 1.4 and 2.x share


class Invoice(Base):
    __tablename__ = "invoices"
    id = sa.Column(sa.String(36), primary_key=True, default=lambda: str(uuid.uuid4()))
    owner_id = sa.Column(sa.String(64), nullable=False, index=True)
    due_at = sa.Column(sa.Date, nullable=False)
    total = sa.Column(sa.Numeric(10, 2), nullable=False)


class InvoiceSchema(Schema):
    id = fields.String(dump_only=True)
    due_at = fields.Date(required=True)
    total = fields.Decimal(required=True, as_string=True)


def principal() -> Principal | None:
    """The app's own auth: a bearer token. It guards /a2a and /api/invoices alike."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return DEMO_TOKENS.get(token.strip()) if scheme.lower() == "bearer" else None


def _seed(sessions: sessionmaker[sa.orm.Session]) -> None:
    with sessions() as db:
        for owner, due, total in (
            ("alice", "2026-10-01", "120.00"),
            ("alice", "2026-11-01", "80.50"),
            ("bob", "2026-10-15", "999.99"),
        ):
            db.add(
                Invoice(
                    owner_id=owner,
                    due_at=datetime.date.fromisoformat(due),
                    total=decimal.Decimal(total),
                )
            )
        db.commit()


def create_app(config: t.Mapping[str, t.Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(config or {})
    url = app.config.get("INVOICES_DATABASE_URL")
    if not url:
        folder = tempfile.mkdtemp(prefix="flask_a2a_invoices_")
        url = f"sqlite:///{os.path.join(folder, 'invoices.db')}"
    engine = sa.create_engine(url)
    Base.metadata.create_all(engine)
    sessions = sessionmaker(engine)
    _seed(sessions)
    app.register_blueprint(
        crud_blueprint(
            "invoices_api",
            model=Invoice,
            schema=InvoiceSchema(),
            session=sessions,
            owner=principal,
            owner_column="owner_id",
            url_prefix="/api/invoices",
        )
    )
    A2A(
        app,
        entities=[Entity("invoices", schema=InvoiceSchema(), url="/api/invoices")],
        principal=principal,
        card=AgentCard(
            name="flask_a2a invoices agent",
            description="The caller's invoices, as the entity.invoices skill.",
        ),
    )
    return app
