"""Task stores: the :class:`Store` protocol and its built-in implementations.

``SQLStore`` is imported on first use, so an app without a database driver never loads it.
"""

from __future__ import annotations

import typing as t

from .base import EXTRA_HINT
from .base import ListQuery as ListQuery
from .base import RetentionTrimmer as RetentionTrimmer
from .base import StaleTaskError as StaleTaskError
from .base import Store as Store
from .base import TaskPage as TaskPage
from .base import TaskRecord as TaskRecord
from .memory import MemoryStore as MemoryStore

if t.TYPE_CHECKING:
    from .sql import SQLStore as SQLStore


def __getattr__(name: str) -> t.Any:
    if name == "SQLStore":
        try:
            from .sql import SQLStore
        except ImportError as exc:
            raise ImportError(
                f"the SQL store needs SQLAlchemy and a database driver ({exc}); {EXTRA_HINT}"
            ) from exc
        return SQLStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
