"""Database drivers that stop a whole gevent worker while they wait: one WARNING at startup.

psycopg2 and mysqlclient (``MySQLdb``) wait for the database inside their C library, not on a
Python socket, so gevent's monkey-patching does not reach them: while one greenlet waits for a
query, every other request, stream and run of the worker waits too. Measured on one worker,
four concurrent SendMessage calls to a skill running ``pg_sleep(1)`` took 4.1 s on psycopg2 and
1.1 s on psycopg 3. SQLAlchemy 2.0 and older read ``postgresql://`` as psycopg2 (2.1 made
psycopg 3 the default), so many apps run on it without knowing. Nothing fails: the worker is
only slow, so it is found here, once per process, when the store is chosen and again before a
gunicorn worker serves (after its ``post_fork`` hook, where psycogreen is installed).

psycopg2 can wait cooperatively through a wait callback (``psycogreen.gevent.patch_psycopg()``
installs one); a process that has one is not warned about.
"""

from __future__ import annotations

import logging
import sys
import typing as t

log = logging.getLogger("flask_a2a")

PSYCOPG2_FIX: t.Final = (
    "call psycogreen.gevent.patch_psycopg() in gunicorn's post_fork hook (pip install "
    "psycogreen), or use psycopg 3: a postgresql+psycopg:// URL (pip install 'psycopg[binary]'; "
    "SQLAlchemy 2.0 or newer)"
)
MYSQLDB_FIX: t.Final = (
    "use PyMySQL, which gevent makes cooperative: a mysql+pymysql:// URL (pip install PyMySQL)"
)

#: (what, driver) pairs already warned about in this process.
_warned: set[tuple[str, str]] = set()


def gevent_patched() -> bool:
    """Has gevent monkey-patched this process (its sockets)?"""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and bool(monkey.is_module_patched("socket"))


def blocking_fix(engine: t.Any) -> str | None:
    """How to make ``engine``'s driver cooperative under gevent, or None if it is already."""
    driver = getattr(getattr(engine, "dialect", None), "driver", None)
    if driver == "psycopg2":
        extensions = sys.modules.get("psycopg2.extensions")
        if extensions is not None and extensions.get_wait_callback() is not None:
            return None  # psycogreen (or the host's own callback) makes it wait in gevent
        return PSYCOPG2_FIX
    if driver == "mysqldb":
        return MYSQLDB_FIX
    return None


def warn_blocking(engines: t.Iterable[tuple[str, t.Any]]) -> list[str]:
    """In a gevent-patched process, log one WARNING per engine (named by ``what``) whose driver
    blocks the worker, once per process; returns the lines logged now."""
    if not gevent_patched():
        return []
    logged = []
    for what, engine in engines:
        fix = blocking_fix(engine)
        key = (what, engine.dialect.driver)
        if fix is None or key in _warned:
            continue
        _warned.add(key)
        line = (
            f"flask_a2a: {what} runs on {engine.dialect.driver}, which blocks the whole gevent "
            f"worker while it waits for the database (every request, stream and run of the "
            f"worker waits with it): {fix}"
        )
        log.warning("%s", line)
        logged.append(line)
    return logged
