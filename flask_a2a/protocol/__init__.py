"""The protocol layer: the A2A data model, its wire encoding, errors, params, the JSON-RPC
envelope.

Imports neither Flask nor the exchange (``tests/test_layout.py`` checks it). The data model is
public from ``flask_a2a``; the public names here are ``__all__``: the fixed bounds of what a
caller may send (docs/security.md), imported on first use.
"""

from __future__ import annotations

import typing as t

from .. import _lazy_names

if t.TYPE_CHECKING:
    from .jsonrpc import MAX_DEPTH as MAX_DEPTH
    from .limits import MAX_KEY as MAX_KEY
    from .limits import MAX_TASK_ID as MAX_TASK_ID

#: Public name -> the submodule defining it.
_SOURCES: t.Final[dict[str, str]] = {
    "MAX_DEPTH": ".jsonrpc",
    "MAX_KEY": ".limits",
    "MAX_TASK_ID": ".limits",
}

__all__ = list(_SOURCES)

if not t.TYPE_CHECKING:  # type checkers see the imports above, and flag an unknown name
    __getattr__, __dir__ = _lazy_names(globals(), _SOURCES)
