"""Operations: telemetry spans, Prometheus metrics, log fields and the health report.

The public names are ``__all__``: the metrics view to mount behind your own auth, and the health
report to answer from your own route. They are imported on first use.
"""

from __future__ import annotations

import importlib
import typing as t

if t.TYPE_CHECKING:
    from .health import report as report
    from .metrics import metrics_view as metrics_view

#: Public name -> the submodule defining it.
_SOURCES: t.Final[dict[str, str]] = {
    "metrics_view": "metrics",
    "report": "health",
}

__all__ = list(_SOURCES)

if not t.TYPE_CHECKING:

    def __getattr__(name: str) -> t.Any:
        """Import the module defining ``name`` the first time it is asked for."""
        if name not in _SOURCES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{_SOURCES[name]}", __name__), name)
        globals()[name] = value
        return value
