"""The bindings: JSON-RPC and HTTP+JSON (REST), thin adapters over one pipeline of checks.

Each takes an :class:`~flask_a2a.exchange.calls.HTTPRequest`, runs the shared checks in
``checks.py``, calls one exchange method and answers with a
:class:`~flask_a2a.exchange.calls.Reply`.
"""
