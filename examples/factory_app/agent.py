"""The ``A2A`` object, in a module of its own: it is built from the skills and the entities
(which import the models), and ``create_app`` calls ``a2a.init_app(app)``."""

from __future__ import annotations

import sqlalchemy as sa

from flask_a2a import A2A, Entity
from flask_a2a.auth import httpauth_principal

from .api import InvoiceSchema
from .extensions import db, token_auth
from .models import User
from .skills import SKILLS


def owner_lookup(name: str) -> int | None:
    """``flask a2a tasks susan``: a user name to the owner id the principal hook returns."""
    return db.session.scalar(sa.select(User.id).where(User.username == name))


a2a = A2A(
    skills=SKILLS,
    entities=[Entity("invoices", schema=InvoiceSchema(), url="/api/invoices",
                     arguments={"list": ["page"]}, operations=("list", "get"))],
    principal=httpauth_principal(token_auth),
    owner_lookup=owner_lookup,
)  # fmt: skip
