"""The protocol layer: the A2A data model, its wire encoding, errors, params, the JSON-RPC
envelope.

Imports neither Flask nor the exchange (``tests/test_layout.py`` checks it).
"""
