"""A test app built the way a ten-year-old Flask app is built, with A2A added last.

Flask-SQLAlchemy models with an integer owner column, token auth in ``before_request`` (and a
cookie login for the browser pages), a REST blueprint with its own auth check, Flask-WTF's
``CSRFProtect`` over every form, Flask-Migrate for the schema, and integer user ids. The
extensions are registered in the order such apps have them (``A2A`` before ``SQLAlchemy`` on
purpose: registration order must not matter). tests/test_legacy_app.py drives it over the test
client and under ``gunicorn -k gevent -w 2`` on PostgreSQL.

``LEGACY_DATABASE_URL`` picks the database (SQLite in a temporary file when unset).
"""

from __future__ import annotations

import decimal
import os
import tempfile
import typing as t

import sqlalchemy as sa
from flask import Blueprint, Flask, abort, g, jsonify, request, session
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect
from marshmallow import Schema, fields

from flask_a2a import A2A, Entity, Part, Skill, TaskContext, from_prefixed_env
from flask_a2a.entities import host_schema
from flask_a2a.store import migrations as a2a_migrations

db = SQLAlchemy()
migrate = Migrate()
csrf = CSRFProtect()


class User(db.Model):  # type: ignore[name-defined]
    __tablename__ = "users"
    id = db.Column(db.Integer, primary_key=True)
    name = db.Column(db.String(80), nullable=False)
    api_token = db.Column(db.String(64), unique=True, nullable=False)


class Invoice(db.Model):  # type: ignore[name-defined]
    __tablename__ = "invoices"
    id = db.Column(db.Integer, primary_key=True)
    owner_id = db.Column(db.Integer, db.ForeignKey("users.id"), index=True, nullable=False)
    total = db.Column(db.Numeric(10, 2), nullable=False)


class InvoiceSchema(Schema):
    id = fields.Integer(dump_only=True)
    total = fields.Decimal(required=True, as_string=True)


api = Blueprint("api", __name__, url_prefix="/api")


@api.before_request
def require_user() -> t.Any:
    """The REST API's own gate, as such blueprints have it."""
    if g.user is None:
        return jsonify({"error": "authentication required"}), 401
    return None


@api.get("/invoices")
def list_invoices() -> t.Any:
    """Hand-written: takes ``page`` (10 a page) and nothing else."""
    page = max(1, request.args.get("page", 1, type=int))
    rows = db.session.execute(
        sa.select(Invoice)
        .where(Invoice.owner_id == g.user.id)
        .order_by(Invoice.id)
        .offset((page - 1) * 10)
        .limit(10)
    ).scalars()
    return jsonify({"data": host_schema.dump(InvoiceSchema(), rows, many=True)})


@api.get("/invoices/<int:invoice_id>")
def get_invoice(invoice_id: int) -> t.Any:
    row = db.session.get(Invoice, invoice_id)
    if row is None or row.owner_id != g.user.id:
        abort(404)
    return jsonify(host_schema.dump(InvoiceSchema(), row))


def total_invoices(task: TaskContext) -> dict[str, t.Any]:
    """A skill on the app's own session: the caller's total (returned as its one artifact)."""
    owner = int(task.principal.owner)
    total = db.session.scalar(
        sa.select(sa.func.coalesce(sa.func.sum(Invoice.total), 0)).where(Invoice.owner_id == owner)
    )
    count = db.session.scalar(
        sa.select(sa.func.count()).select_from(Invoice).where(Invoice.owner_id == owner)
    )
    return {"owner": owner, "count": count, "total": str(decimal.Decimal(total))}


def user_name(task: TaskContext) -> None:
    """A streamed skill: the caller's name, read through the app's session."""
    task.working()
    user = db.session.get(User, int(task.principal.owner))
    task.artifact([Part(text=user.name if user else "?")], name="name")


def principal() -> int | None:
    """What such apps have at hand: the integer primary key of the logged-in user."""
    return g.user.id if g.user is not None else None


a2a = A2A(
    skills=[
        Skill(
            id="invoice-total",
            name="Invoice total",
            description="Sum the caller's invoices.",
            handler=total_invoices,
        ),
        Skill(
            id="user-name", name="User name", description="The caller's name.", handler=user_name
        ),
    ],
    entities=[
        Entity(
            "invoices", schema=InvoiceSchema(), url="/api/invoices", arguments={"list": ["page"]}
        ),
    ],
    principal=principal,
)


def create_app(config: t.Mapping[str, t.Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config["SECRET_KEY"] = "legacy-secret"
    url = os.environ.get("LEGACY_DATABASE_URL")
    if not url:
        folder = tempfile.mkdtemp(prefix="flask_a2a_legacy_")
        url = f"sqlite:///{os.path.join(folder, 'legacy.db')}"
    app.config["SQLALCHEMY_DATABASE_URI"] = url
    from_prefixed_env(app.config, "LEGACY")
    app.config.update(config or {})

    @app.before_request
    def load_user() -> None:
        """Token auth for API callers, the session cookie for the browser pages."""
        g.user = None
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme == "Bearer" and token:
            g.user = db.session.scalar(sa.select(User).where(User.api_token == token))
        elif "user_id" in session:
            g.user = db.session.get(User, session["user_id"])

    @app.post("/login")
    def login() -> t.Any:
        """A browser form: CSRFProtect guards it (it is not exempt)."""
        user = db.session.scalar(sa.select(User).where(User.name == request.form["name"]))
        if user is None:
            abort(403)
        session["user_id"] = user.id
        return "ok"

    a2a.init_app(app)  # before SQLAlchemy and CSRFProtect: order must not matter
    db.init_app(app)
    migrate.init_app(app, db, include_name=a2a_migrations.include_name())
    csrf.init_app(app)
    csrf.exempt(api)  # a token API, as legacy apps exempt theirs
    app.register_blueprint(api)
    with app.app_context():
        if app.config.get("LEGACY_CREATE_ALL", True):
            db.create_all()
            seed()
    return app


def seed() -> None:
    """Two users (ids 1 and 2) and their invoices, once."""
    if db.session.get(User, 1) is not None:
        return
    db.session.add_all(
        [
            User(id=1, name="alice", api_token="alice-token"),
            User(id=2, name="bob", api_token="bob-token"),
        ]
    )
    db.session.commit()
    db.session.add_all(
        [
            Invoice(owner_id=1, total=decimal.Decimal("120.00")),
            Invoice(owner_id=1, total=decimal.Decimal("80.50")),
            Invoice(owner_id=2, total=decimal.Decimal("999.99")),
        ]
    )
    db.session.commit()
