"""psycopg2 (and mysqlclient) under gevent: a driver that blocks the whole worker is found once
at startup and named with its fixes; with a fix, the worker serves concurrently again.

The live cases run one ``gunicorn -k gevent`` worker on PostgreSQL whose skill waits one second
in the database (tests/blocking_driver_app.py), and send it four SendMessage calls at once. Each
run reports when its wait began and ended: on bare psycopg2 no wait begins before the previous
one ended (the worker is stopped while one waits), with psycogreen or psycopg 3 all four waits
overlap.
"""

from __future__ import annotations

import logging
import threading
import time
import typing as t
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests
import sqlalchemy as sa

from flask_a2a.store import blocking_drivers, sql_versions
from flask_a2a.testing import A2ATestClient
from tests.live_server import LiveGunicorn

ROOT = Path(__file__).resolve().parents[2]
CALLS = 4

POST_FORK = """
from psycogreen.gevent import patch_psycopg


def post_fork(server, worker):
    patch_psycopg()
"""


def four_naps(url: str) -> tuple[list[dict[str, t.Any]], float]:
    """CALLS SendMessage calls to the nap skill at once: each run's data, and the wall time."""
    barrier = threading.Barrier(CALLS)
    naps: list[dict[str, t.Any]] = []

    def call() -> None:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"message": A2ATestClient.message(skill="nap")}}  # fmt: skip
        barrier.wait(30)
        answer = requests.post(url + "/a2a", json=body, timeout=60).json()
        task = answer["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", answer
        naps.append(task["artifacts"][0]["parts"][0]["data"])

    threads = [threading.Thread(target=call) for _ in range(CALLS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    elapsed = time.monotonic() - started
    assert len(naps) == CALLS, naps
    assert len({nap["pid"] for nap in naps}) == 1  # one worker served them all
    return naps, elapsed


@pytest.mark.live
@pytest.mark.postgres
@pytest.mark.parametrize("driver", [
    "psycopg2", "psycopg2 + psycogreen",
    pytest.param("psycopg", marks=pytest.mark.skipif(
        not sql_versions.IS_2, reason="psycopg 3 has no dialect in SQLAlchemy 1.4 (the "
        "psycopg2 cases run there)")),
])  # fmt: skip
def test_one_gevent_worker_on_each_driver(
    driver: str, new_pg_database: t.Callable[[], str], tmp_path: Path
) -> None:
    name = "postgresql+psycopg" if driver == "psycopg" else "postgresql+psycopg2"
    url = sa.engine.make_url(new_pg_database()).set(drivername=name)
    extra: list[str] = []
    if driver == "psycopg2 + psycogreen":
        conf = tmp_path / "gunicorn.conf.py"
        conf.write_text(POST_FORK)
        extra = ["-c", str(conf)]
    server = LiveGunicorn(
        "tests.blocking_driver_app:create_app()", chdir=str(ROOT), extra=extra,
        env={"NAP_DATABASE_URL": url.render_as_string(hide_password=False)},
    )  # fmt: skip
    try:
        naps, elapsed = four_naps(server.url)
    finally:
        log = server.stop()
    spans = sorted((nap["began"], nap["ended"]) for nap in naps)
    warning = "runs on psycopg2, which blocks the whole gevent worker"
    print(f"{driver}: {CALLS} concurrent one-second waits in {elapsed:.2f} s")  # for the report
    if driver == "psycopg2":
        # Serialised: each wait began only once the one before had ended.
        assert all(b >= prior_end for (_, prior_end), (b, _) in zip(spans, spans[1:]))
        assert elapsed >= CALLS - 0.5
        assert log.count(warning) == 1, log  # once, naming both fixes
        assert "psycogreen.gevent.patch_psycopg()" in log and "postgresql+psycopg://" in log
    else:
        # Concurrent: every wait began before any ended.
        assert max(b for b, _ in spans) < min(e for _, e in spans), spans
        assert warning not in log, log
    assert "Traceback" not in log and "MonkeyPatchWarning" not in log, log


# ------------------------------------------------------------------ the check itself


def engine_on(driver: str) -> t.Any:
    return SimpleNamespace(dialect=SimpleNamespace(driver=driver, name="x"))


@pytest.fixture
def patched(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a gevent worker (the test process itself is not patched)."""
    monkeypatch.setattr(blocking_drivers, "gevent_patched", lambda: True)
    monkeypatch.setattr(blocking_drivers, "_warned", set())


@pytest.mark.usefixtures("patched")
def test_each_blocking_driver_is_named_once_with_its_fix(caplog: pytest.LogCaptureFixture) -> None:
    import psycopg2.extensions

    assert psycopg2.extensions.get_wait_callback() is None
    engines = [("the store", engine_on("psycopg2")), ("the app", engine_on("mysqldb")),
               ("the other", engine_on("psycopg")), ("pymysql", engine_on("pymysql"))]  # fmt: skip
    with caplog.at_level(logging.WARNING, "flask_a2a"):
        lines = blocking_drivers.warn_blocking(engines)
        assert blocking_drivers.warn_blocking(engines) == []  # once per process
    assert len(lines) == 2 and [r.getMessage() for r in caplog.records] == lines
    assert lines[0].startswith("flask_a2a: the store runs on psycopg2")
    assert "psycogreen.gevent.patch_psycopg()" in lines[0] and "post_fork" in lines[0]
    assert "postgresql+psycopg://" in lines[0]
    assert lines[1].startswith("flask_a2a: the app runs on mysqldb")
    assert "mysql+pymysql://" in lines[1]


@pytest.mark.usefixtures("patched")
def test_psycopg2_with_a_wait_callback_is_not_named() -> None:
    import psycopg2.extensions
    import psycopg2.extras

    psycopg2.extensions.set_wait_callback(psycopg2.extras.wait_select)
    try:
        assert blocking_drivers.warn_blocking([("the app", engine_on("psycopg2"))]) == []
    finally:
        psycopg2.extensions.set_wait_callback(None)


def test_nothing_is_named_without_gevent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocking_drivers, "_warned", set())
    assert not blocking_drivers.gevent_patched()  # the test process runs unpatched
    assert blocking_drivers.warn_blocking([("the app", engine_on("psycopg2"))]) == []
