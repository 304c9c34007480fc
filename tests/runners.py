"""A runner that wraps another, for tests that change one thing of a runner's (when a run
starts, whether timers fire, what it says of itself)."""

from __future__ import annotations

import typing as t


class WrappedRunner:
    """Every call goes to ``inner`` but :meth:`can_run_here`: False, so each run goes through
    :meth:`start`, where a subclass looks at it."""

    def __init__(self, inner: t.Any) -> None:
        self.inner = inner
        self.kind = inner.kind

    def reserve(self) -> bool:
        return bool(self.inner.reserve())

    def unreserve(self) -> None:
        self.inner.unreserve()

    def lock(self) -> t.Any:
        return self.inner.lock()

    def can_run_here(self) -> bool:
        return False

    def here(self) -> t.Any:
        raise AssertionError("asked to run here by a runner that said it cannot")

    def start(self, fn: t.Callable[[], None]) -> t.Any:
        return self.inner.start(fn)

    def call_later(self, delay: float, fn: t.Callable[[], None]) -> t.Any:
        return self.inner.call_later(delay, fn)

    def spawn(self, fn: t.Callable[[], None]) -> None:
        self.inner.spawn(fn)
