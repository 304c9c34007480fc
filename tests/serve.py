"""A live server for tests that need a real socket: a werkzeug server thread on loopback.

>>> with serve(app) as base_url:
...     requests.get(base_url + "/.well-known/agent-card.json", timeout=5)

The port is chosen free by the OS at bind time; the server is always shut down, even when the
test fails, so no thread or socket outlives the block.
"""

from __future__ import annotations

import contextlib
import threading
import typing as t

from flask import Flask
from werkzeug.serving import make_server


@contextlib.contextmanager
def serve(app: Flask, host: str = "127.0.0.1") -> t.Iterator[str]:
    """Serve ``app`` threaded on ``host`` and a free port; yields the base URL."""
    server = make_server(host, 0, app, threaded=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://{host}:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
