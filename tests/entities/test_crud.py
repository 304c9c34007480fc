"""The generated owner-scoped CRUD blueprint, over plain HTTP (no exchange involved)."""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa
from flask import Flask, request
from flask.testing import FlaskClient
from marshmallow import Schema, fields, validate
from sqlalchemy.orm import registry, sessionmaker

from flask_a2a import Principal
from flask_a2a.entities.crud import crud_blueprint

#: Mapped as a host on SQLAlchemy 1.4 or 2.x may (a registry takes plain classes on both).
models = registry()


@models.mapped
class Note:
    """Integer ids, and an owner column the schema does not expose."""

    __tablename__ = "notes"
    id = sa.Column(sa.Integer, primary_key=True)
    user_id = sa.Column(sa.String(64), nullable=False)
    title = sa.Column(sa.String(200), nullable=False)
    done = sa.Column(sa.Boolean, nullable=False, default=False)


class NoteSchema(Schema):
    id = fields.Integer(dump_only=True)
    title = fields.String(required=True, validate=validate.Length(min=1, max=200))
    done = fields.Boolean()


USERS = {"alice": Principal("alice"), "bob": Principal("bob")}


def owner() -> Principal | None:
    return USERS.get(request.headers.get("X-User", ""))


@pytest.fixture
def notes(tmp_path: t.Any) -> t.Iterator[tuple[FlaskClient, sessionmaker[sa.orm.Session]]]:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'notes.db'}")
    models.metadata.create_all(engine)
    sessions = sessionmaker(engine)
    app = Flask("crud_test")
    app.config["TESTING"] = True
    app.register_blueprint(
        crud_blueprint(
            "notes",
            model=Note,
            schema=NoteSchema(),
            session=sessions,
            owner=owner,
            owner_column="user_id",
            url_prefix="/api/notes",
            default_limit=2,
            max_limit=3,
        )
    )
    yield app.test_client(), sessions
    engine.dispose()


def add(client: FlaskClient, user: str, title: str, done: bool = False) -> dict[str, t.Any]:
    response = client.post(
        "/api/notes", json={"title": title, "done": done}, headers={"X-User": user}
    )
    assert response.status_code == 201, response.get_json()
    return t.cast(dict[str, t.Any], response.get_json())


def count(sessions: sessionmaker[sa.orm.Session]) -> int:
    with sessions() as db:
        return db.scalar(sa.select(sa.func.count()).select_from(Note)) or 0


def test_unauthenticated_is_401_and_writes_nothing(notes: t.Any) -> None:
    client, sessions = notes
    for method, path in (
        ("get", "/api/notes"),
        ("post", "/api/notes"),
        ("get", "/api/notes/1"),
        ("patch", "/api/notes/1"),
        ("delete", "/api/notes/1"),
    ):
        response = getattr(client, method)(path, json={"title": "x"})
        assert response.status_code == 401, (method, path)
        assert response.get_json() == {"error": "authentication required"}
    assert count(sessions) == 0


def test_paging_sort_filters_and_the_limit_cap(notes: t.Any) -> None:
    client, _ = notes
    for title, done in (("b", False), ("a", True), ("c", False), ("d", True)):
        add(client, "alice", title, done)
    add(client, "bob", "bobs", True)
    alice = {"X-User": "alice"}
    first = client.get("/api/notes?sort=title", headers=alice).get_json()
    assert [n["title"] for n in first["data"]] == ["a", "b"]
    assert {k: first[k] for k in ("page", "perPage", "total", "totalPages")} == {
        "page": 1,
        "perPage": 2,
        "total": 4,
        "totalPages": 2,
    }
    capped = client.get("/api/notes?limit=50&sort=-title", headers=alice).get_json()
    assert capped["perPage"] == 3 and [n["title"] for n in capped["data"]] == ["d", "c", "b"]
    done = client.get("/api/notes?done=true&sort=title", headers=alice).get_json()
    assert [n["title"] for n in done["data"]] == ["a", "d"]
    last = client.get("/api/notes?page=3&limit=2", headers=alice).get_json()
    assert last["data"] == [] and last["total"] == 4


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("page=0", "page must be a positive integer"),
        ("limit=x", "limit must be a positive integer"),
        ("user_id=bob", "unknown query parameter: user_id"),
        ("sort=user_id", "cannot sort by user_id"),
        ("done=maybe", "invalid filter"),
    ],
)
def test_bad_queries_are_400(notes: t.Any, query: str, error: str) -> None:
    client, _ = notes
    response = client.get(f"/api/notes?{query}", headers={"X-User": "alice"})
    assert response.status_code == 400
    assert response.get_json()["error"] == error


def test_writes_validate_and_cannot_set_owner_or_id(notes: t.Any) -> None:
    client, sessions = notes
    alice = {"X-User": "alice"}
    for body in (
        {"title": ""},
        {"done": True},
        {"title": "x", "user_id": "bob"},
        {"title": "x", "id": 7},
        ["title"],
    ):
        response = client.post("/api/notes", json=body, headers=alice)
        assert response.status_code == 400, body
    assert count(sessions) == 0
    note = add(client, "alice", "first")
    patched = client.patch(f"/api/notes/{note['id']}", json={"done": True}, headers=alice)
    assert patched.get_json() == {**note, "done": True}
    put = client.put(f"/api/notes/{note['id']}", json={"done": False}, headers=alice)
    assert put.status_code == 400  # PUT replaces: title is required
    assert client.get("/api/notes/not-a-number", headers=alice).status_code == 404


def test_another_owners_row_is_a_404_for_every_route(notes: t.Any) -> None:
    client, sessions = notes
    bobs = add(client, "bob", "secret")
    alice = {"X-User": "alice"}
    path = f"/api/notes/{bobs['id']}"
    assert client.get(path, headers=alice).status_code == 404
    assert client.patch(path, json={"title": "mine"}, headers=alice).status_code == 404
    assert client.delete(path, headers=alice).status_code == 404
    assert client.get("/api/notes", headers=alice).get_json()["total"] == 0
    assert client.get(path, headers={"X-User": "bob"}).get_json() == bobs
    deleted = client.delete(path, headers={"X-User": "bob"})
    assert deleted.get_json() == {"id": bobs["id"], "deleted": True}
    assert count(sessions) == 0
