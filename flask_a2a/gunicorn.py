"""gunicorn hooks: end a worker's runs cleanly when it exits; keep multiprocess metrics right.

In ``gunicorn.conf.py``::

    from flask_a2a.gunicorn import child_exit, worker_exit  # noqa: F401

gunicorn calls ``worker_exit`` as a worker stops; every live run is cut and settled CANCELED
(stored and published) before the worker goes, within ``A2A_SHUTDOWN_TIMEOUT``. ``atexit`` does
the same for other servers; call ``A2A.shutdown()`` yourself where neither runs.

``child_exit`` runs in the master once a worker is gone: with ``PROMETHEUS_MULTIPROC_DIR`` set
(the ``prometheus`` extra's multiprocess mode), it marks the worker dead, so its live gauges
(runs live, stream seats in use) stop counting in the scrape.

gunicorn's master imports this file before it forks; it must import nothing heavy (no Flask,
requests or ssl), or gevent warns in every worker that ssl was imported before it patched.
"""

from __future__ import annotations

import os
import typing as t

#: Public (docs/api.md, "Where names live"); the rest of this module is private.
__all__ = ["child_exit", "worker_exit"]


def worker_exit(server: t.Any, worker: t.Any) -> None:
    from .wiring import shutdown_all  # in the worker, where the app is already loaded

    shutdown_all()


def child_exit(server: t.Any, worker: t.Any) -> None:
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return
    from prometheus_client import multiprocess  # in the master, only once a worker is gone

    multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]
