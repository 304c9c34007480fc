"""Who sees a task: the one rule every by-id method and ListTasks goes through.

A task is visible to a principal of its owner, under the same tenant, and (for a narrowed
credential, ``Principal.scopes`` set) made under the same scope set. A named agent's tasks are
stored under an agent-scoped tenant (``flask_a2a.agents``), so the tenant check is the agent
check too. Another tier's task is indistinguishable from none: -32001 for unknown and foreign
alike, and a page that never counts it.
"""

from __future__ import annotations

import dataclasses
import typing as t

from ..protocol.errors import TaskNotFoundError
from ..protocol.model import Principal
from ..store.base import ListQuery, Store, TaskPage, TaskRecord
from ..store.memory import matches, page_of


def visible(record: TaskRecord, principal: Principal) -> bool:
    """Owner, tenant (and so agent) and scope set."""
    if record.owner != principal.owner or record.tenant != principal.tenant:
        return False
    return principal.scopes is None or record.scopes == principal.scope_key


def visible_record(store: Store, task_id: str, principal: Principal) -> TaskRecord:
    """The caller's task, or -32001 for unknown and foreign alike."""
    record = store.get_task(task_id, principal.owner)
    if record is None or not visible(record, principal):
        raise TaskNotFoundError(metadata={"taskId": task_id})
    return record


def tier_query(principal: Principal, **filters: t.Any) -> ListQuery:
    """A ListTasks query held to the caller's tier (``filters``: the request's own)."""
    return ListQuery(
        owner=principal.owner,
        tenant=principal.tenant,
        scopes=principal.scope_key,
        scoped=principal.scopes is not None,
        **filters,
    )


def visible_page(store: Store, query: ListQuery, principal: Principal) -> TaskPage:
    """One page of ``query`` (from :func:`tier_query`) holding only what ``principal`` sees."""
    if store.filters_scope and store.filters_tenant:
        page = store.list_tasks(query)
        # A store that declares filtering wrongly still hands out no other tier's task.
        records = [r for r in page.records if visible(r, principal)]
        return TaskPage(records, page.total, page.next_cursor)
    return _walk_owner(store, query)


def _walk_owner(store: Store, query: ListQuery) -> TaskPage:
    """For a store that cannot filter by tier: read every task of the owner, count ours."""
    everything = dataclasses.replace(
        query,
        scoped=False,
        tenanted=False,
        context_id=None,
        states=None,
        status_after=None,
        cursor=None,
        limit=1000,
    )
    records: list[TaskRecord] = []
    cursor = None
    while True:
        page = store.list_tasks(dataclasses.replace(everything, cursor=cursor))
        records.extend(r for r in page.records if matches(r, query))
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    return page_of(records, query)
