"""Fixtures of the store tests: empty databases of their own (SQLite files, or fresh PostgreSQL /
MariaDB databases)."""

from __future__ import annotations

import typing as t

import pytest

from tests.conftest import SQL_KINDS, mysql_url


@pytest.fixture
def new_mysql_database(mysql_engine: t.Any) -> t.Iterator[t.Callable[[], str]]:
    """``new_mysql_database()``: the URL of a new, uniquely named MariaDB/MySQL database
    (utf8mb4); dropped afterwards."""
    import uuid

    import sqlalchemy as sa

    names: list[str] = []

    def create() -> str:
        name = f"a2a_test_{uuid.uuid4().hex[:12]}"
        with mysql_engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        names.append(name)
        return (
            sa.engine.make_url(mysql_url()).set(database=name).render_as_string(hide_password=False)
        )

    yield create
    with mysql_engine.begin() as conn:
        for name in names:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture(params=SQL_KINDS)
def new_database(request: pytest.FixtureRequest, tmp_path: t.Any) -> t.Callable[[], str]:
    """``new_database()``: the URL of an empty database of its own, a SQLite file or (the
    postgres / mysql cases) a fresh PostgreSQL / MariaDB database."""
    if request.param == "postgres":
        return t.cast(t.Callable[[], str], request.getfixturevalue("new_pg_database"))
    if request.param == "mysql":
        return t.cast(t.Callable[[], str], request.getfixturevalue("new_mysql_database"))
    made = iter(range(1000))
    return lambda: f"sqlite:///{tmp_path / f'app{next(made)}.db'}"


@pytest.fixture
def app_database_url(new_database: t.Callable[[], str]) -> str:
    return new_database()
