"""Entities over the routes an app already has: renamed and extra arguments, nested paths,
operations of the app's own names, a description override (issue 25, item 2).

The app is shaped like the Flask Mega-Tutorial's token API: ``/api/users`` pages with
``page`` and ``per_page``, ``/api/users/<id>/followers`` and ``/following`` are nested lists,
and only a bearer token is accepted (a session cookie is not).
"""

from __future__ import annotations

import typing as t

import pytest
from flask import Flask, request
from marshmallow import Schema, fields

from flask_a2a import A2A, ConfigError, Entity
from flask_a2a.entities import Argument, Operation
from flask_a2a.testing import A2ATestClient
from tests import stack
from tests.conftest import token_principal

USERS = {n: {"id": n, "username": f"user{n}"} for n in range(1, 6)}
FOLLOWERS = {1: [2, 3, 4], 2: [1]}


class UserSchema(Schema):
    id = fields.Integer(dump_only=True)
    username = fields.String(required=True)


class TokenAPI:
    """The app's own API: token auth only; every request that reached a route is noted."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        app.before_request(self.authenticate)
        app.add_url_rule("/api/users", "users", self.users)
        app.add_url_rule("/api/users/<int:user_id>", "user", self.user)
        app.add_url_rule("/api/users/<int:user_id>/followers", "followers", self.followers)
        app.add_url_rule("/api/users/<int:user_id>/following", "following", self.following)

    def authenticate(self) -> t.Any:
        if request.path.startswith("/api/"):
            if token_principal() is None:
                return {"error": "Unauthorized"}, 401
            self.seen.append((request.method, request.path, request.args.to_dict()))
        return None

    @staticmethod
    def page(rows: list[dict[str, t.Any]]) -> dict[str, t.Any]:
        page = int(request.args.get("page", 1))
        per_page = min(int(request.args.get("per_page", 10)), 100)
        return {
            "items": rows[(page - 1) * per_page : page * per_page],
            "_meta": {"page": page, "per_page": per_page, "total_items": len(rows)},
        }

    def users(self) -> t.Any:
        return self.page(list(USERS.values()))

    def user(self, user_id: int) -> t.Any:
        return USERS.get(user_id) or ({"error": "Not Found"}, 404)

    def followers(self, user_id: int) -> t.Any:
        if user_id not in USERS:
            return {"error": "Not Found"}, 404
        return self.page([USERS[n] for n in FOLLOWERS.get(user_id, [])])

    def following(self, user_id: int) -> t.Any:
        return self.page([USERS[n] for n, of in FOLLOWERS.items() if user_id in of])


PAGING = (
    Argument("page", "integer"),
    Argument("per_page", {"type": "integer", "minimum": 1, "maximum": 100}),
)


def users_entity() -> Entity:
    return Entity(
        "users",
        schema=UserSchema,
        description="The microblog's users and who follows whom.",
        operations=(
            "list",
            "get",
            Operation(
                "followers",
                "GET",
                "/api/users/{id}/followers",
                arguments=(Argument("id", "integer"), *PAGING),
                description="The users following a user.",
            ),
            Operation(
                "followed",
                "GET",
                "/api/users/{id}/following",
                arguments=(Argument("id", "integer"), *PAGING),
            ),
        ),
        arguments={"list": ["page", Argument("limit", sends_as="per_page")]},
    )


@pytest.fixture
def api(make_app: t.Callable[..., Flask]) -> TokenAPI:
    return TokenAPI(make_app(entities=[users_entity()]))


def call(app: Flask, operation: str, arguments: t.Any = None, **client: t.Any) -> t.Any:
    data: dict[str, t.Any] = {"skill": "entity.users", "operation": operation}
    if arguments is not None:
        data["arguments"] = arguments
    return A2ATestClient(app, **(client or {"token": "alice"})).send(data=data)["task"]


def text(task: dict[str, t.Any]) -> str:
    return t.cast(str, task["status"]["message"]["parts"][0]["text"])


def test_the_card_and_the_tools_follow_the_declaration(api: TokenAPI) -> None:
    expected = (
        "The microblog's users and who follows whom.\n"
        "Send one data part carrying skill, operation, and arguments:\n"
        "list(page, limit)\n"
        "get(id)\n"
        "followers(id, page, per_page)\n"
        "followed(id, page, per_page)"
    )
    card = api.app.test_client().get("/.well-known/agent-card.json").get_json()
    [entry] = [s for s in card["skills"] if s["id"] == "entity.users"]
    assert entry["description"] == expected
    tools = {tool["name"]: tool for tool in A2A().tools(api.app)}
    assert list(tools) == ["users.list", "users.get", "users.followers", "users.followed"]
    # limit keeps the schema derived for it; it is sent as per_page.
    assert tools["users.list"]["inputSchema"]["properties"] == {
        "page": {"type": "integer", "minimum": 1},
        "limit": {"type": "integer", "minimum": 1},
    }
    assert tools["users.followers"] == {
        "name": "users.followers",
        "description": "The users following a user.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "page": {"type": "integer"},
                "per_page": {"type": "integer", "minimum": 1, "maximum": 100},
            },
            "additionalProperties": False,
            "required": ["id"],
        },
    }
    assert tools["users.followed"]["description"] == ("Followed (GET /api/users/{id}/following).")


def test_a_renamed_argument_reaches_the_route_under_its_own_name(api: TokenAPI) -> None:
    task = call(api.app, "list", {"page": 2, "limit": 2})
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["data"]["items"] == [USERS[3], USERS[4]]
    assert api.seen == [("GET", "/api/users", {"page": "2", "per_page": "2"})]
    wrong = call(api.app, "list", {"per_page": 2})
    assert text(wrong) == "invalid arguments: per_page: Unknown field."
    assert len(api.seen) == 1


def test_a_nested_route_takes_its_path_parameter(api: TokenAPI) -> None:
    task = call(api.app, "followers", {"id": 1, "per_page": 2})
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["name"] == "users.followers"
    data = task["artifacts"][0]["parts"][0]["data"]
    assert data["items"] == [USERS[2], USERS[3]] and data["_meta"]["total_items"] == 3
    followed = call(api.app, "followed", {"id": 1})
    assert followed["artifacts"][0]["parts"][0]["data"]["items"] == [USERS[2]]
    assert api.seen == [
        ("GET", "/api/users/1/followers", {"per_page": "2"}),
        ("GET", "/api/users/1/following", {}),
    ]


@pytest.mark.parametrize(
    ("arguments", "refused"),
    [
        ({}, "id: Missing data for required field."),
        ({"id": "1"}, "id: Not a valid integer."),
        ({"id": 1, "per_page": 500}, "per_page: Must satisfy maximum 100."),
        ({"id": 1, "page": [1]}, "page: A path or query value is one string, number or boolean."),
        ({"id": 1, "limit": 5}, "limit: Unknown field."),
    ],
)
def test_bad_arguments_of_a_declared_operation_send_nothing(
    api: TokenAPI, arguments: dict[str, t.Any], refused: str
) -> None:
    task = call(api.app, "followers", arguments)
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert text(task) == f"invalid arguments: {refused}"
    assert api.seen == []


def test_only_the_declared_operations_are_offered(api: TokenAPI) -> None:
    task = call(api.app, "delete", {"id": 1})
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert text(task) == 'unknown operation "delete"; operations: list, get, followers, followed'


def test_a_nested_path_with_an_undeclared_parameter_fails_startup() -> None:
    # Before: accepted here, then every call failed ("id: Unknown field", or a 404 without it).
    for entity in (
        Entity(
            "users",
            schema=UserSchema,
            operations=("list",),
            routes={"list": ("GET", "/api/users/{id}/followers")},
        ),
        Entity(
            "users",
            schema=UserSchema,
            operations=(
                Operation(
                    "followers",
                    "GET",
                    "/api/users/{user_id}/followers",
                    arguments=[Argument("page", "integer")],
                ),
            ),
        ),
    ):
        with pytest.raises(ConfigError, match=r"holds \['(id|user_id)'\] but the operation"):
            A2A(Flask("nested"), principal=token_principal, entities=[entity])
    # Declared, the standard list takes it as its path parameter.
    app = Flask("declared")
    TokenAPI(app)
    A2A(
        app,
        principal=token_principal,
        entities=[
            Entity(
                "users",
                schema=UserSchema,
                operations=("list",),
                routes={"list": ("GET", "/api/users/{id}/followers")},
                arguments={"list": [Argument("id", "integer"), "page"]},
            )
        ],
    )
    task = call(app, "list", {"id": 2})
    assert task["artifacts"][0]["parts"][0]["data"]["items"] == [USERS[1]]


def test_declarations_that_cannot_fit_their_route_fail_startup() -> None:
    for operation, match in (
        (
            Operation("x", "GET", "/api/users", arguments=[Argument("q", where="body")]),
            "carries no body",
        ),
        (
            Operation("x", "GET", "/api/users", arguments=[Argument("q", where="path")]),
            "path parameter only when",
        ),
        (Operation("x", "GET", "/api/users", arguments=["nope"]), "'nope', which it cannot"),
        (Operation("x", "GET", "/api/users", arguments=["page", Argument("page")]), "twice"),
    ):
        with pytest.raises(ConfigError, match=match):
            A2A(
                Flask("bad"),
                principal=token_principal,
                entities=[Entity("users", schema=UserSchema, operations=(operation,))],
            )
    with pytest.raises(ConfigError, match="distinct names"):
        Entity(
            "users",
            schema=UserSchema,
            operations=(Operation("x", "GET", "/a"),),
            arguments={"x": ["page"]},
        )
    with pytest.raises(ConfigError, match="must be one of"):
        Argument("page", "int")


def test_today_entity_calls_are_unchanged(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(
        entities=[Entity("users", schema=UserSchema, url="/api/users", operations=("list", "get"))]
    )
    [skill] = [s for s in A2A().skills(app) if s.id == "entity.users"]
    assert skill.description == (
        "CRUD on users records through the app's tools. Send one data part carrying skill, "
        "operation, and arguments:\nlist(page, limit, sort, username)\nget(id)"
    )


def test_a_many_field_description_ends_with_dots_only_when_it_cut_some() -> None:
    wide = type("Wide", (Schema,), {f"f{n}": fields.String() for n in range(10)})
    app = Flask("wide")
    A2A(
        app,
        principal=token_principal,
        entities=[Entity("wide", schema=wide, operations=("create",))],
    )
    [skill] = A2A().skills(app)
    assert skill.description.split("\n")[1] == "create(f0, f1, f2, f3, f4, f5, f6, f7, ...)"


def test_credentials_the_api_does_not_accept_get_its_refusal(
    make_app: t.Callable[..., Flask],
) -> None:
    """A principal hook that accepts a session cookie, over a token-only API: the A2A call is
    let in, the re-entered API call is refused as the API refuses it."""

    def cookie_or_token() -> t.Any:
        return request.cookies.get("session") or token_principal()

    app = make_app(entities=[users_entity()], principal=cookie_or_token)
    api = TokenAPI(app)
    client = A2ATestClient(app)
    stack.set_cookie(client.client, "session", "alice")
    task = client.send(data={"skill": "entity.users", "operation": "get", "arguments": {"id": 1}})[
        "task"
    ]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert text(task) == 'entity request failed: status 401: {"error":"Unauthorized"}'
    assert api.seen == []
