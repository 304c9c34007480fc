"""Store calls timed (``a2a_store_call_seconds``) and traced (``a2a.store <operation>``).

:class:`~flask_a2a.store.choice.ChosenStore` serves from a :class:`MeteredStore` over the store
it chose when metrics or traces may record (``metered``), and from the store itself when
nothing could, so no call site of the exchange knows about either.
"""

from __future__ import annotations

import time
import typing as t

from ..ops import telemetry
from ..ops.metrics import Recorder
from .base import holds_nothing_at_rest, offers, optional

if t.TYPE_CHECKING:
    from ..protocol.model import PushConfig, TaskState, Tier
    from .base import ListQuery, Store, TaskPage, TaskRecord
    from .leases import LapsedRun

R = t.TypeVar("R")


def metered(metrics: Recorder) -> bool:
    """Store calls may be recorded: metrics are on, or OpenTelemetry is installed (a tracer
    provider may be set at any time). Else a :class:`MeteredStore` would only cost."""
    return metrics.enabled or telemetry.AVAILABLE


class MeteredStore:
    """``store``, each operation timed when metrics record and in a span when traces do.

    The run leases' operations are passed through unmeasured (a renewal is no request's).
    """

    def __init__(self, store: Store, metrics: Recorder) -> None:
        self._store = store
        self._optional = optional(store)
        self._record = metrics.store_call
        self._timing = metrics.enabled

    def _call(self, name: str, method: t.Callable[..., R], *args: t.Any) -> R:
        traced = telemetry.recording()
        if not traced and not self._timing:
            return method(*args)
        start = time.perf_counter()
        try:
            if not traced:
                return method(*args)
            with telemetry.store_span(name):
                return method(*args)
        finally:
            if self._timing:
                self._record(name, time.perf_counter() - start)

    # -- what the store says of itself

    @property
    def filters_scope(self) -> bool:
        return self._store.filters_scope

    @property
    def filters_tenant(self) -> bool:
        return self._store.filters_tenant

    @property
    def shared(self) -> bool:
        return bool(getattr(self._store, "shared", False))

    @property
    def in_memory(self) -> bool:
        return holds_nothing_at_rest(self._store)

    @property
    def deferred_trims(self) -> bool:
        return bool(getattr(self._store, "deferred_trims", False))

    def offers(self, name: str) -> bool:
        return offers(self._store, name)

    # -- the Store protocol

    def create_task(self, record: TaskRecord) -> TaskRecord:
        return self._call("create_task", self._store.create_task, record)

    def get_task(self, task_id: str, owner: str | None = None) -> TaskRecord | None:
        return self._call("get_task", self._store.get_task, task_id, owner)

    def update_task(self, record: TaskRecord, expected_version: int) -> TaskRecord:
        return self._call("update_task", self._store.update_task, record, expected_version)

    def list_tasks(self, query: ListQuery) -> TaskPage:
        return self._call("list_tasks", self._store.list_tasks, query)

    def delete_tasks(self, task_ids: t.Iterable[str]) -> int:
        return self._call("delete_tasks", self._store.delete_tasks, task_ids)

    def put_push_config(self, owner: str, config: PushConfig, keep: int) -> PushConfig:
        return self._call("put_push_config", self._store.put_push_config, owner, config, keep)

    def get_push_config(self, task_id: str, config_id: str) -> PushConfig | None:
        return self._call("get_push_config", self._store.get_push_config, task_id, config_id)

    def list_push_configs(self, task_id: str) -> list[PushConfig]:
        return self._call("list_push_configs", self._store.list_push_configs, task_id)

    def delete_push_config(self, task_id: str, config_id: str) -> bool:
        method = self._store.delete_push_config
        return self._call("delete_push_config", method, task_id, config_id)

    def export_owner(self, owner: str) -> dict[str, list[dict[str, t.Any]]]:
        return self._call("export_owner", self._store.export_owner, owner)

    def erase_owner(self, owner: str) -> int:
        return self._call("erase_owner", self._store.erase_owner, owner)

    # -- the optional operations (ask ``offers`` first)

    def trim_terminal_tasks(self, tier: Tier, keep: int) -> list[str]:
        return self._call("trim_terminal_tasks", self._optional.trim_terminal_tasks, tier, keep)

    def task_versions(self, task_ids: list[str]) -> dict[str, tuple[int, TaskState]]:
        return self._call("task_versions", self._optional.task_versions, task_ids)

    def owners(self) -> list[str]:
        return self._call("owners", self._optional.owners)

    def lease_run(self, task_id: str, until: int, deadline: int | None) -> None:
        self._optional.lease_run(task_id, until, deadline)

    def renew_runs(self, task_ids: list[str], until: int) -> None:
        self._optional.renew_runs(task_ids, until)

    def release_runs(self, task_ids: list[str]) -> None:
        self._optional.release_runs(task_ids)

    def lapsed_runs(self, now: int, limit: int) -> list[LapsedRun]:
        return self._optional.lapsed_runs(now, limit)
