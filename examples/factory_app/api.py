"""The app's own token API: a blueprint whose views Flask-HTTPAuth guards."""

from __future__ import annotations

import typing as t

import sqlalchemy as sa
from flask import Blueprint, abort, request
from marshmallow import Schema, fields

from flask_a2a.entities.host_schema import dump

from .extensions import db, token_auth
from .models import Invoice

api = Blueprint("api", __name__, url_prefix="/api")


class InvoiceSchema(Schema):
    """Dumped with ``host_schema.dump``: the same on marshmallow 2 (whose ``dump`` returns
    ``(data, errors)``), 3 and 4."""

    id = fields.Integer(dump_only=True)
    total = fields.Decimal(required=True, as_string=True)


@api.get("/invoices")
@token_auth.login_required
def list_invoices() -> t.Any:
    """The caller's invoices, ten a page (``?page=``)."""
    page = max(1, request.args.get("page", 1, type=int))
    rows = db.session.execute(
        sa.select(Invoice)
        .where(Invoice.owner_id == token_auth.current_user().id)
        .order_by(Invoice.id)
        .offset((page - 1) * 10)
        .limit(10)
    ).scalars()
    return {"data": dump(InvoiceSchema(), rows, many=True)}


@api.get("/invoices/<int:invoice_id>")
@token_auth.login_required
def get_invoice(invoice_id: int) -> t.Any:
    row = db.session.get(Invoice, invoice_id)
    if row is None or row.owner_id != token_auth.current_user().id:
        abort(404)
    return dump(InvoiceSchema(), row)
