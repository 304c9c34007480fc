"""flask_a2a.auth: principal hooks over Flask-Login, Flask-HTTPAuth and Flask-JWT-Extended.

Each app has two users and the library as its docs set it up; the exchange gets the caller the
library would have given a view of the app's own. For each: the right credentials make the
caller's task, another user's credentials cannot see it (-32001), none or bad ones are 401.
"""

from __future__ import annotations

import base64
import datetime
import typing as t
from types import SimpleNamespace

import pytest
from flask import Flask, g, request

from flask_a2a import A2A, Skill
from flask_a2a.auth import flask_login_principal, httpauth_principal, jwt_principal, user_id
from flask_a2a.testing import A2ATestClient
from tests.conftest import echo

USERS = {1: SimpleNamespace(id=1, name="alice"), 2: SimpleNamespace(id=2, name="bob")}
TOKENS = {"alice-token": USERS[1], "bob-token": USERS[2]}


def mount(app: Flask, principal: t.Callable[[], t.Any]) -> A2A:
    return A2A(app, skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
               principal=principal)  # fmt: skip


def check_isolation(app: Flask, a2a: A2A, alice: dict[str, str], bob: dict[str, str],
                    bad: dict[str, str]) -> None:  # fmt: skip
    """Alice's credentials make her task (owner "1"); Bob's cannot see it; bad ones are 401."""
    try:
        client = A2ATestClient(app)
        body = {"message": client.message("hi", skill="echo")}
        task = client.rpc("SendMessage", body, headers=alice).result["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert a2a.store(app).get_task(task["id"], "1") is not None  # the user id is the owner
        assert client.rpc("GetTask", {"id": task["id"]}, headers=alice).result["id"] == task["id"]
        assert client.rpc("GetTask", {"id": task["id"]}, headers=bob).code == -32001
        assert client.rpc("ListTasks", {}, headers=bob).result["totalSize"] == 0
        assert client.rpc("ListTasks", {}, headers=bad).status == 401
        assert client.rpc("ListTasks", {}).status == 401
    finally:
        a2a.shutdown(2, app)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_flask_login_request_loader() -> None:
    from flask_login import LoginManager, UserMixin

    class User(UserMixin):
        def __init__(self, user: t.Any) -> None:
            self.id = user.id

    app = Flask("login_app")
    app.config["SECRET_KEY"] = "x"
    login = LoginManager(app)
    login.user_loader(lambda user_id: User(USERS[int(user_id)]))

    @login.request_loader
    def from_token(request: t.Any) -> User | None:
        user = TOKENS.get(request.headers.get("Authorization", "").removeprefix("Bearer "))
        return User(user) if user else None

    a2a = mount(app, flask_login_principal())
    check_isolation(app, a2a, bearer("alice-token"), bearer("bob-token"), bearer("nope"))


def test_flask_httpauth_token_runs_verify_token_and_sets_current_user() -> None:
    from flask_httpauth import HTTPTokenAuth

    app = Flask("httpauth_app")
    token_auth = HTTPTokenAuth()
    token_auth.verify_token(TOKENS.get)
    seen: list[t.Any] = []
    hook = httpauth_principal(token_auth)

    def principal() -> t.Any:
        found = hook()
        seen.append(token_auth.current_user())  # as in a view under login_required
        return found

    a2a = mount(app, principal)
    check_isolation(app, a2a, bearer("alice-token"), bearer("bob-token"), bearer("nope"))
    assert USERS[1] in seen and USERS[2] in seen


def test_flask_httpauth_basic() -> None:
    from flask_httpauth import HTTPBasicAuth

    def basic(name: str, password: str) -> dict[str, str]:
        encoded = base64.b64encode(f"{name}:{password}".encode()).decode()
        return {"Authorization": f"Basic {encoded}"}

    app = Flask("basic_app")
    basic_auth = HTTPBasicAuth()

    @basic_auth.verify_password
    def verify(name: str, password: str) -> t.Any:
        user = next((u for u in USERS.values() if u.name == name), None)
        return user if user is not None and password == f"{name}-pw" else None

    a2a = mount(app, httpauth_principal(basic_auth))
    check_isolation(app, a2a, basic("alice", "alice-pw"), basic("bob", "bob-pw"),
                    basic("alice", "wrong"))  # fmt: skip


def test_flask_jwt_extended_identity_and_bad_tokens() -> None:
    from flask_jwt_extended import JWTManager, create_access_token

    app = Flask("jwt_app")
    app.config["JWT_SECRET_KEY"] = "a-secret-of-at-least-32-bytes-long!!"
    JWTManager(app)
    with app.app_context():
        alice, bob = (create_access_token(identity=str(i)) for i in (1, 2))
        expired = create_access_token(identity="1", expires_delta=-datetime.timedelta(seconds=60))
    app.config["JWT_SECRET_KEY"] = "another-secret-of-at-least-32-bytes!"
    with app.app_context():
        forged = create_access_token(identity="1")  # signed with another key
    app.config["JWT_SECRET_KEY"] = "a-secret-of-at-least-32-bytes-long!!"
    a2a = mount(app, jwt_principal())
    client = A2ATestClient(app)
    for token in (expired, forged, "not.a.jwt"):
        assert client.rpc("ListTasks", {}, headers=bearer(token)).status == 401
    check_isolation(app, a2a, bearer(alice), bearer(bob), bearer(forged))


def test_a_plain_token_before_request() -> None:
    """The recipe without a library: the app's before_request puts the user on g."""
    app = Flask("plain_app")

    @app.before_request
    def load_user() -> None:
        g.user = TOKENS.get(request.headers.get("Authorization", "").removeprefix("Bearer "))

    a2a = mount(app, lambda: user_id(g.get("user")))
    check_isolation(app, a2a, bearer("alice-token"), bearer("bob-token"), bearer("nope"))


@pytest.mark.parametrize("user,owner", [(7, 7), ("susan", "susan"), (None, None),
                                         (SimpleNamespace(id=3), 3)])  # fmt: skip
def test_user_id(user: t.Any, owner: t.Any) -> None:
    assert user_id(user) == owner
