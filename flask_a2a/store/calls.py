"""Store calls timed (``a2a_store_call_seconds``) and traced (``a2a.store <operation>``).

The exchange reaches its store through one :class:`~flask_a2a.store.choice.LazyStore`, which
caches each store method on itself at first use; :func:`observed` is what it caches instead
when metrics or traces may record, so no call site of the exchange knows about either.
"""

from __future__ import annotations

import time
import typing as t

from ..ops import telemetry
from ..ops.metrics import Recorder

#: The store methods worth a span and a latency sample (the Store protocol and its options).
OPERATIONS: t.Final = frozenset({
    "create_task", "get_task", "update_task", "list_tasks", "delete_tasks",
    "put_push_config", "get_push_config", "list_push_configs", "delete_push_config",
    "export_owner", "erase_owner", "trim_terminal_tasks", "task_versions", "owners",
})  # fmt: skip

F = t.TypeVar("F", bound=t.Callable[..., t.Any])


def observed(name: str, method: F, metrics: Recorder) -> F:
    """``method`` wrapped, or itself when nothing could record (the cost is then nil)."""
    if name not in OPERATIONS or (not metrics.enabled and not telemetry.AVAILABLE):
        return method
    record = metrics.store_call
    timed = metrics.enabled
    recording, perf_counter, span = telemetry.recording, time.perf_counter, telemetry.store_span

    def call(*args: t.Any, **kwargs: t.Any) -> t.Any:
        traced = recording()
        if not traced and not timed:
            return method(*args, **kwargs)
        start = perf_counter()
        try:
            if not traced:
                return method(*args, **kwargs)
            with span(name):
                return method(*args, **kwargs)
        finally:
            if timed:
                record(name, perf_counter() - start)

    call.__name__ = name
    call.__wrapped__ = method  # type: ignore[attr-defined]
    return t.cast(F, call)
