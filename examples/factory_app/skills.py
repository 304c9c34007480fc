"""The hand-written skills: they run in the app context, on the app's session and models."""

from __future__ import annotations

import decimal
import typing as t

import sqlalchemy as sa

from flask_a2a import Skill, TaskContext

from .extensions import db
from .models import Invoice


def invoice_total(task: TaskContext) -> dict[str, t.Any]:
    """Sum the caller's invoices (the owner is the user id the principal hook returned)."""
    owner = int(task.principal.owner)
    total = db.session.scalar(
        sa.select(sa.func.coalesce(sa.func.sum(Invoice.total), 0)).where(Invoice.owner_id == owner)
    )
    return {"total": str(decimal.Decimal(total))}


SKILLS = [
    Skill(id="invoice-total", name="Invoice total", description="Sum the caller's invoices.",
          handler=invoice_total),
]  # fmt: skip
