"""The total deadline of one push delivery attempt, enforced on its sockets.

The ``timeout`` requests is given bounds the connect and each read, not the POST: a receiver
that sends one byte every half second holds the attempt, and its delivery slot, for as long as
it likes. So an attempt runs inside :func:`attempt`, and every socket it dials or reuses is
handed to :func:`watch` (the guarded connection classes in ``ssrf.py`` do it). When the
deadline passes, one watchdog (a thread; a greenlet where gevent has patched threading) shuts
those sockets down, and whatever the attempt is blocked in (the TLS handshake, sending the
body, the status line, the reply) returns at once with an error.

The watchdog shuts down a duplicate of the socket's descriptor that the attempt holds until it
ends: a shutdown reaches the connection whatever wraps it (TLS), and never a descriptor the
kernel has meanwhile given to another socket.
"""

from __future__ import annotations

import contextlib
import contextvars
import heapq
import itertools
import os
import socket
import threading
import time
import typing as t

_current: contextvars.ContextVar[Attempt | None] = contextvars.ContextVar(
    "a2a_push_attempt", default=None
)


class Attempt:
    """One attempt's deadline and the sockets it uses (duplicates, closed when it ends)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        #: The watchdog cut it: what failed after that failed because of the deadline.
        self.expired = False
        self._ended = False
        self._lock = threading.Lock()
        self._watched: dict[int, socket.socket] = {}

    @property
    def watching(self) -> bool:
        """Some socket of the attempt is watched: the deadline can cut what blocks on it."""
        return bool(self._watched)

    def left(self) -> float:
        """Seconds until the deadline (negative once it passed)."""
        return self.deadline - time.monotonic()

    def watch(self, sock: t.Any) -> None:
        """Shut ``sock`` down at the deadline (at once if it passed)."""
        try:
            fd = sock.fileno()
            if fd < 0 or fd in self._watched:
                return
            twin = socket.socket(fileno=os.dup(fd))
        except (OSError, ValueError, AttributeError):
            return  # not a socket we can reach: the per-read timeout still bounds it
        with self._lock:
            if not self._ended and not self.expired:
                self._watched[fd] = twin
                return
            if self.expired:
                _shut(twin)
        twin.close()

    def expire(self) -> None:
        """The watchdog's call at the deadline."""
        with self._lock:  # held while shutting down: ``end`` cannot close a twin meanwhile
            if self._ended:
                return
            self.expired = True
            for twin in self._watched.values():
                _shut(twin)

    def end(self) -> None:
        with self._lock:
            self._ended = True
            twins, self._watched = list(self._watched.values()), {}
        for twin in twins:
            twin.close()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by the peer


class _Watchdog:
    """One thread (or greenlet) expiring every attempt at its deadline, earliest first."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Attempt]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, attempt: Attempt) -> None:
        with self._cond:
            heapq.heappush(self._heap, (attempt.deadline, next(self._seq), attempt))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="a2a-push-deadlines", daemon=True
                )
                self._thread.start()
            if self._heap[0][2] is attempt:  # only an earlier wake-up needs the thread now
                self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._cond.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                _, _, attempt = heapq.heappop(self._heap)
            attempt.expire()


_WATCHDOG: t.Final = _Watchdog()
if hasattr(os, "register_at_fork"):  # a forked child (an RQ work horse) starts its own
    os.register_at_fork(after_in_child=_WATCHDOG._reset)


@contextlib.contextmanager
def attempt(seconds: float) -> t.Iterator[Attempt]:
    """Run one attempt with a total deadline of ``seconds``; its sockets are watched."""
    current = Attempt(seconds)
    token = _current.set(current)
    _WATCHDOG.add(current)
    try:
        yield current
    finally:
        _current.reset(token)
        current.end()


def watch(sock: t.Any) -> None:
    """Watch ``sock`` for the attempt under way in this thread (greenlet), if any."""
    current = _current.get()
    if current is not None:
        current.watch(sock)


def left(timeout: float | None) -> float | None:
    """``timeout``, shortened to what the attempt under way has left (0 once it passed)."""
    current = _current.get()
    if current is None:
        return timeout
    remaining = max(current.left(), 0.0)
    return remaining if timeout is None else min(timeout, remaining)
