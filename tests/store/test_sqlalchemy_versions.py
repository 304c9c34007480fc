"""What the SQL store says on a SQLAlchemy it cannot run (issue #32): one ConfigError at
``init_app`` naming the package, the version found and the one needed (and what works instead),
never a TypeError in the log and -32603 to callers. The refusals are tried on any SQLAlchemy by
standing in an older version; on a real 1.4 the psycopg 3 URL is refused as it is."""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest
import sqlalchemy as sa
from flask import Flask

from flask_a2a import A2A, Skill
from flask_a2a.config import ConfigError
from flask_a2a.store import sql_mysql, sql_versions
from flask_a2a.testing import A2ATestClient
from tests.conftest import echo, token_principal

SKILLS: t.Final = [Skill(id="echo", name="Echo", description="Echo.", handler=echo)]
PSYCOPG_URL: t.Final = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def mount(url: str | None = None) -> tuple[Flask, A2A]:
    app = Flask("versions")
    if url is not None:
        app.config["A2A_DATABASE_URL"] = url
    return app, A2A(app, skills=SKILLS, principal=token_principal)


def as_version(monkeypatch: pytest.MonkeyPatch, found: str) -> None:
    version = tuple(int(part) for part in found.split(".")[:3])
    monkeypatch.setattr(sql_versions, "FOUND", found)
    monkeypatch.setattr(sql_versions, "VERSION", version)
    monkeypatch.setattr(sql_versions, "IS_2", version >= (2, 0))


def test_psycopg3_on_sqlalchemy_14_fails_init_app_naming_psycopg2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    as_version(monkeypatch, "1.4.54")
    with pytest.raises(ConfigError) as refused:
        mount(PSYCOPG_URL)
    assert str(refused.value) == (
        "postgresql+psycopg needs SQLAlchemy 2.0 (found 1.4.54); on SQLAlchemy 1.4 use "
        "postgresql+psycopg2:// (pip install psycopg2-binary)"
    )


@pytest.mark.skipif(sql_versions.IS_2, reason="SQLAlchemy 2 has a psycopg 3 dialect")
def test_psycopg3_is_refused_on_the_installed_sqlalchemy_14() -> None:
    with pytest.raises(ConfigError, match=rf"\(found {sa.__version__}\); on SQLAlchemy 1.4 use"):
        mount(PSYCOPG_URL)


def test_a_sqlalchemy_older_than_the_floor_fails_init_app(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    as_version(monkeypatch, "1.3.24")
    with pytest.raises(ConfigError) as refused:
        mount(f"sqlite:///{tmp_path / 'tasks.db'}")
    message = str(refused.value)
    assert message.startswith("the SQL store needs SQLAlchemy 1.4.24 or newer (found 1.3.24)")
    assert "memory store" in message


def test_flask_sqlalchemy_on_an_older_sqlalchemy_fails_init_app(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The app store is chosen at first use; the version is checked at init_app all the same."""
    from flask_sqlalchemy import SQLAlchemy

    as_version(monkeypatch, "1.3.24")
    app = Flask("versions_fsa")
    app.config["SQLALCHEMY_DATABASE_URI"] = f"sqlite:///{tmp_path / 'app.db'}"
    app.config["SQLALCHEMY_TRACK_MODIFICATIONS"] = False
    SQLAlchemy(app)
    with pytest.raises(ConfigError, match=r"needs SQLAlchemy 1.4.24 or newer \(found 1.3.24\)"):
        A2A(app, skills=SKILLS, principal=token_principal)


@pytest.mark.parametrize("dialect", ["mysql", "mariadb", "postgresql", "sqlite"])
def test_the_store_types_compile_on_the_installed_sqlalchemy(dialect: str) -> None:
    """The types that once passed several dialect names to with_variant (a 2.0 feature)."""
    chosen = sa.engine.make_url(f"{dialect}://").get_dialect()()
    long_text = sql_mysql.LONG_TEXT.compile(dialect=chosen)
    digest = sql_mysql.DIGEST.compile(dialect=chosen)
    if dialect in ("mysql", "mariadb"):
        assert long_text.startswith("LONGTEXT") and "ascii_bin" in digest
    else:
        assert long_text == "TEXT" and digest == "VARCHAR(64)"


def test_a_url_store_answers_calls_on_the_installed_sqlalchemy(tmp_path: Path) -> None:
    """No TypeError between the store and a caller: send, read back, list."""
    app, a2a = mount(f"sqlite:///{tmp_path / 'tasks.db'}")
    client = A2ATestClient(app, "alice")
    sent = client.send("hi", skill="echo")["task"]
    assert sent["status"]["state"] == "TASK_STATE_COMPLETED"
    assert client.rpc("GetTask", {"id": sent["id"]}).result["id"] == sent["id"]
    assert [task["id"] for task in client.rpc("ListTasks", {}).result["tasks"]] == [sent["id"]]
    assert a2a.shutdown(timeout=5, app=app)


@pytest.mark.postgres
@pytest.mark.parametrize("drivername", ["postgresql", "postgresql+psycopg2"])
def test_psycopg2_urls_carry_the_store_bounds(drivername: str, pg_engine: t.Any) -> None:
    """SQLAlchemy 1.4's PostgreSQL driver (and ``postgresql://`` before 2.1): each connection
    of the store's engine carries its statement timeout and autocommits."""
    from flask_a2a.store.sql import engine_from_url
    from tests.conftest import pg_url

    url = sa.engine.make_url(pg_url()).set(drivername=drivername)
    engine = engine_from_url(url.render_as_string(hide_password=False), statement_timeout=2.5)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "2500ms"
            assert conn.connection.dbapi_connection.autocommit  # type: ignore[union-attr]
    finally:
        engine.dispose()
