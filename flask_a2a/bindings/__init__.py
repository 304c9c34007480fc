"""The bindings: JSON-RPC and HTTP+JSON (REST), thin adapters over one pipeline of checks.

Each takes an :class:`~flask_a2a.exchange.calls.HTTPRequest`, runs the shared checks in
``checks.py``, calls one exchange method and answers with a
:class:`~flask_a2a.exchange.calls.Reply`.

The public names are ``__all__``: what a server built without Flask calls (docs/api.md,
"Serving without Flask"), imported on first use.
"""

from __future__ import annotations

import typing as t

from .. import _lazy_names

if t.TYPE_CHECKING:
    from ..exchange.calls import HTTPRequest as HTTPRequest
    from ..exchange.calls import Reply as Reply
    from .grpc_binding import RPCS as RPCS
    from .grpc_binding import Refusal as Refusal
    from .grpc_binding import handle as handle_grpc
    from .jsonrpc import handle as handle_jsonrpc
    from .rest import handle as handle_rest

#: Public name -> the module defining it (``module:name`` where its name there differs).
_SOURCES: t.Final[dict[str, str]] = {
    "HTTPRequest": "..exchange.calls",
    "Reply": "..exchange.calls",
    "handle_jsonrpc": ".jsonrpc:handle",
    "handle_rest": ".rest:handle",
    "handle_grpc": ".grpc_binding:handle",  # the grpc extra
    "RPCS": ".grpc_binding",
    "Refusal": ".grpc_binding",
}

__all__ = [
    "HTTPRequest",
    "Reply",
    "handle_jsonrpc",
    "handle_rest",
    "handle_grpc",
    "RPCS",
    "Refusal",
]

if not t.TYPE_CHECKING:  # type checkers see the imports above, and flag an unknown name
    __getattr__, __dir__ = _lazy_names(globals(), _SOURCES)
