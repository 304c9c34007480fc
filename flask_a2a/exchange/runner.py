"""Where skill handlers run: a bounded pool of greenlets (under gevent) or threads.

The library never monkey-patches. :func:`default_runner` picks a gevent pool when the process
is already patched (gunicorn ``-k gevent``) and threads otherwise. A full pool refuses instead of
queueing, so the exchange can answer -32004 before it writes anything.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import threading
import time
import typing as t
from concurrent.futures import ThreadPoolExecutor


class RunHandle(t.Protocol):
    def kill(self, exc: type[BaseException]) -> None:
        """Cut the run: raise ``exc`` inside it (gevent) or rely on its cooperative checks."""


class Timer(t.Protocol):
    def cancel(self) -> None: ...


class Runner(t.Protocol):
    #: "threads" or "gevent".
    kind: str

    def reserve(self) -> bool:
        """Take a pool slot for a run about to start; False when the pool is full."""

    def unreserve(self) -> None:
        """Give back a reserved slot that will not be used."""

    def start(self, fn: t.Callable[[], None]) -> RunHandle:
        """Start ``fn`` in a slot taken by :meth:`reserve`."""

    def call_later(self, delay: float, fn: t.Callable[[], None]) -> Timer: ...

    def spawn(self, fn: t.Callable[[], None]) -> None:
        """Background housekeeping outside the bounded pool (timers' work, pollers)."""

    def can_run_here(self) -> bool:
        """Whether :meth:`here` may run a run in the calling greenlet (a blocking send waits
        for its run anyway). Only a runner that can cut a run where it stands can
        (GeventRunner): a thread cannot be cut, so a blocking send on threads keeps waiting on
        the run's end from outside, to answer at the deadline or a cancel all the same."""

    def here(self) -> HereHandle:
        """A run in the calling greenlet, in a slot taken by :meth:`reserve` (only when
        :meth:`can_run_here`)."""

    def lock(self) -> t.ContextManager[t.Any]:
        """A re-entrant lock for one run's writes, of the kind its runs wait on."""


class HereHandle(t.Protocol):
    """A run in the caller's own greenlet, in a slot taken by ``reserve``."""

    def kill(self, exc: type[BaseException]) -> None: ...

    def run(self, fn: t.Callable[[], None]) -> None:
        """Run ``fn`` here, in an empty ``contextvars`` context (as a fresh greenlet would:
        the request's context is not the run's), then give the slot back."""


class _ThreadHandle:
    def kill(self, exc: type[BaseException]) -> None:
        """Threads cannot be cut: the handler sees ``task.cancelled`` and its writes raise."""


class _Scheduler:
    """One thread serving every timer of a ThreadRunner (a thread per timer would not scale)."""

    def __init__(self, spawn: t.Callable[[t.Callable[[], None]], None]) -> None:
        self._spawn = spawn
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _SchedTimer]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, delay: float, fn: t.Callable[[], None]) -> _SchedTimer:
        timer = _SchedTimer(fn)
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + delay, next(self._seq), timer))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="a2a-timers", daemon=True)
                self._thread.start()
            self._cond.notify()
        return timer

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    wait = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(wait)
                _, _, timer = heapq.heappop(self._heap)
            if not timer.cancelled:
                self._spawn(timer.fn)


class _SchedTimer:
    __slots__ = ("fn", "cancelled")

    def __init__(self, fn: t.Callable[[], None]) -> None:
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ThreadRunner:
    """A bounded thread pool. Cancellation is cooperative (``task.cancelled``, raising writes)."""

    kind = "threads"

    def __init__(self, size: int = 64) -> None:
        self._slots = threading.BoundedSemaphore(size)
        self._pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="a2a-run")
        self._scheduler = _Scheduler(self.spawn)

    def reserve(self) -> bool:
        return self._slots.acquire(blocking=False)

    def unreserve(self) -> None:
        self._slots.release()

    def start(self, fn: t.Callable[[], None]) -> RunHandle:
        def run() -> None:
            try:
                fn()
            finally:
                self._slots.release()

        self._pool.submit(run)
        return _ThreadHandle()

    def can_run_here(self) -> bool:
        return False

    def here(self) -> HereHandle:
        raise NotImplementedError("a thread cannot be cut where it stands: start() the run")

    def lock(self) -> t.ContextManager[t.Any]:
        return threading.RLock()

    def call_later(self, delay: float, fn: t.Callable[[], None]) -> Timer:
        return self._scheduler.add(delay, fn)

    def spawn(self, fn: t.Callable[[], None]) -> None:
        threading.Thread(target=fn, name="a2a-bg", daemon=True).start()


class GeventRunner:
    """A ``gevent.pool.Pool``: a run is a greenlet, and cancel kills it."""

    kind = "gevent"

    def __init__(self, size: int = 1000) -> None:
        import gevent.pool  # the gevent extra; imported only when this runner is chosen

        self._pool = gevent.pool.Pool(size)
        #: The pool's running greenlets (``Group.greenlets``): its length is what
        #: ``free_count()`` reads through three calls.
        self._running = self._pool.greenlets
        self._reserved = 0

    def reserve(self) -> bool:
        if len(self._running) + self._reserved >= self._pool.size:
            return False
        self._reserved += 1
        return True

    def unreserve(self) -> None:
        self._reserved -= 1

    def start(self, fn: t.Callable[[], None]) -> RunHandle:
        self._reserved -= 1
        return _GreenletHandle(self._pool.spawn(fn))

    def can_run_here(self) -> bool:
        return True

    def here(self) -> HereHandle:
        """The calling greenlet runs the run; its slot stays reserved until it ends, so the
        pool's bound counts it like a spawned one."""
        return _GreenletHere(self.unreserve)

    def lock(self) -> t.ContextManager[t.Any]:
        """gevent's own: under its patch ``threading.RLock`` is the pure-Python one, which
        costs a run ten interpreter calls per write where this costs six."""
        import gevent.lock

        lock: t.ContextManager[t.Any] = gevent.lock.RLock()
        return lock

    def call_later(self, delay: float, fn: t.Callable[[], None]) -> Timer:
        """A loop timer that spawns ``fn`` only when it fires (most are canceled first)."""
        import gevent

        timer = gevent.get_hub().loop.timer(delay)
        timer.start(gevent.spawn, fn)
        return _LoopTimer(timer)

    def spawn(self, fn: t.Callable[[], None]) -> None:
        import gevent

        gevent.spawn(fn)


class _GreenletHandle:
    def __init__(self, greenlet: t.Any) -> None:
        self._greenlet = greenlet

    def kill(self, exc: type[BaseException]) -> None:
        self._greenlet.kill(exc, block=False)

    def cancel(self) -> None:
        self._greenlet.kill(block=False)


class _GreenletHere:
    """A run in the request's own greenlet: no greenlet to spawn and switch to, no event to
    wait on. A cut is thrown into the greenlet only while it is inside the run: checked in the
    hub, when the greenlet is parked at one of its switch points, so a cut that arrives after
    the run ended never reaches the request's own code (its answer, its socket writes)."""

    def __init__(self, unreserve: t.Callable[[], None]) -> None:
        import gevent

        self._unreserve = unreserve
        self._greenlet = gevent.getcurrent()
        self._loop = gevent.get_hub().loop
        self._inside = False

    def run(self, fn: t.Callable[[], None]) -> None:
        self._inside = True
        try:
            contextvars.Context().run(fn)
        finally:
            self._inside = False
            self._unreserve()

    def kill(self, exc: type[BaseException]) -> None:
        if self._inside:
            self._loop.run_callback(self._throw, exc)

    def _throw(self, exc: type[BaseException]) -> None:
        if self._inside and not self._greenlet.dead:
            self._greenlet.throw(exc)


class _LoopTimer:
    def __init__(self, timer: t.Any) -> None:
        self._timer = timer

    def cancel(self) -> None:
        self._timer.close()


def gevent_patched() -> bool:
    """True when gevent has monkey-patched threading (gunicorn ``-k gevent``, or the app)."""
    import sys

    if "gevent.monkey" not in sys.modules:
        return False
    from gevent import monkey

    return bool(monkey.is_module_patched("threading"))


def default_runner(size: int | None = None) -> Runner:
    if gevent_patched():
        return GeventRunner(size or 1000)
    return ThreadRunner(size or 64)


class RunSlots:
    """Per-owner run slots, taken before anything is written (negative limit = unlimited)."""

    def __init__(self, per_owner: int) -> None:
        self.per_owner = per_owner
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    def acquire(self, owner: str) -> bool:
        with self._lock:
            held = self._held.get(owner, 0)
            if 0 <= self.per_owner <= held:
                return False
            self._held[owner] = held + 1
            return True

    def release(self, owner: str) -> None:
        with self._lock:
            held = self._held.get(owner, 0) - 1
            if held > 0:
                self._held[owner] = held
            else:
                self._held.pop(owner, None)

    def held(self, owner: str) -> int:
        return self._held.get(owner, 0)
