"""The app's models, on the ``db`` of ``extensions``."""

from __future__ import annotations

import sqlalchemy as sa

from .extensions import db, token_auth


class User(db.Model):  # type: ignore[name-defined]
    __tablename__ = "users"
    id = db.Column(db.Integer, primary_key=True)
    username = db.Column(db.String(64), unique=True, nullable=False)
    token = db.Column(db.String(64), unique=True, nullable=False)


class Invoice(db.Model):  # type: ignore[name-defined]
    __tablename__ = "invoices"
    id = db.Column(db.Integer, primary_key=True)
    owner_id = db.Column(db.Integer, db.ForeignKey("users.id"), index=True, nullable=False)
    total = db.Column(db.Numeric(10, 2), nullable=False)


@token_auth.verify_token
def verify_token(token: str) -> User | None:
    """Flask-HTTPAuth's check, for the API's views and (through ``httpauth_principal``) the
    exchange alike."""
    return db.session.scalar(sa.select(User).where(User.token == token)) if token else None
