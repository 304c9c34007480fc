"""The store seam: what the exchange needs from wherever tasks live.

A store keeps task records (the task plus who owns it and in which tier it was made) and push
configs. Writes are optimistic: :meth:`Store.update_task` names the version it read and fails
with :class:`StaleTaskError` if the row moved, which is how a late completion can never
overwrite a cancel. Both built-in stores refuse a task that cannot be JSON-encoded without
changing what they hold.
"""

from __future__ import annotations

import dataclasses
import sys
import typing as t
from datetime import datetime

from ..protocol.errors import InternalError, UnencodableDataError
from ..protocol.model import Principal, PushConfig, Task, TaskState, Tier
from ..protocol.wire import dump_task, task_json

#: What to install when the SQL store cannot load (SQLAlchemy or the driver is missing).
EXTRA_HINT: t.Final = "pip install flask-a2a[postgres]"


@dataclasses.dataclass(frozen=True)
class TaskRecord:
    """A stored task and its ownership. ``tenant`` and ``scopes`` never change after creation."""

    task: Task
    owner: str
    tenant: str | None
    #: Sorted scope names of the creating credential; ``None`` when a session made it.
    scopes: tuple[str, ...] | None
    created_at: datetime
    #: Bumped by every stored write; ``0`` for a run's task not written yet (see
    #: ``A2A_BLOCKING_WRITE_DELAY``): its first write creates the row.
    version: int = 1
    skill: str | None = None

    @property
    def tier(self) -> Tier:
        return Tier(self.owner, self.tenant, self.scopes)

    def evolve(self, task: Task, version: int, skill: str | None = None) -> TaskRecord:
        """The same ownership with a new task and version (the hot-path ``replace``)."""
        return TaskRecord(
            task,
            self.owner,
            self.tenant,
            self.scopes,
            self.created_at,
            version,
            self.skill if skill is None else skill,
        )

    @property
    def state(self) -> TaskState:
        return self.task.status.state

    def visible_to(self, principal: Principal) -> bool:
        """Owner, tenant and scope set: another tier's task is indistinguishable from none."""
        if self.owner != principal.owner or self.tenant != principal.tenant:
            return False
        return principal.scopes is None or self.scopes == principal.scope_key


@dataclasses.dataclass(frozen=True)
class ListQuery:
    """One page of an owner's tasks, newest status first (keyset on timestamp, id)."""

    owner: str
    tenant: str | None = None
    #: Filter to exactly this scope set; meaningful only when ``scoped``.
    scopes: tuple[str, ...] | None = None
    #: The caller is a narrowed credential: list only tasks made under ``scopes``.
    scoped: bool = False
    #: Filter by ``tenant`` (always on for the exchange; off only for an owner-wide walk).
    tenanted: bool = True
    context_id: str | None = None
    states: frozenset[TaskState] | None = None
    status_after: datetime | None = None
    limit: int = 50
    #: Exclusive keyset cursor: (status timestamp, task id) of the last row already sent.
    cursor: tuple[datetime, str] | None = None


@dataclasses.dataclass(frozen=True)
class TaskPage:
    records: list[TaskRecord]
    #: Matches before paging.
    total: int
    next_cursor: tuple[datetime, str] | None


class StaleTaskError(Exception):
    """An update named a version the row no longer has (``current`` is None when it is gone)."""

    def __init__(self, current: TaskRecord | None) -> None:
        super().__init__("task changed or was deleted since it was read")
        self.current = current


#: Packages whose exceptions mean the store's database or driver failed, not a bug of ours.
_STORE_PACKAGES: t.Final = frozenset(
    {"sqlalchemy", "psycopg", "psycopg2", "pymysql", "MySQLdb", "sqlite3", "_sqlite3"}
)


#: The DBAPI errors that say the database did not answer (PEP 249 names).
_UNREACHABLE: t.Final = frozenset({"OperationalError", "InterfaceError"})


def store_failed(exc: BaseException) -> bool:
    """``exc`` is the store's database or driver failing (a dropped connection, a timeout, a
    database gone), which a later try may get past; anything else is a bug of the caller's."""
    if isinstance(exc, OSError):
        return True
    return (
        any(cls.__module__.split(".")[0] in _STORE_PACKAGES for cls in type(exc).__mro__)
        or type(exc).__name__ == "MissingTablesError"
    )


def unreachable(exc: BaseException) -> bool:
    """``exc`` says the database did not answer (down, refusing, hung, timed out), not that the
    store is misconfigured (a bad URL, a missing driver: those still fail ``init_app``)."""
    sa_exc = sys.modules.get("sqlalchemy.exc")
    if sa_exc is not None and isinstance(
        exc, (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError)
    ):
        return True
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    # The driver's own (a connect for the DBAPI cursor is not wrapped by SQLAlchemy).
    return any(
        cls.__name__ in _UNREACHABLE and cls.__module__.split(".")[0] in _STORE_PACKAGES
        for cls in type(exc).__mro__
    )


def unavailable_error() -> InternalError:
    """What a caller is told while the store's database cannot be reached (no driver text)."""
    return InternalError("Internal error: the task store is unavailable; try again later")


def holds_nothing_at_rest(store: object) -> bool:
    """The store lives in process memory only (declares ``in_memory = True``): nothing a
    stolen disk or database could reveal."""
    return bool(getattr(store, "in_memory", False))


class Store(t.Protocol):
    """What the exchange needs from a task store."""

    #: The store filters ListTasks by scope set in its query (else the server walks).
    filters_scope: bool
    #: The store filters ListTasks by tenant in its query (else the server walks).
    filters_tenant: bool
    # Optional: ``in_memory = True`` for a store that keeps nothing at rest (push secrets are
    # then not sealed; read with ``holds_nothing_at_rest``). ``deferred_trims = True`` for one
    # whose ``trim_terminal_tasks`` is a round trip: retention then runs it just after a settle's
    # answer, shared by the tier's settles meanwhile (``exchange/retention.py``).

    def create_task(self, record: TaskRecord) -> TaskRecord:
        """Store a new task as version 1, whatever version ``record`` carries (a run's held
        task arrives as version 0); ``ValueError`` if the id exists, unless its row is this
        very record (a try again of a create the database took but whose answer was lost)."""

    def get_task(self, task_id: str, owner: str | None = None) -> TaskRecord | None:
        """The record, or None if absent or (with ``owner``) owned by someone else."""

    def update_task(self, record: TaskRecord, expected_version: int) -> TaskRecord:
        """Store ``record.task`` as version ``expected_version + 1``; owner/tier are kept. A row
        already at that version holding exactly ``record.task`` is this write tried again
        (its first try was taken, its answer lost): returned, not :class:`StaleTaskError`."""

    def list_tasks(self, query: ListQuery) -> TaskPage: ...

    def delete_tasks(self, task_ids: t.Iterable[str]) -> int: ...

    def put_push_config(self, owner: str, config: PushConfig, keep: int) -> PushConfig:
        """Insert or replace; past ``keep`` (when > 0) the task's oldest configs are deleted."""

    def get_push_config(self, task_id: str, config_id: str) -> PushConfig | None: ...

    def list_push_configs(self, task_id: str) -> list[PushConfig]: ...

    def delete_push_config(self, task_id: str, config_id: str) -> bool: ...

    def export_owner(self, owner: str) -> dict[str, list[dict[str, t.Any]]]: ...

    def erase_owner(self, owner: str) -> int: ...


class RetentionTrimmer(t.Protocol):
    """Optional: trim a tier's oldest terminal rows (and orphaned push configs) in one step."""

    def trim_terminal_tasks(self, tier: Tier, keep: int) -> list[str]: ...


def encode_task(task: Task) -> str:
    """The task as stored JSON; refuses what JSON cannot hold (NaN, functions, cycles)."""
    try:
        return task_json(task)
    except (TypeError, ValueError, RecursionError) as exc:
        raise UnencodableDataError(f"task data cannot be JSON-encoded: {exc}") from None


def record_json(record: TaskRecord) -> dict[str, t.Any]:
    """A record as JSON-ready data (data export)."""
    return {
        "task": dump_task(record.task),
        "owner": record.owner,
        "tenant": record.tenant,
        "scopes": list(record.scopes) if record.scopes is not None else None,
        "version": record.version,
        "skill": record.skill,
        "createdAt": record.created_at.isoformat(),
    }
