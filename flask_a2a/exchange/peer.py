"""Noticing that a stream's client has left before the stream's next write.

A stream writes only when its task changes or at a keep-alive (15 s by default); otherwise a
departed client is seen only when a write fails, and until then its stream seat stays taken,
so a client reconnecting at once is refused (429). Where the server exposes the connection's
socket (gunicorn's ``gunicorn.socket``, werkzeug's ``werkzeug.socket``), an orderly close or a
reset is seen as it happens: under gevent a greenlet waits for the socket to turn readable (no
cost while the client stays); under threads the stream looks at it every
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


def watch(sock: t.Any, on_left: t.Callable[[], None]) -> t.Callable[[], None] | None:
    """Under gevent: call ``on_left`` once the client leaves; returns the function that stops
    watching (call it before the server closes the socket). None elsewhere: poll :func:`left`.
    """
    if not gevent_patched():
        return None
    import gevent
    from gevent.socket import wait_read

    def run() -> None:
        try:
            wait_read(sock.fileno())
        except Exception:  # the socket went away under us: the stream is ending anyway
            return
        if left(sock):
            on_left()

    greenlet = gevent.spawn(run)
    return lambda: greenlet.kill(block=False)
