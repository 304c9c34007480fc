"""Real servers on 127.0.0.1 for tests that must go over a socket.

``werkzeug_server(app)`` serves an app object from a thread; ``gunicorn_server(spec)`` runs
``gunicorn -k gevent`` in a subprocess (the production setup). Both pick a free port, yield the
base URL once the server answers, and always stop the server.
"""

from __future__ import annotations

import contextlib
import os
import signal
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


class LiveGunicorn:
    """``gunicorn -k gevent`` in a subprocess on 127.0.0.1 (the production setup).

    Started in its own process group, so :meth:`kill9` takes the master and its workers at
    once; :meth:`stop` is a graceful SIGTERM (the workers' exit hooks run) and returns the log.
    """

    def __init__(
        self,
        spec: str,
        *,
        chdir: str,
        env: t.Mapping[str, str] | None = None,
        port: int | None = None,
        workers: int = 1,
        extra: t.Sequence[str] = (),
        ready_path: str = "/.well-known/agent-card.json",
        startup_timeout: float = 30.0,
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://{HOST}:{self.port}"
        self._log = tempfile.TemporaryFile(mode="w+")
        command = [
            sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", str(workers),
            "-b", f"{HOST}:{self.port}", "--chdir", chdir, "--graceful-timeout", "5",
            *extra, spec,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            command, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
            stderr=self._log, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + startup_timeout
        while not _answers(self.url + ready_path):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn did not come up on {self.url}:\n{self.stop()}")
            time.sleep(0.05)  # polling a subprocess's socket: there is no event to await

    def output(self) -> str:
        """Everything the server logged so far."""
        self._log.seek(0)
        return self._log.read()

    def kill9(self) -> None:
        """kill -9 of the whole server: master and workers at once."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> str:
        """Stop gracefully (SIGTERM; SIGKILL of the group after 15 s); returns the log."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if self._log.closed:
            return ""
        out = self.output()
        self._log.close()
        return out


@contextlib.contextmanager
def gunicorn_server(spec: str, *, chdir: str, **options: t.Any) -> t.Iterator[str]:
    """Run :class:`LiveGunicorn` for a ``with`` block; yields its base URL."""
    server = LiveGunicorn(spec, chdir=chdir, **options)
    try:
        yield server.url
    finally:
        server.stop()


class LiveGrpc:
    """``flask --app APP a2a grpc --bind 127.0.0.1:PORT [ARGS]`` in a subprocess (its own
    process group): the gRPC server's own process, as docs/grpc.md runs it. Needs the ``grpc``
    extra. ``address`` is ``host:port``; :meth:`stop` is a graceful SIGTERM and returns the log.
    """

    def __init__(
        self,
        app: str,
        *,
        chdir: str,
        env: t.Mapping[str, str] | None = None,
        port: int | None = None,
        extra: t.Sequence[str] = (),
        startup_timeout: float = 30.0,
    ) -> None:
        import grpc

        self.port = port or free_port()
        self.address = f"{HOST}:{self.port}"
        self._log = tempfile.TemporaryFile(mode="w+")
        command = [sys.executable, "-m", "flask", "--app", app, "a2a", "grpc",
                   "--bind", self.address, *extra]  # fmt: skip
        self.proc = subprocess.Popen(
            command, cwd=chdir, env={**os.environ, **(env or {})}, stdout=self._log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        with grpc.insecure_channel(self.address) as channel:
            ready = grpc.channel_ready_future(channel)
            try:  # grpcio's own readiness: no polling here
                ready.result(timeout=startup_timeout)
            except grpc.FutureTimeoutError:
                ready.cancel()
                raise RuntimeError(f"no gRPC server on {self.address}:\n{self.stop()}") from None

    def output(self) -> str:
        self._log.seek(0)
        return self._log.read()

    def stop(self) -> str:
        """SIGTERM (SIGKILL of the group after 20 s); returns the log."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if self._log.closed:
            return ""
        out = self.output()
        self._log.close()
        return out
