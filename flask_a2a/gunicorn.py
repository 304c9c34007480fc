"""gunicorn hooks: end a worker's runs cleanly when it exits.

In ``gunicorn.conf.py``::

    from flask_a2a.gunicorn import worker_exit  # noqa: F401

gunicorn calls ``worker_exit`` as a worker stops; every live run is cut and settled CANCELED
(stored and published) before the worker goes, within ``A2A_SHUTDOWN_TIMEOUT``. ``atexit`` does
the same for other servers; call ``A2A.shutdown()`` yourself where neither runs.

gunicorn's master imports this file before it forks; it must import nothing heavy (no Flask,
requests or ssl), or gevent warns in every worker that ssl was imported before it patched.
"""

from __future__ import annotations

import typing as t


def worker_exit(server: t.Any, worker: t.Any) -> None:
    from .extension import shutdown_all  # in the worker, where the app is already loaded

    shutdown_all()
