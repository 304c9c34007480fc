"""How many processes serve this app: gunicorn's worker count, and forks after ``init_app``.

A store that lives in one process (the memory store) answers "Task not found" for every task
another worker holds, so the exchange must know when several processes serve it. Two ways in:

- **gunicorn**: it loads the app from ``Worker.load_wsgi`` in each worker, or once from
  ``Arbiter.setup`` with ``--preload``, so that server object is on the call stack of
  ``init_app`` (and of the fork, with ``--preload``). Its ``cfg`` is gunicorn's resolved
  ``Config`` (command line, config file, ``GUNICORN_CMD_ARGS`` and ``WEB_CONCURRENCY`` already
  merged), so ``cfg.workers`` is the number of workers the arbiter runs. The environment alone
  would miss ``-w`` and config files. gunicorn's hooks (``post_worker_init``, ``post_fork``)
  then run a check in each worker after the app is loaded and before it serves; an exception
  there is a boot failure, which gunicorn logs and stops on.
- **any other fork** after ``init_app`` (uWSGI's workers, a hand-rolled pre-fork server):
  ``os.register_at_fork`` tells each child it was forked.
"""

from __future__ import annotations

import os
import sys
import types
import typing as t
import weakref


def gunicorn_server() -> t.Any | None:
    """The gunicorn ``Worker`` (or, with ``--preload``, ``Arbiter``) loading this app, if any."""
    base = sys.modules.get("gunicorn.workers.base")
    arbiter = sys.modules.get("gunicorn.arbiter")
    if base is None or arbiter is None:
        return None  # gunicorn imports both before it loads any app
    kinds = (base.Worker, arbiter.Arbiter)
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:  # the innermost: a worker's stack also holds the arbiter's fork
        found = frame.f_locals.get("self")
        if isinstance(found, kinds):
            return found
        frame = frame.f_back
    return None


def gunicorn_workers(server: t.Any) -> int:
    """The number of workers gunicorn runs."""
    return int(server.cfg.workers)


def served_app(worker: t.Any) -> t.Any:
    """The WSGI callable a gunicorn worker serves (loaded by the worker, or preloaded)."""
    return getattr(worker, "wsgi", None) or getattr(worker.app, "callable", None)


def before_gunicorn_serves(server: t.Any, check: t.Callable[[t.Any], None]) -> None:
    """Run ``check(worker)`` in each gunicorn worker once the app is loaded, before it serves.

    Chains gunicorn's own hook (the host's ``post_worker_init`` / ``post_fork`` still runs).
    In a worker the config is the worker's own copy, so only that worker is affected; with
    ``--preload`` every worker forked from the arbiter runs it.
    """
    arbiter = sys.modules["gunicorn.arbiter"].Arbiter
    if isinstance(server, arbiter):
        setting = server.cfg.settings["post_fork"]
        after_fork = setting.get()

        def post_fork(arbiter: t.Any, worker: t.Any) -> None:
            check(worker)
            after_fork(arbiter, worker)

        setting.value = post_fork
    else:
        setting = server.cfg.settings["post_worker_init"]
        after_init = setting.get()

        def post_worker_init(worker: t.Any) -> None:
            check(worker)
            after_init(worker)

        setting.value = post_worker_init


class ForkAware(t.Protocol):
    def forked(self, parent_pid: int, gunicorn: t.Any | None) -> None: ...


_WATCHED: weakref.WeakSet[t.Any] = weakref.WeakSet()


def on_fork(watched: ForkAware) -> None:
    """Call ``watched.forked(parent_pid, gunicorn_server_or_None)`` in each forked child."""
    _WATCHED.add(watched)


def _after_fork_in_child() -> None:
    if not _WATCHED:
        return
    server = gunicorn_server()  # with --preload, the arbiter forking its workers is on the stack
    for watched in list(_WATCHED):
        watched.forked(os.getppid(), server)


os.register_at_fork(after_in_child=_after_fork_in_child)
