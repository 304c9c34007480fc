"""The exchange core: the A2A methods, the life of a run, tasks, streams and the bus.

It takes a principal and typed params and returns results or event streams; it knows no
binding and imports no Flask (``tests/test_layout.py`` checks it).
"""
