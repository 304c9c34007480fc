"""A fleet of processes: the Redis bus and the Redis-backed limits shared across them.

The public name is ``RedisBus`` (``A2A(bus=...)``), imported on first use (the ``redis`` extra).
"""

from __future__ import annotations

import importlib
import typing as t

if t.TYPE_CHECKING:
    from .redis_bus import RedisBus as RedisBus

__all__ = ["RedisBus"]

if not t.TYPE_CHECKING:

    def __getattr__(name: str) -> t.Any:
        """Import the Redis bus the first time it is asked for."""
        if name != "RedisBus":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = importlib.import_module(".redis_bus", __name__).RedisBus
        globals()[name] = value
        return value
