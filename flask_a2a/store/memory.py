"""The in-RAM store: one process, forgets on restart, bounded by the retention knobs."""

from __future__ import annotations

import heapq
import json
import threading
import typing as t

from ..protocol.errors import UnencodableDataError
from ..protocol.model import PushConfig, Task, Tier
from ..protocol.wire import dump_artifact, dump_message, dump_status, dump_stored_push_config
from .base import ListQuery, StaleTaskError, TaskPage, TaskRecord, encode_task, record_json


def _sort_key(record: TaskRecord) -> tuple[t.Any, str]:
    return (record.task.status.timestamp, record.task.id)


def check_new_data(current: Task, new: Task) -> None:
    """Refuse an update whose new data JSON cannot hold; what was stored was checked already.

    Encoding only what the update adds (by identity: the model is immutable) keeps a write's
    cost proportional to the change, not to the whole task.
    """
    pieces: list[t.Any] = []
    if new.status is not current.status:
        pieces.append(dump_status(new.status))
    known = {id(a) for a in current.artifacts}
    pieces.extend(dump_artifact(a) for a in new.artifacts if id(a) not in known)
    known = {id(m) for m in current.history}
    pieces.extend(dump_message(m) for m in new.history if id(m) not in known)
    if new.metadata is not current.metadata:
        pieces.append(new.metadata)
    try:
        json.dumps(pieces, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise UnencodableDataError(f"task data cannot be JSON-encoded: {exc}") from None


def matches(record: TaskRecord, query: ListQuery) -> bool:
    """Whether a record belongs in a query's result (shared with the server's owner walk)."""
    if record.owner != query.owner:
        return False
    if query.tenanted and record.tenant != query.tenant:
        return False
    if query.scoped and record.scopes != query.scopes:
        return False
    if query.context_id and record.task.context_id != query.context_id:
        return False
    if query.states is not None and record.state not in query.states:
        return False
    return query.status_after is None or record.task.status.timestamp >= query.status_after


def page_of(records: t.Iterable[TaskRecord], query: ListQuery) -> TaskPage:
    """Sort newest first, count, and cut one keyset page."""
    rows = sorted(records, key=_sort_key, reverse=True)
    total = len(rows)
    if query.cursor is not None:
        rows = [r for r in rows if _sort_key(r) < query.cursor]
    page = rows[: query.limit]
    more = len(rows) > query.limit
    next_cursor = _sort_key(page[-1]) if more and page else None
    return TaskPage(page, total, next_cursor)


class MemoryStore:
    """A dict and a lock. Records are immutable, so reads hand them out without copying."""

    filters_scope = True
    filters_tenant = True
    #: Nothing at rest: push secrets are kept as given (``store.base.holds_nothing_at_rest``).
    in_memory = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[str, TaskRecord] = {}
        self._by_owner: dict[str, set[str]] = {}
        #: tier -> ids of its terminal tasks, so a settle under the bound trims in O(1) ...
        self._settled: dict[Tier, set[str]] = {}
        #: ... and tier -> heap of (status timestamp, id) of the same, oldest first, so a settle
        #: past it trims in O(log n). Entries of tasks deleted otherwise are skipped lazily.
        self._settled_order: dict[Tier, list[tuple[t.Any, str]]] = {}
        #: task id -> config id -> (owner, config); dicts keep insertion order (oldest first).
        self._configs: dict[str, dict[str, tuple[str, PushConfig]]] = {}

    # -- tasks

    def create_task(self, record: TaskRecord) -> TaskRecord:
        encode_task(record.task)
        record = record.evolve(record.task, 1)
        with self._lock:
            if record.task.id in self._tasks:
                if self._tasks[record.task.id] == record:  # this very write, tried again
                    return record
                raise ValueError(f"task {record.task.id!r} exists")
            self._tasks[record.task.id] = record
            self._by_owner.setdefault(record.owner, set()).add(record.task.id)
            if record.task.status.state.terminal:
                self._index_settled(record)
        return record

    def _index_settled(self, record: TaskRecord) -> None:
        tier = record.tier  # made once: a property building a Tier
        ids = self._settled.setdefault(tier, set())
        if record.task.id not in ids:
            ids.add(record.task.id)
            heapq.heappush(self._settled_order.setdefault(tier, []), _sort_key(record))

    def _unindex(self, record: TaskRecord, tier: Tier | None = None) -> None:
        """Forget ``record`` in the indexes (``tier``: its tier, when the caller has it)."""
        self._by_owner.get(record.owner, set()).discard(record.task.id)
        if tier is None:
            tier = record.tier
        settled = self._settled.get(tier)
        if settled is not None:
            settled.discard(record.task.id)
            if not settled:
                del self._settled[tier]
                self._settled_order.pop(tier, None)

    def get_task(self, task_id: str, owner: str | None = None) -> TaskRecord | None:
        record = self._tasks.get(task_id)
        if record is None or (owner is not None and record.owner != owner):
            return None
        return record

    def update_task(self, record: TaskRecord, expected_version: int) -> TaskRecord:
        with self._lock:
            current = self._tasks.get(record.task.id)
            if current is None or current.version != expected_version:
                if current is not None and current.version == expected_version + 1:
                    if (current.task, current.skill) == (record.task, record.skill):
                        return current  # this very write, tried again
                raise StaleTaskError(current)
            check_new_data(current.task, record.task)
            new = current.evolve(record.task, expected_version + 1, record.skill)
            self._tasks[record.task.id] = new
            if new.state.terminal:
                self._index_settled(new)
        return new

    def list_tasks(self, query: ListQuery) -> TaskPage:
        with self._lock:
            ids = list(self._by_owner.get(query.owner, ()))
            records = [self._tasks[i] for i in ids]
        return page_of((r for r in records if matches(r, query)), query)

    def delete_tasks(self, task_ids: t.Iterable[str]) -> int:
        deleted = 0
        with self._lock:
            for task_id in task_ids:
                record = self._tasks.pop(task_id, None)
                if record is None:
                    continue
                deleted += 1
                self._unindex(record)
                self._configs.pop(task_id, None)
        return deleted

    def trim_terminal_tasks(self, tier: Tier, keep: int) -> list[str]:
        """Delete the tier's oldest terminal tasks past ``keep``, and the owner's orphan configs."""
        with self._lock:
            settled_ids = self._settled.get(tier, set())
            if len(settled_ids) <= keep:
                return []
            order = self._settled_order[tier]
            doomed = []
            while len(settled_ids) > keep:
                _, task_id = heapq.heappop(order)
                if task_id not in settled_ids:
                    continue  # deleted by another path since it settled
                record = self._tasks.pop(task_id)
                self._unindex(record, tier)
                self._configs.pop(task_id, None)
                doomed.append(task_id)
            if doomed and self._configs:  # no configs: no orphan to look for
                orphans = [
                    task_id
                    for task_id, configs in self._configs.items()
                    if task_id not in self._tasks
                    and any(owner == tier.owner for owner, _ in configs.values())
                ]
                for task_id in orphans:
                    del self._configs[task_id]
        return doomed

    # -- push configs

    def put_push_config(self, owner: str, config: PushConfig, keep: int) -> PushConfig:
        with self._lock:
            configs = self._configs.setdefault(config.task_id, {})
            configs.pop(config.id, None)
            configs[config.id] = (owner, config)
            while keep > 0 and len(configs) > keep:
                del configs[next(iter(configs))]
        return config

    def get_push_config(self, task_id: str, config_id: str) -> PushConfig | None:
        entry = self._configs.get(task_id, {}).get(config_id)
        return entry[1] if entry else None

    def list_push_configs(self, task_id: str) -> list[PushConfig]:
        with self._lock:
            return [config for _, config in self._configs.get(task_id, {}).values()]

    def delete_push_config(self, task_id: str, config_id: str) -> bool:
        with self._lock:
            return self._configs.get(task_id, {}).pop(config_id, None) is not None

    # -- data export and erasure

    def owners(self) -> list[str]:
        """Every owner holding a task (``flask a2a trim`` walks them)."""
        with self._lock:
            return sorted(owner for owner, ids in self._by_owner.items() if ids)

    def export_owner(self, owner: str) -> dict[str, list[dict[str, t.Any]]]:
        with self._lock:
            records = [self._tasks[i] for i in self._by_owner.get(owner, ())]
            configs = [c for v in self._configs.values() for o, c in v.values() if o == owner]
        records.sort(key=_sort_key)
        return {
            "tasks": [record_json(r) for r in records],
            "pushConfigs": [dump_stored_push_config(c) for c in configs],
        }

    def erase_owner(self, owner: str) -> int:
        with self._lock:
            ids = self._by_owner.pop(owner, set())
            for task_id in ids:
                self._tasks.pop(task_id, None)
            for tier in [tier for tier in self._settled if tier.owner == owner]:
                del self._settled[tier]
                self._settled_order.pop(tier, None)
            removed = len(ids)
            for task_id, configs in list(self._configs.items()):
                for config_id in [k for k, (o, _) in configs.items() if o == owner]:
                    del configs[config_id]
                    removed += 1
                if not configs:
                    del self._configs[task_id]
        return removed
