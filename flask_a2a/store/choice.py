"""Which store an app's exchange uses: chosen at first use, kept to one process if it lives in one.

Flask extensions register in any order, and ``A2A(app)`` before ``SQLAlchemy(app)`` must still
put tasks in the app's database. So with neither ``store=`` nor ``A2A_DATABASE_URL`` the choice
between Flask-SQLAlchemy's engine and the memory store waits for the first store call (a request,
a ``flask a2a`` command, an export or erase, ``A2A.task_updater``), made in the app context, or
for the worker's boot under gunicorn. Every part of the exchange holds the one
:class:`ChosenStore`, so all of them see the same store; once chosen, each of its methods calls
the store's own (metered: ``calls``), so a call costs one more call. The choice is logged once:
``flask_a2a: task store: SQLStore(postgresql, prefix a2a_)``.

A store that lives in one process (the memory store, in-memory SQLite) refuses to serve when
several processes do (``processes``), unless ``A2A_ALLOW_MEMORY_STORE_IN_WORKERS`` is set.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import typing as t
import weakref

from ..ops.metrics import NOOP, Recorder
from . import processes
from .base import holds_nothing_at_rest, offers, unreachable
from .blocking_drivers import gevent_patched, warn_blocking
from .calls import MeteredStore, metered
from .errors import StoreErrors, StoreRefused, StoreUnavailable
from .memory import MemoryStore

if t.TYPE_CHECKING:
    from flask import Flask

    from ..config import Settings
    from ..protocol.model import PushConfig, TaskState, Tier
    from .base import ListQuery, Operations, Store, TaskPage, TaskRecord
    from .leases import LapsedRun

__all__ = ["UNAVAILABLE_RETRY", "ChosenStore", "StoreRefused", "StoreUnavailable", "store_for"]

log = logging.getLogger("flask_a2a")


#: Seconds a store whose database did not answer is not tried again (calls meanwhile fail at
#: once instead of each waiting out a connect).
UNAVAILABLE_RETRY: t.Final = 1.0


def describe(store: object) -> str:
    """How the startup log line names a store: ``SQLStore(sqlite, prefix a2a_)``."""
    if isinstance(store, MemoryStore):
        return "MemoryStore"
    dialect = getattr(getattr(store, "dialect", None), "name", None)
    prefix = getattr(store, "table_prefix", None)
    if dialect is not None and prefix is not None:
        return f"{type(store).__name__}({dialect}, prefix {prefix})"
    return type(store).__name__


def process_local(store: object) -> str | None:
    """What to call ``store`` if its tasks live in this process only, else None."""
    if isinstance(store, MemoryStore):
        return "the memory store"
    sql = sys.modules.get("flask_a2a.store.sql")
    if sql is not None and isinstance(store, sql.SQLStore) and store.dialect.name == "sqlite":
        if store.engine.url.database in (None, "", ":memory:"):
            return "an in-memory SQLite store"
    return None


class ChosenStore:
    """The exchange's store: chosen by ``choose()`` at its first use, then served from.

    Each call goes to what it serves from (:attr:`target`): until the store is chosen and may
    serve here, a :class:`~flask_a2a.store.errors.StoreErrors` that chooses it (a refusal or
    an outage reaching the caller as -32603); from then on the chosen store, in a
    :class:`~flask_a2a.store.calls.MeteredStore` when metrics or traces may record (a store
    that leaves the process: the memory store is never timed).

    :param allow_process_local: serve from a one-process store even in several processes.
    :param metrics: times each store call (with a span per call when traces record).
    :param given: the host passed the store (``A2A(store=...)``): a refusal says so.
    """

    def __init__(
        self,
        choose: t.Callable[[], Store],
        *,
        allow_process_local: bool,
        metrics: Recorder = NOOP,
        given: bool = False,
    ) -> None:
        self._choose = choose
        self._given = given
        self._metrics = metrics
        self._store: Store | None = None
        self._lock = threading.Lock()
        self._allow = allow_process_local
        self._callbacks: list[t.Callable[[Store], None]] = []
        #: Why several processes serve this app (None: one, as far as we know).
        self._several: str | None = None
        #: The database did not answer when the store was opened: (when, why). The store is
        #: opened again at a use :data:`UNAVAILABLE_RETRY` later (tables made then).
        self._failed: tuple[float, BaseException] | None = None
        #: What each call goes to (see the class's docstring).
        self.target: Operations = StoreErrors(self._serve)
        #: Engines this store built (from ``A2A_DATABASE_URL``): its own to release.
        self.owned_engines: list[t.Any] = []
        processes.on_fork(self)

    def close(self) -> None:
        """Close the pooled connections of the engine built from ``A2A_DATABASE_URL`` now,
        rather than at some later garbage collection (where each warns that it was deleted
        while still open). The host's own engine, or a store it passed in, is left alone. The
        store stays usable: a later call opens a new pool."""
        for engine in self.owned_engines:
            engine.dispose()

    # -- choosing

    def chosen(self) -> Store:
        """The store, chosen now if it was not yet; :class:`StoreRefused` if it cannot serve."""
        store = self.pick()
        self._check(store)
        return store

    def _serve(self) -> Operations:
        """Choose the store (if it may serve here) and serve every later call from it."""
        store = self.chosen()
        # The memory store's calls are dictionary reads in this process: no latency worth a
        # histogram or a span, and timing them would cost each request a dozen calls.
        if metered(self._metrics) and not holds_nothing_at_rest(store):
            self.target = MeteredStore(store, self._metrics)
        else:  # its optional operations are called only where ``offers`` says it has them
            self.target = t.cast("Operations", store)
        return self.target

    def pick(self) -> Store:
        """Choose the store now (once; logged), without asking whether it can serve.

        A database that does not answer (:func:`unreachable`) leaves it unchosen: the
        error is raised, and for :data:`UNAVAILABLE_RETRY` seconds after, or while another
        caller is trying, every call fails at once with it instead of waiting on a connect."""
        store = self._store
        if store is not None:
            return store
        failed = self._failed
        if failed is not None and time.monotonic() < failed[0] + UNAVAILABLE_RETRY:
            raise StoreUnavailable(failed[1])
        if not self._lock.acquire(blocking=failed is None):
            assert failed is not None
            raise StoreUnavailable(failed[1])  # another caller is trying: no queue behind it
        try:
            if self._store is None:
                try:
                    made = self._choose()
                except Exception as exc:
                    if not unreachable(exc):
                        raise
                    if self._failed is None:
                        log.error(
                            "flask_a2a: the task store's database does not answer (%s): A2A "
                            "requests answer -32603 and /healthz 503 until it does; it is "
                            "tried again at each use, at most once a second",
                            type(exc).__name__,
                        )
                    self._failed = (time.monotonic(), exc)
                    raise StoreUnavailable(exc) from exc
                if self._failed is not None:
                    self._failed = None
                    log.warning("flask_a2a: the task store's database answers again")
                log.info("flask_a2a: task store: %s", describe(made))
                self._store = made
                for callback in self._callbacks:
                    callback(made)
            return self._store
        finally:
            self._lock.release()

    def when_chosen(self, callback: t.Callable[[Store], None]) -> None:
        """Call ``callback(store)`` once the store is chosen (now, if it is)."""
        with self._lock:
            if self._store is None:
                self._callbacks.append(callback)
                return
        callback(self._store)

    @property
    def given(self) -> bool:
        """The host passed this store (``A2A(store=...)``)."""
        return self._given

    @property
    def shared(self) -> bool:
        """Other processes write the store; False until it is chosen (see ``when_chosen``)."""
        return self._store is not None and bool(getattr(self._store, "shared", False))

    # -- what the store says of itself (chosen now)

    @property
    def filters_scope(self) -> bool:
        return self.target.filters_scope

    @property
    def filters_tenant(self) -> bool:
        return self.target.filters_tenant

    @property
    def in_memory(self) -> bool:
        return holds_nothing_at_rest(self.target)

    @property
    def deferred_trims(self) -> bool:
        return bool(getattr(self.target, "deferred_trims", False))

    def offers(self, name: str) -> bool:
        return offers(self.target, name)

    # -- the Store protocol

    def create_task(self, record: TaskRecord) -> TaskRecord:
        return self.target.create_task(record)

    def get_task(self, task_id: str, owner: str | None = None) -> TaskRecord | None:
        return self.target.get_task(task_id, owner)

    def update_task(self, record: TaskRecord, expected_version: int) -> TaskRecord:
        return self.target.update_task(record, expected_version)

    def list_tasks(self, query: ListQuery) -> TaskPage:
        return self.target.list_tasks(query)

    def delete_tasks(self, task_ids: t.Iterable[str]) -> int:
        return self.target.delete_tasks(task_ids)

    def put_push_config(self, owner: str, config: PushConfig, keep: int) -> PushConfig:
        return self.target.put_push_config(owner, config, keep)

    def get_push_config(self, task_id: str, config_id: str) -> PushConfig | None:
        return self.target.get_push_config(task_id, config_id)

    def list_push_configs(self, task_id: str) -> list[PushConfig]:
        return self.target.list_push_configs(task_id)

    def delete_push_config(self, task_id: str, config_id: str) -> bool:
        return self.target.delete_push_config(task_id, config_id)

    def export_owner(self, owner: str) -> dict[str, list[dict[str, t.Any]]]:
        return self.target.export_owner(owner)

    def erase_owner(self, owner: str) -> int:
        return self.target.erase_owner(owner)

    # -- the optional operations (ask ``offers`` first)

    def trim_terminal_tasks(self, tier: Tier, keep: int) -> list[str]:
        return self.target.trim_terminal_tasks(tier, keep)

    def task_versions(self, task_ids: list[str]) -> dict[str, tuple[int, TaskState]]:
        return self.target.task_versions(task_ids)

    def owners(self) -> list[str]:
        return self.target.owners()

    def lease_run(self, task_id: str, until: int, deadline: int | None) -> None:
        self.target.lease_run(task_id, until, deadline)

    def renew_runs(self, task_ids: list[str], until: int) -> None:
        self.target.renew_runs(task_ids, until)

    def release_runs(self, task_ids: list[str]) -> None:
        self.target.release_runs(task_ids)

    def lapsed_runs(self, now: int, limit: int) -> list[LapsedRun]:
        return self.target.lapsed_runs(now, limit)

    # -- processes

    def serving(self, server: t.Any | None) -> None:
        """Note the gunicorn server loading the app (``processes.gunicorn_server``)."""
        if server is not None:
            self._several = _gunicorn_reason(server)

    def forked(self, parent_pid: int, server: t.Any | None) -> None:
        """In a child forked after ``init_app``: check the store again at its next use."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self.target = StoreErrors(self._serve)  # checked again (and a refusal logged again)
        if server is not None:
            self._several = _gunicorn_reason(server)
        else:
            self._several = (
                f"this process (pid {os.getpid()}) was forked from pid {parent_pid} after "
                "A2A.init_app, so several processes may serve it"
            )

    def _check(self, store: Store) -> None:
        if self._several is None or self._allow:
            return
        what = process_local(store)
        if what is None:
            return
        if self._given:
            fix = (
                f"You passed store={type(store).__name__}() to A2A: leave store= out (the "
                "exchange then uses A2A_DATABASE_URL, or the app's Flask-SQLAlchemy database) "
                "or pass a SQL store"
            )
        else:
            fix = (
                "Configure a store they share: set A2A_DATABASE_URL (PostgreSQL in production, "
                "e.g. postgresql+psycopg://user@host/db) or register Flask-SQLAlchemy on the app"
            )
        raise StoreRefused(
            f"flask_a2a: {what} keeps tasks in one process, but {self._several}: a task made "
            f'in one process would be "Task not found" in the others. {fix}; or run one '
            "worker; or set A2A_ALLOW_MEMORY_STORE_IN_WORKERS = True if every request about a "
            "task reaches the process that made it."
        )


def _gunicorn_reason(server: t.Any) -> str | None:
    workers = processes.gunicorn_workers(server)
    return f"this app runs in {workers} gunicorn workers" if workers > 1 else None


def store_for(
    app: Flask, settings: Settings, given: Store | None, metrics: Recorder = NOOP
) -> ChosenStore:
    """The store of ``app``'s exchange: ``given``, else ``A2A_DATABASE_URL``'s (both chosen
    now), else Flask-SQLAlchemy's engine or the memory store (chosen at first use)."""
    eager = given is not None or bool(settings.database_url)
    # The engine built from A2A_DATABASE_URL (one, however many times its store is opened).
    engines: list[t.Any] = []
    if given is not None:
        store = given

        def choose() -> Store:
            return store
    elif settings.database_url:

        def choose() -> Store:
            return _url_store(settings, engines)
    else:
        app_ref = weakref.ref(app)
        if "sqlalchemy" in app.extensions or "flask_sqlalchemy" in sys.modules:
            from .sql_versions import require

            require()  # Flask-SQLAlchemy's engine may be chosen: an unfit SQLAlchemy fails now

        def choose() -> Store:
            found = app_ref()
            if found is None:
                raise RuntimeError("the app of this exchange is gone")
            return _app_store(found, settings)

    handle = ChosenStore(
        choose,
        allow_process_local=settings.allow_memory_store_in_workers,
        metrics=metrics,
        given=given is not None,
    )
    handle.owned_engines = engines  # empty unless built from A2A_DATABASE_URL
    server = processes.gunicorn_server()
    handle.serving(server)
    app_ref = weakref.ref(app)
    handle.when_chosen(lambda chosen: _check_drivers(app_ref(), chosen))
    if eager:
        try:
            handle.pick()  # a bad URL or a missing driver fails init_app
        except StoreUnavailable:
            pass  # a database down at boot is no misconfiguration: serve (health 503, requests
            # -32603) and open the store once it answers (logged by pick)
    if server is not None:

        def boot_check(worker: t.Any) -> None:
            # Only the app gunicorn serves fails the boot: another app the module built on
            # the way (never served) would refuse at its first use instead.
            if processes.served_app(worker) is app_ref():
                # In the worker, gevent-patched, after post_fork (psycogreen) has run.
                try:
                    chosen = handle.chosen()
                except StoreUnavailable:
                    return  # a down database boots (see below); a misconfiguration fails
                _check_drivers(app_ref(), chosen)

        processes.before_gunicorn_serves(server, boot_check)
    return handle


def _check_drivers(app: Flask | None, store: Store) -> None:
    """Under gevent, warn once about a driver that blocks the worker: the store's engine and
    the app's Flask-SQLAlchemy engine, which its skills use (``blocking_drivers``)."""
    if not gevent_patched():
        return
    engines: list[tuple[str, t.Any]] = []
    own = getattr(store, "engine", None)
    host = None
    sqlalchemy_ext = app.extensions.get("sqlalchemy") if app is not None else None
    if app is not None and sqlalchemy_ext is not None:
        try:
            from .sql_versions import flask_sqlalchemy_engine

            host = flask_sqlalchemy_engine(app, sqlalchemy_ext)
        except Exception:  # no engine configured: nothing of the host's to look at
            host = None
    if own is not None and own is host:
        engines.append(("the app's Flask-SQLAlchemy engine (the task store's too)", own))
    else:
        if own is not None:
            engines.append(("the task store's engine", own))
        if host is not None:
            engines.append(("the app's Flask-SQLAlchemy engine", host))
    warn_blocking(engines)


def chosen_store(store: Store) -> Store:
    """The store behind a :class:`ChosenStore` (chosen now if it was not yet; while its database
    does not answer, :class:`StoreUnavailable`)."""
    return store.chosen() if isinstance(store, ChosenStore) else store


def _url_store(settings: Settings, engines: list[t.Any]) -> Store:
    from .sql_versions import require

    require(settings.database_url)  # before the store's modules load on an unfit SQLAlchemy
    from . import SQLStore  # the lazy import names the extra when a driver is missing
    from .sql import engine_from_url

    # Our own pool: its connections carry the store's settings and client-side bounds.
    if not engines:
        engines.append(engine_from_url(
            settings.database_url or "",
            statement_timeout=settings.statement_timeout,
            asynchronous_commit=settings.sql_asynchronous_commit,
            connect_timeout=settings.database_connect_timeout,
            read_timeout=settings.database_read_timeout,
        ))  # fmt: skip
    engine = engines[0]
    return SQLStore(
        engine,
        statement_timeout=settings.statement_timeout,
        asynchronous_commit=settings.sql_asynchronous_commit,
        create_tables=settings.create_tables,
    )


def _app_store(app: Flask, settings: Settings) -> Store:
    """Flask-SQLAlchemy's engine when it is registered on the app by now, else memory."""
    sqlalchemy_ext = app.extensions.get("sqlalchemy")
    if sqlalchemy_ext is None:
        return MemoryStore()
    from .sql_versions import flask_sqlalchemy_engine, require

    require()  # before the store's modules load on an unfit SQLAlchemy
    from . import SQLStore

    engine = flask_sqlalchemy_engine(app, sqlalchemy_ext)
    return SQLStore(
        engine,
        statement_timeout=settings.statement_timeout,
        asynchronous_commit=settings.sql_asynchronous_commit,
        create_tables=settings.create_tables,
    )
