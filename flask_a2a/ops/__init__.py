"""Operations: telemetry spans, Prometheus metrics, log fields and the health report.

The public names are ``__all__``: the metrics view to mount behind your own auth, and the health
report to answer from your own route. They are imported on first use.
"""

from __future__ import annotations

import typing as t

from .. import _lazy_names

if t.TYPE_CHECKING:
    from .health import report as report
    from .metrics import metrics_view as metrics_view

#: Public name -> the submodule defining it.
_SOURCES: t.Final[dict[str, str]] = {
    "metrics_view": ".metrics",
    "report": ".health",
}

__all__ = list(_SOURCES)

if not t.TYPE_CHECKING:  # type checkers see the imports above, and flag an unknown name
    __getattr__, __dir__ = _lazy_names(globals(), _SOURCES)
