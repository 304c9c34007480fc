"""Task stores: the SQL store, and what a store of your own implements beside the
:class:`~flask_a2a.Store` protocol.

The public names are ``__all__``; ``Store`` and ``MemoryStore`` live in ``flask_a2a`` (they are
here too, the same objects, for old imports). ``StoreUnavailable`` and ``StoreRefused`` are what
``A2A.store()`` raises when the store cannot serve (docs/errors.md). The SQL names are imported
on first use, so an app without a database driver never loads them.
"""

from __future__ import annotations

import importlib
import typing as t

from .base import EXTRA_HINT
from .base import ListQuery as ListQuery
from .base import RetentionTrimmer as RetentionTrimmer
from .base import StaleTaskError as StaleTaskError
from .base import Store as Store
from .base import TaskPage as TaskPage
from .base import TaskRecord as TaskRecord
from .choice import StoreRefused as StoreRefused
from .choice import StoreUnavailable as StoreUnavailable
from .memory import MemoryStore as MemoryStore

if t.TYPE_CHECKING:
    from .sql import SQLStore as SQLStore
    from .sql_engine import engine_from_url as engine_from_url
    from .sql_schema import MissingTablesError as MissingTablesError
    from .sql_waits import bound_waits as bound_waits

#: Name -> the submodule defining it, imported on first use (SQLAlchemy and a driver).
_SOURCES: t.Final[dict[str, str]] = {
    "SQLStore": "sql",
    "engine_from_url": "sql_engine",
    "MissingTablesError": "sql_schema",
    "bound_waits": "sql_waits",
}

__all__ = [
    "ListQuery",
    "RetentionTrimmer",
    "StaleTaskError",
    "StoreRefused",
    "StoreUnavailable",
    "TaskPage",
    "TaskRecord",
    *_SOURCES,
]

if not t.TYPE_CHECKING:

    def __getattr__(name: str) -> t.Any:
        """Import the SQL module defining ``name`` the first time it is asked for."""
        if name not in _SOURCES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        try:
            module = importlib.import_module(f".{_SOURCES[name]}", __name__)
        except ImportError as exc:
            raise ImportError(
                f"the SQL store needs SQLAlchemy and a database driver ({exc}); {EXTRA_HINT}"
            ) from exc
        return getattr(module, name)  # not cached: the import is retried (and explained) each time
