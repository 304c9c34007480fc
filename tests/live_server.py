"""Real servers on 127.0.0.1 for tests that must go over a socket.

``werkzeug_server(app)`` serves an app object from a thread; ``gunicorn_server(spec)`` runs
``gunicorn -k gevent`` in a subprocess (the production setup). Both pick a free port, yield the
base URL once the server answers, and always stop the server. ``LiveGunicorn`` and ``LiveGrpc``
(``flask a2a grpc``) are subprocesses started, awaited and stopped the one way of
``LiveProcess``; ``wait_http`` waits for a server started otherwise.
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


def wait_until(
    ready: t.Callable[[], bool], timeout: float, proc: subprocess.Popen[t.Any] | None = None
) -> bool:
    """Whether ``ready()`` held before ``timeout`` seconds passed (and before ``proc``, if
    given, exited)."""
    deadline = time.monotonic() + timeout
    while not ready():
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            return False
        time.sleep(0.05)  # polling a subprocess's socket: there is no event to await
    return True


def wait_http(url: str, timeout: float = 30.0, proc: subprocess.Popen[t.Any] | None = None) -> bool:
    """Whether ``url`` gave any HTTP answer within ``timeout`` seconds (see :func:`wait_until`)."""
    return wait_until(lambda: _answers(url), timeout, proc)


class LiveProcess:
    """A server in a subprocess of its own process group, its output in a temporary file:
    started, awaited until it answers (or dead, or late: then stopped and its log raised),
    stopped gracefully by :meth:`stop`, or all at once by :meth:`kill9`."""

    #: Seconds :meth:`stop` waits after SIGTERM before it kills the group.
    grace: float = 15.0

    def __init__(
        self,
        command: t.Sequence[str],
        *,
        env: t.Mapping[str, str] | None,
        cwd: str | None = None,
        stdout_too: bool = False,
    ) -> None:
        self._log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            command, cwd=cwd, env={**os.environ, **(env or {})},
            stdout=self._log if stdout_too else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if stdout_too else self._log, start_new_session=True,
        )  # fmt: skip

    def _await(self, ready: t.Callable[[], bool], timeout: float, failure: str) -> None:
        if not wait_until(ready, timeout, self.proc):
            raise RuntimeError(f"{failure}:\n{self.stop()}")

    def output(self) -> str:
        """Everything the server logged so far."""
        self._log.seek(0)
        return self._log.read()

    def kill9(self) -> None:
        """kill -9 of the whole server: master and workers at once."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> str:
        """SIGTERM (SIGKILL of the group after :attr:`grace` seconds); returns the log."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if self._log.closed:
            return ""
        out = self.output()
        self._log.close()
        return out


class LiveGunicorn(LiveProcess):
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
        command = [
            sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", str(workers),
            "-b", f"{HOST}:{self.port}", "--chdir", chdir, "--graceful-timeout", "5",
            *extra, spec,
        ]  # fmt: skip
        super().__init__(command, env=env)
        ready = self.url + ready_path
        self._await(
            lambda: _answers(ready), startup_timeout, f"gunicorn did not come up on {self.url}"
        )


@contextlib.contextmanager
def gunicorn_server(spec: str, *, chdir: str, **options: t.Any) -> t.Iterator[str]:
    """Run :class:`LiveGunicorn` for a ``with`` block; yields its base URL."""
    server = LiveGunicorn(spec, chdir=chdir, **options)
    try:
        yield server.url
    finally:
        server.stop()


class LiveGrpc(LiveProcess):
    """``flask --app APP a2a grpc --bind 127.0.0.1:PORT [ARGS]`` in a subprocess (its own
    process group): the gRPC server's own process, as docs/grpc.md runs it. Needs the ``grpc``
    extra. ``address`` is ``host:port``; :meth:`stop` is a graceful SIGTERM and returns the log.
    """

    grace = 20.0

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
        command = [sys.executable, "-m", "flask", "--app", app, "a2a", "grpc",
                   "--bind", self.address, *extra]  # fmt: skip
        super().__init__(command, env=env, cwd=chdir, stdout_too=True)

        def ready() -> bool:  # grpcio's own readiness, asked for a moment at a time
            try:
                future.result(timeout=0.25)
            except grpc.FutureTimeoutError:
                return False
            return True

        with grpc.insecure_channel(self.address) as channel:
            future = grpc.channel_ready_future(channel)
            try:
                self._await(ready, startup_timeout, f"no gRPC server on {self.address}")
            finally:
                future.cancel()
