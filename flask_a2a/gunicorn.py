"""gunicorn hooks: end a worker's runs cleanly when it exits.

In ``gunicorn.conf.py``::

    from flask_a2a.gunicorn import worker_exit  # noqa: F401

gunicorn calls ``worker_exit`` as a worker stops; every live run is cut and settled CANCELED
(stored and published) before the worker goes, within ``A2A_SHUTDOWN_TIMEOUT``. ``atexit`` does
the same for other servers; call ``A2A.shutdown()`` yourself where neither runs.
"""

from __future__ import annotations

import typing as t

from .extension import shutdown_all


def worker_exit(server: t.Any, worker: t.Any) -> None:
    shutdown_all()
