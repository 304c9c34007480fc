"""A task's row in the SQL store: read back as a :class:`TaskRecord`, and a new row's lease.

Every operation that reads whole task rows (a get, a ListTasks page, an owner's export) makes
its records here, so a column's meaning is read in one place.
"""

from __future__ import annotations

import json
import time
import typing as t

from ..protocol.wire import task_from_wire
from . import leases
from .base import TaskRecord
from .leases import LEASED_STATES, LeaseTerms
from .sql_dialect import from_micros, micros, scope_key


class Columns:
    """A DBAPI row's columns by name (the table's column positions)."""

    __slots__ = ("_at", "_values")

    def __init__(self, at: dict[str, int], values: tuple[t.Any, ...]) -> None:
        self._at = at
        self._values = values

    def __getattr__(self, name: str) -> t.Any:
        return self._values[self._at[name]]


def read_record(row: t.Any) -> TaskRecord:
    """The record a task row holds (a SQLAlchemy row, or :class:`Columns`)."""
    return TaskRecord(
        task=task_from_wire(json.loads(row.body)),
        owner=row.owner,
        tenant=row.tenant,
        scopes=scope_key(row.scopes),
        created_at=from_micros(row.created_at),
        version=row.version,
        skill=row.skill,
    )


def new_lease(terms: LeaseTerms | None, record: TaskRecord) -> dict[str, t.Any]:
    """A new row's lease columns: a running task's creation is its run's start (none while
    the exchange set no ``terms``)."""
    if terms is None or record.state not in LEASED_STATES:
        return {"run_by": None, "lease_until": None, "run_deadline": None}
    deadline = None
    if terms.timeout > 0:
        deadline = micros(record.created_at) + int(terms.timeout * 1e6)
    until = time.time_ns() // 1000 + int(terms.ttl * 1e6)
    return {"run_by": leases.holder(), "lease_until": until, "run_deadline": deadline}
