"""Group commit: concurrent calls with one key share one execution.

A call needs an execution that *starts after* it arrived (its row stored, its tier trimmed).
While one execution of a key runs, the calls arriving meanwhile join the next round; the first
of them waits for the running execution, then executes once for the whole round. Under load one
statement serves many calls; alone, a call executes at once, with no added wait.
"""

from __future__ import annotations

import threading
import typing as t

K = t.TypeVar("K")
T = t.TypeVar("T")
R = t.TypeVar("R")


class RoundFailed(Exception):
    """The round this call joined failed; its leader got the error (and logs or raises it)."""


class _Round(t.Generic[T]):
    __slots__ = ("items", "done", "failed")

    def __init__(self, item: T) -> None:
        self.items = [item]
        self.done = threading.Event()
        self.failed = False


class Rounds(t.Generic[K, T]):
    """Runs ``execute(items)`` once per round of concurrent calls with the same key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: key -> (the running round, the round that starts after it or None)
        self._rounds: dict[K, tuple[_Round[T], _Round[T] | None]] = {}

    def run(self, key: K, item: T, execute: t.Callable[[list[T]], R]) -> R | None:
        """``execute``'s result for the call that ran it; ``None`` for the others in its
        round once it succeeded. Raises :class:`RoundFailed` in the others if it failed."""
        after: _Round[T] | None = None
        with self._lock:
            running, pending = self._rounds.get(key, (None, None))
            if pending is not None:  # the next round is open: its leader covers this call
                pending.items.append(item)
            else:
                mine = _Round(item)
                self._rounds[key] = (running or mine, None if running is None else mine)
                after = running
        if pending is not None:
            pending.done.wait()
            if pending.failed:
                raise RoundFailed()
            return None
        if after is not None:  # one is running: wait for it, then execute for this round
            after.done.wait()
            with self._lock:  # this round starts: later calls open the one after it
                self._rounds[key] = (mine, None)
        try:
            return execute(mine.items)
        except BaseException:
            mine.failed = True
            raise
        finally:
            with self._lock:
                if self._rounds.get(key) == (mine, None):
                    del self._rounds[key]
            mine.done.set()
