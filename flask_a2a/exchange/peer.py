"""Noticing that a stream's client has left before the stream's next write.

A stream writes only when its task changes or at a keep-alive (15 s by default); otherwise a
departed client is seen only when a write fails, and until then its stream seat stays taken,
so a client reconnecting at once is refused (429). Where the server exposes the connection's
socket (gunicorn's ``gunicorn.socket``, werkzeug's ``werkzeug.socket``), an orderly close or a
reset is seen as it happens: under gevent an I/O watcher of the hub waits for the socket to turn
readable (no greenlet while the client stays: a parked greenlet keeps its stack slices on the heap,
a watcher is a few hundred bytes); under threads the stream looks at it every
:data:`CHECK_INTERVAL` seconds while idle.

Nothing is ever read from the socket: a peek tells end-of-stream from bytes a client sent
ahead (pipelining), and a client that sends bytes is not watched any further. A client that
half-closes (shuts down its sending side) while still reading looks the same as one that left,
and its stream ends: SSE clients keep both sides open. TLS sockets are
not watched (their bytes are records, not the request); the keep-alive write still sees them go.
"""

from __future__ import annotations

import select
import socket
import typing as t

from .runner import gevent_patched

#: Under threads, how often an idle stream looks at its client's socket.
CHECK_INTERVAL: t.Final = 0.5


def watchable(sock: t.Any) -> bool:
    """A plain TCP socket (not TLS) whose state can be peeked at."""
    return (
        sock is not None
        and hasattr(sock, "fileno")
        and hasattr(sock, "recv")
        and not hasattr(sock, "getpeercert")
    )


def left(sock: t.Any) -> bool:
    """The client closed or reset the connection (never blocks, never consumes a byte)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return bool(sock.recv(1, socket.MSG_PEEK) == b"")
    except (OSError, ValueError):  # a reset, or a socket already closed (fileno -1)
        return True


class Watch(t.Protocol):
    def stop(self) -> None:
        """Stop watching (before the server closes the socket)."""


def watch(sock: t.Any, on_left: t.Callable[[], None]) -> Watch | None:
    """Under gevent: call ``on_left`` once the client leaves; returns the watch, whose
    ``stop()`` ends it (call it before the server closes the socket). None elsewhere: poll
    :func:`left`.
    """
    if not gevent_patched():
        return None
    try:
        return _Watch(sock, on_left)
    except (OSError, ValueError):  # no file descriptor any more: :func:`left` says it is gone
        return None


def _readable(watch: _Watch) -> None:
    watch.readable()


class _Watch:
    """One socket's read watcher on the gevent hub. Its callback runs in the hub, where nothing
    may block, so it only hands the check to a greenlet, started when the socket turned
    readable (the client left, or sent bytes): the idle stream holds no greenlet of its own."""

    __slots__ = ("sock", "on_left", "watcher", "checker")

    def __init__(self, sock: t.Any, on_left: t.Callable[[], None]) -> None:
        from gevent import get_hub

        self.sock = sock
        self.on_left = on_left
        self.checker: t.Any = None
        self.watcher = get_hub().loop.io(sock.fileno(), 1)  # 1: readable
        self.watcher.start(_readable, self)

    def readable(self) -> None:
        import gevent

        self.watcher.stop()  # one look: a client that sent bytes is not watched any further
        self.checker = gevent.spawn(self._check)

    def _check(self) -> None:
        if left(self.sock):
            self.on_left()

    def stop(self) -> None:
        self.watcher.stop()
        self.watcher.close()
        if self.checker is not None:
            self.checker.kill(block=False)
