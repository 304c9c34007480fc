"""Real servers on 127.0.0.1 for tests that must go over a socket.

``werkzeug_server(app)`` serves an app object from a thread; ``gunicorn_server(spec)`` runs
``gunicorn -k gevent`` in a subprocess (the production setup). Both pick a free port, yield the
base URL once the server answers, and always stop the server.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import typing as t
import urllib.error
import urllib.request

from werkzeug.serving import make_server

if t.TYPE_CHECKING:
    from flask import Flask

HOST: t.Final = "127.0.0.1"


def free_port() -> int:
    """A port nothing listens on right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def werkzeug_server(app: Flask) -> t.Iterator[str]:
    """Serve ``app`` with werkzeug's threaded server on a kernel-chosen port."""
    server = make_server(HOST, 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="live-werkzeug", daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # any HTTP answer means the server is up
    except OSError:
        return False


@contextlib.contextmanager
def gunicorn_server(
    spec: str,
    *,
    chdir: str,
    port: int | None = None,
    env: t.Mapping[str, str] | None = None,
    ready_path: str = "/.well-known/agent-card.json",
    startup_timeout: float = 30.0,
) -> t.Iterator[str]:
    """Run ``gunicorn -k gevent spec`` from ``chdir`` on ``port`` (free when not given)."""
    port = port or free_port()
    base = f"http://{HOST}:{port}"
    log = tempfile.TemporaryFile()
    command = [
        sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", "1",
        "-b", f"{HOST}:{port}", "--chdir", chdir, "--graceful-timeout", "5", spec,
    ]  # fmt: skip
    proc = subprocess.Popen(
        command, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + startup_timeout
        while not _answers(base + ready_path):
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError(
                    f"gunicorn did not come up on {base}:\n{log.read().decode(errors='replace')}"
                )
            time.sleep(0.05)  # polling a subprocess's socket: there is no event to await
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
