"""The legacy app (tests/legacy_app.py) with A2A added, as its team would try it.

Over the Flask test client: skills on the app's own ``db.session`` with integer user ids, the
store the app's database gives (A2A registered before SQLAlchemy), entity skills over a
hand-written route, CSRFProtect with a cookie session, owner isolation. Under
``gunicorn -k gevent -w 2`` on PostgreSQL: every request may land on either worker.
"""

from __future__ import annotations

import json
import logging
import typing as t
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa
from flask import Flask

from flask_a2a.testing import A2ATestClient
from tests import legacy_app
from tests.conftest import wait_for
from tests.live_server import LiveGunicorn

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def app(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> t.Iterator[Flask]:
    caplog.set_level(logging.INFO, logger="flask_a2a")
    app = legacy_app.create_app(
        {"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'legacy.db'}", "TESTING": True}
    )
    yield app
    legacy_app.a2a.shutdown(timeout=5, app=app)
    with app.app_context():
        legacy_app.db.engine.dispose()


def artifact_data(task: dict[str, t.Any]) -> t.Any:
    return task["artifacts"][0]["parts"][0]["data"]


def test_a_skill_queries_the_callers_rows_with_the_apps_session(app: Flask) -> None:
    alice = A2ATestClient(app, token="alice-token")
    task = alice.send(skill="invoice-total")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    assert artifact_data(task) == {"owner": 1, "count": 2, "total": "200.50"}
    bob = A2ATestClient(app, token="bob-token").send(skill="invoice-total")["task"]
    assert artifact_data(bob) == {"owner": 2, "count": 1, "total": "999.99"}


def test_the_store_is_the_apps_database_whatever_the_registration_order(
    app: Flask, caplog: pytest.LogCaptureFixture
) -> None:
    task = A2ATestClient(app, token="alice-token").send(skill="invoice-total")["task"]
    with app.app_context():
        owners = (
            legacy_app.db.session.execute(
                sa.text("SELECT owner FROM a2a_tasks WHERE id = :id"), {"id": task["id"]}
            )
            .scalars()
            .all()
        )
    assert owners == ["1"]  # the integer user id, stored as the owner string
    assert "flask_a2a: task store: SQLStore(sqlite, prefix a2a_)" in caplog.text


def test_another_user_id_cannot_see_the_task(app: Flask) -> None:
    task = A2ATestClient(app, token="alice-token").send(skill="invoice-total")["task"]
    bob = A2ATestClient(app, token="bob-token")
    assert bob.rpc("GetTask", {"id": task["id"]}).code == -32001
    assert bob.rpc("CancelTask", {"id": task["id"]}).code == -32001
    assert bob.rpc("ListTasks", {}).result["totalSize"] == 0
    nobody = A2ATestClient(app, token="nobody-token")
    assert nobody.rpc("ListTasks", {}).status == 401


def test_a_streamed_skill_reads_the_session_too(app: Flask) -> None:
    client = A2ATestClient(app, token="bob-token")
    response, events = client.stream(
        "SendStreamingMessage", {"message": client.message(skill="user-name")}
    )
    assert response.mimetype == "text/event-stream"
    artifacts = [e["result"]["artifactUpdate"] for e in events if "artifactUpdate" in e["result"]]
    assert artifacts[0]["artifact"]["parts"] == [{"text": "bob"}]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_the_entity_skill_describes_and_takes_what_the_route_takes(app: Flask) -> None:
    card = app.test_client().get("/.well-known/agent-card.json").get_json()
    entity = next(s for s in card["skills"] if s["id"] == "entity.invoices")
    assert "page" in entity["description"] and "limit" not in entity["description"]
    alice = A2ATestClient(app, token="alice-token")
    listed = alice.send(
        data={"skill": "entity.invoices", "operation": "list", "arguments": {"page": 1}}
    )["task"]
    assert listed["status"]["state"] == "TASK_STATE_COMPLETED", listed["status"]
    rows = artifact_data(listed)
    rows = rows["data"] if isinstance(rows, dict) else rows
    assert sorted(r["total"] for r in rows) == ["120.00", "80.50"]  # Alice's rows only
    refused = alice.send(
        data={"skill": "entity.invoices", "operation": "list", "arguments": {"limit": 5}}
    )["task"]
    assert refused["status"]["state"] == "TASK_STATE_FAILED"
    assert "limit" in refused["status"]["message"]["parts"][0]["text"]


def test_an_entity_call_is_a_request_of_its_own(app: Flask) -> None:
    """The re-entered route gets its own app context: its session is removed when the call
    ends (as after any request), not held until the run ends, and the run's ``g`` is not its."""
    torn_down: list[str] = []
    app.teardown_appcontext(lambda exc: torn_down.append("teardown"))
    alice = A2ATestClient(app, token="alice-token")
    alice.send(skill="invoice-total")  # the store is chosen (in a context of its own)
    before = len(torn_down)
    alice.send(skill="invoice-total")
    plain = len(torn_down) - before  # the exchange's request and the run
    before = len(torn_down)
    listed = alice.send(
        data={"skill": "entity.invoices", "operation": "list", "arguments": {"page": 1}}
    )["task"]
    assert listed["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(torn_down) - before == plain + 1  # the same two, and the entity call's own


def test_autogenerate_proposes_nothing_for_the_exchanges_tables(app: Flask) -> None:
    """Flask-Migrate's include_name hook (as the app registers it): after the store made its
    tables, comparing the database with the app's models yields no operation on them."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    A2ATestClient(app, token="alice-token").send(skill="invoice-total")  # the store opens
    config = app.extensions["migrate"].configure_args
    with app.app_context(), legacy_app.db.engine.connect() as conn:
        assert "a2a_tasks" in sa.inspect(conn).get_table_names()
        context = MigrationContext.configure(conn, opts={"include_name": config["include_name"]})
        assert compare_metadata(context, legacy_app.db.metadata) == []
        bare = MigrationContext.configure(conn)
        with pytest.warns(sa.exc.SAWarning, match="expression-based index"):
            proposed = compare_metadata(bare, legacy_app.db.metadata)
        dropped = [op for op in proposed if op[0] == "remove_table"]
        assert {op[1].name for op in dropped} >= {"a2a_tasks"}  # what the hook prevents


def test_csrf_protect_leaves_the_exchange_to_its_origin_gate(app: Flask) -> None:
    browser = app.test_client()
    with browser.session_transaction() as session:
        session["user_id"] = 1  # logged in with the cookie session, no token
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": A2ATestClient.message(skill="invoice-total")},
        }
    )
    same_site = browser.post(
        "/a2a",
        data=body,
        headers={"Content-Type": "application/json", "Origin": "http://localhost"},
    )
    assert same_site.status_code == 200, same_site.get_data(as_text=True)
    assert same_site.get_json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    cross_site = browser.post(
        "/a2a",
        data=body,
        headers={"Content-Type": "application/json", "Origin": "http://evil.example"},
    )
    assert cross_site.status_code == 403
    assert cross_site.get_json()["error"]["code"] == -31403
    assert browser.post("/login", data={"name": "alice"}).status_code == 400  # still checked


# ---------------------------------------------------------------- gunicorn -k gevent -w 2


@pytest.mark.live
@pytest.mark.postgres
def test_two_gevent_workers_on_postgresql_serve_one_exchange(
    new_pg_database: t.Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pg_database = new_pg_database()
    monkeypatch.setenv("LEGACY_DATABASE_URL", pg_database)
    seeded = legacy_app.create_app()  # the schema and the users, once, before the workers
    with seeded.app_context():
        legacy_app.db.engine.dispose()
    server = LiveGunicorn(
        "tests.legacy_app:create_app()",
        chdir=str(ROOT),
        workers=2,
        env={"LEGACY_DATABASE_URL": pg_database, "LEGACY_CREATE_ALL": "false"},
    )
    try:
        session = requests.Session()
        session.headers["Authorization"] = "Bearer alice-token"

        def rpc(method: str, params: dict[str, t.Any]) -> dict[str, t.Any]:
            answer = session.post(
                server.url + "/a2a",
                json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            return t.cast(dict[str, t.Any], answer.json())

        blocking = rpc("SendMessage", {"message": A2ATestClient.message(skill="invoice-total")})
        task = blocking["result"]["task"]
        assert artifact_data(task) == {"owner": 1, "count": 2, "total": "200.50"}
        started = rpc(
            "SendMessage",
            {
                "message": A2ATestClient.message(skill="user-name"),
                "configuration": {"returnImmediately": True},
            },
        )["result"]["task"]
        # Each read may land on either worker: the shared store answers the same.
        assert wait_for(
            lambda: (
                rpc("GetTask", {"id": started["id"]})["result"]["status"]["state"]
                == "TASK_STATE_COMPLETED"
            ),
            timeout=20,
        )
        for _ in range(10):
            assert rpc("GetTask", {"id": task["id"]})["result"]["id"] == task["id"]
            assert rpc("ListTasks", {})["result"]["totalSize"] == 2
        with session.post(
            server.url + "/a2a",
            stream=True,
            timeout=30,
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "SendStreamingMessage",
                "params": {"message": A2ATestClient.message(skill="user-name")},
            },
        ) as stream:
            assert stream.headers["Content-Type"].startswith("text/event-stream")
            body = stream.text
        assert '"text":"alice"' in body and "TASK_STATE_COMPLETED" in body
        bob = requests.post(
            server.url + "/a2a",
            timeout=30,
            headers={"Authorization": "Bearer bob-token"},
            json={"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": task["id"]}},
        )
        assert bob.json()["error"]["code"] == -32001, bob.text
    finally:
        log = server.stop()
    assert "Traceback" not in log, log
    assert "MonkeyPatchWarning" not in log, log
