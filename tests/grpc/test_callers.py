"""Who calls over gRPC: the host's own auth decides, unchanged. The metadata reaches its
before-request hooks, its principal hook and the helpers of ``flask_a2a.auth`` as the request's
headers; every isolation rule (owner, scope set, tenant, agent) holds, each with a wrong caller
who tries and fails exactly as on an unknown id."""

from __future__ import annotations

import base64
import typing as t
from types import SimpleNamespace

import grpc
import pytest
from a2a.types import a2a_pb2
from flask import Flask, abort, g, redirect, request

from flask_a2a import A2A, Principal, Skill
from flask_a2a.auth import flask_login_principal, httpauth_principal, jwt_principal, user_id
from flask_a2a.store import MemoryStore
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, echo, wait_for
from tests.grpc.conftest import Caller, grpc_server, refusal, send_request

USERS = {1: SimpleNamespace(id=1, name="alice"), 2: SimpleNamespace(id=2, name="bob")}
TOKENS = {"alice-token": USERS[1], "bob-token": USERS[2]}
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
NOT_FOUND = grpc.StatusCode.NOT_FOUND


def mount(app: Flask, principal: t.Callable[[], t.Any], **options: t.Any) -> A2A:
    return A2A(
        app,
        skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
        principal=principal,
        **options,
    )


def check_callers(app: Flask, a2a: A2A, alice: str, bob: str, bad: str) -> None:
    """Alice's ``authorization`` makes her task (owner "1"); Bob's cannot see it, nor list it;
    a bad one and none are UNAUTHENTICATED."""
    try:
        with grpc_server(app) as server:
            call = Caller(server.address, token=None)
            as_alice = [("authorization", alice)]
            sent = call("SendMessage", send_request("hi"), extra=as_alice)
            assert sent.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
            assert a2a.store(app).get_task(sent.task.id, "1") is not None  # the user is the owner
            got = call("GetTask", a2a_pb2.GetTaskRequest(id=sent.task.id), extra=as_alice)
            assert got.id == sent.task.id
            as_bob = [("authorization", bob)]
            refusal(
                call("GetTask", a2a_pb2.GetTaskRequest(id=sent.task.id), extra=as_bob),
                NOT_FOUND,
                "TASK_NOT_FOUND",
            )
            assert call("ListTasks", a2a_pb2.ListTasksRequest(), extra=as_bob).total_size == 0
            for extra in ([("authorization", bad)], []):
                refusal(
                    call("ListTasks", a2a_pb2.ListTasksRequest(), extra=extra),
                    UNAUTHENTICATED,
                    "UNAUTHENTICATED",
                )
            call.close()
    finally:
        a2a.shutdown(2, app)


def test_a_plain_before_request_reads_the_metadata_as_headers() -> None:
    app = Flask("plain_grpc")
    seen: list[str] = []

    @app.before_request
    def load_user() -> None:
        seen.append(request.remote_addr or "")
        g.user = TOKENS.get(request.headers.get("Authorization", "").removeprefix("Bearer "))

    a2a = mount(app, lambda: user_id(g.get("user")), store=MemoryStore())
    check_callers(app, a2a, "Bearer alice-token", "Bearer bob-token", "Bearer nope")
    assert set(seen) == {"127.0.0.1"}  # the RPC's peer is the request's remote address


def test_flask_httpauth_token() -> None:
    from flask_httpauth import HTTPTokenAuth

    app = Flask("httpauth_grpc")
    token_auth = HTTPTokenAuth()
    token_auth.verify_token(TOKENS.get)
    a2a = mount(app, httpauth_principal(token_auth), store=MemoryStore())
    check_callers(app, a2a, "Bearer alice-token", "Bearer bob-token", "Bearer nope")


def test_flask_httpauth_basic() -> None:
    from flask_httpauth import HTTPBasicAuth

    def basic(name: str, password: str) -> str:
        return "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()

    app = Flask("basic_grpc")
    basic_auth = HTTPBasicAuth()

    @basic_auth.verify_password
    def verify(name: str, password: str) -> t.Any:
        user = next((u for u in USERS.values() if u.name == name), None)
        return user if user is not None and password == f"{name}-pw" else None

    a2a = mount(app, httpauth_principal(basic_auth), store=MemoryStore())
    check_callers(app, a2a, basic("alice", "alice-pw"), basic("bob", "bob-pw"), basic("bob", "x"))


def test_flask_login_request_loader() -> None:
    from flask_login import LoginManager, UserMixin

    class User(UserMixin):
        def __init__(self, user: t.Any) -> None:
            self.id = user.id

    app = Flask("login_grpc")
    app.config["SECRET_KEY"] = "x"
    login = LoginManager(app)
    login.user_loader(lambda user_id: User(USERS[int(user_id)]))

    @login.request_loader
    def from_token(req: t.Any) -> User | None:
        user = TOKENS.get(req.headers.get("Authorization", "").removeprefix("Bearer "))
        return User(user) if user else None

    a2a = mount(app, flask_login_principal(), store=MemoryStore())
    check_callers(app, a2a, "Bearer alice-token", "Bearer bob-token", "Bearer nope")


def test_flask_jwt_extended() -> None:
    from flask_jwt_extended import JWTManager, create_access_token

    app = Flask("jwt_grpc")
    app.config["JWT_SECRET_KEY"] = "a-secret-of-at-least-32-bytes-long!!"
    JWTManager(app)
    with app.app_context():
        alice, bob = (create_access_token(identity=str(i)) for i in (1, 2))
    a2a = mount(app, jwt_principal(), store=MemoryStore())
    check_callers(app, a2a, f"Bearer {alice}", f"Bearer {bob}", "Bearer not.a.jwt")


def test_a_hook_that_answers_instead_refuses_the_call() -> None:
    """The host's before-request hook refuses as over the other bindings (host_refusals.py):
    its ``abort(403, ...)`` with its words, a page it returns by its status, a login redirect
    UNAUTHENTICATED naming where; the principal hook does not run."""
    app = Flask("guarded_grpc")
    asked: list[str] = []

    @app.before_request
    def guard() -> t.Any:
        key = request.headers.get("X-Api-Key")
        if key == "redirect-me":
            return redirect("/login")
        if key == "banned":
            abort(403, "this key is banned")
        if key == "hasty":
            return "<html><body><h1>Slow down</h1><p>Too many calls.</p></body></html>", 429
        if key != "s3cret":
            abort(401)
        return None

    def principal() -> Principal | None:
        asked.append(request.headers["X-Api-Key"])
        return Principal("alice")

    a2a = mount(app, principal, store=MemoryStore())
    try:
        with grpc_server(app) as server:
            call = Caller(server.address, token=None)

            def refused(key: str | None, code: grpc.StatusCode, reason: str) -> str:
                extra = [("x-api-key", key)] if key else []
                answer = call("ListTasks", a2a_pb2.ListTasksRequest(), extra=extra)
                return str(refusal(answer, code, reason)["message"])

            assert "redirected it to /login" in refused(
                "redirect-me", UNAUTHENTICATED, "UNAUTHENTICATED"
            )
            assert "this key is banned" in refused(
                "banned", grpc.StatusCode.PERMISSION_DENIED, "FORBIDDEN"
            )
            assert "Slow down" in refused(
                "hasty", grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED"
            )
            refused("wrong", UNAUTHENTICATED, "UNAUTHENTICATED")
            refused(None, UNAUTHENTICATED, "UNAUTHENTICATED")
            assert asked == []
            ok = call("ListTasks", a2a_pb2.ListTasksRequest(), extra=[("x-api-key", "s3cret")])
            assert ok.total_size == 0 and asked == ["s3cret"]
            call.close()
    finally:
        a2a.shutdown(2, app)


def test_a_stream_ends_when_its_caller_is_no_longer_allowed(
    make_app: t.Callable[..., Flask], gate: Gate
) -> None:
    """At each keep-alive the caller is resolved again from the RPC's metadata, through the
    same hooks: a token revoked mid-stream ends the stream (as over SSE)."""
    revoked: set[str] = set()

    def principal() -> Principal | None:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        return None if token in revoked else Principal(token) if token else None

    app = make_app(
        skills=[Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler)],
        principal=principal,
        config={"A2A_KEEPALIVE_INTERVAL": 0.2},
    )
    exchange = app.extensions["a2a"].exchange
    with grpc_server(app) as server:
        call = Caller(server.address, token="carol")
        stream = call.stub.SendStreamingMessage(
            send_request("hold", skill="gate"), metadata=call.metadata(), timeout=10
        )
        assert next(stream).task.id
        assert gate.entered.wait(5)
        revoked.add("carol")
        # Ended UNAUTHENTICATED (as SSE ends with a -31401 event); at most the WORKING status
        # came before the re-check.
        seen: list[t.Any] = []
        with pytest.raises(grpc.RpcError) as ended:
            for event in stream:
                seen.append(event.status_update.status.state)
        assert seen in ([], [a2a_pb2.TASK_STATE_WORKING])
        status = refusal(ended.value, UNAUTHENTICATED, "UNAUTHENTICATED")
        assert "no longer resolves" in status["message"]
        assert wait_for(lambda: exchange.seats.count("carol") == 0, timeout=3.0)
        gate.release.set()
        call.close()


# ------------------------------------------------------------------------------ isolation


def isolation_app(make_app: t.Callable[..., Flask]) -> Flask:
    return make_app()  # tests.conftest.TOKENS: alice, bob, alice-read, alice-write, alice-t2


def test_owner_isolation(make_app: t.Callable[..., Flask], served: t.Callable[..., Caller]) -> None:
    call = served(isolation_app(make_app))
    task_id = call.send("mine").task.id
    check_foreign(call, task_id, "bob")
    assert call("ListTasks", a2a_pb2.ListTasksRequest(), token="bob").total_size == 0


def test_scope_isolation(make_app: t.Callable[..., Flask], served: t.Callable[..., Caller]) -> None:
    call = served(isolation_app(make_app))
    task_id = call.send("read scope", token="alice-read").task.id
    # a narrowed token of another scope set
    check_foreign(call, task_id, "alice-write", owner="alice-read")
    assert call("GetTask", a2a_pb2.GetTaskRequest(id=task_id), token="alice-read").id == task_id
    assert call("GetTask", a2a_pb2.GetTaskRequest(id=task_id), token="alice").id == task_id
    listed = call("ListTasks", a2a_pb2.ListTasksRequest(), token="alice-write")
    assert listed.total_size == 0


def test_tenant_isolation(
    make_app: t.Callable[..., Flask], served: t.Callable[..., Caller]
) -> None:
    call = served(isolation_app(make_app))
    task_id = call.send("tenant none").task.id
    check_foreign(call, task_id, "alice-t2")  # the same owner, acting in another tenant
    mine = call.send("in t2", token="alice-t2").task.id
    check_foreign(call, mine, "alice", owner="alice-t2")
    # A request's tenant field is a routing label, never another tenant's key.
    labelled = call("GetTask", a2a_pb2.GetTaskRequest(id=mine, tenant="t2"), token="alice")
    refusal(labelled, NOT_FOUND, "TASK_NOT_FOUND")


def test_agent_isolation(served: t.Callable[..., Caller]) -> None:
    """Two agents on one app: the gRPC server of ``billing`` sees none of the default agent's
    tasks, whoever asks."""
    from tests.conftest import token_principal

    app = Flask("two_agents_grpc")
    store = MemoryStore()
    skills = [Skill(id="echo", name="Echo", description="Echo.", handler=echo)]
    first = A2A(app, skills=skills, principal=token_principal, store=store)
    second = A2A(
        app,
        skills=skills,
        principal=token_principal,
        name="billing",
        url_prefix="/billing",
    )
    try:
        default_task = A2ATestClient(app, token="alice").send("default", skill="echo")["task"]
        call = served(app, agent="billing")
        check_foreign(call, default_task["id"], "alice", owner=None)
        unchanged = A2ATestClient(app, token="alice").rpc("GetTask", {"id": default_task["id"]})
        assert unchanged.result == default_task
        assert call("ListTasks", a2a_pb2.ListTasksRequest()).total_size == 0
        billing_task = call.send("billing").task.id
        jsonrpc = A2ATestClient(app, token="alice")
        assert jsonrpc.rpc("GetTask", {"id": billing_task}).code == -32001
        billing = A2ATestClient(app, token="alice", agent="billing")
        assert billing.rpc("GetTask", {"id": billing_task}).result["id"] == billing_task
    finally:
        first.shutdown(2, app)
        second.shutdown(2, app)


def check_foreign(call: Caller, task_id: str, token: str, owner: str | None = "alice") -> None:
    """Every method on ``task_id`` refuses ``token`` exactly as an id that never existed,
    and changes nothing its ``owner`` sees."""
    for request_id in (task_id, "00000000-0000-0000-0000-000000000000"):
        answers = [
            call("GetTask", a2a_pb2.GetTaskRequest(id=request_id), token=token),
            call("CancelTask", a2a_pb2.CancelTaskRequest(id=request_id), token=token),
            call(
                "CreateTaskPushNotificationConfig",
                a2a_pb2.TaskPushNotificationConfig(
                    task_id=request_id, url="https://example.com/hook"
                ),
                token=token,
            ),
            call(
                "ListTaskPushNotificationConfigs",
                a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=request_id),
                token=token,
            ),
            call.send("follow-up", task_id=request_id, token=token),
        ]
        stream = call.stub.SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(id=request_id),
            metadata=call.metadata(token),
            timeout=10,
        )
        try:
            next(stream)
        except grpc.RpcError as exc:
            answers.append(exc)
        statuses = [refusal(answer, NOT_FOUND, "TASK_NOT_FOUND") for answer in answers]
        assert {s["message"] for s in statuses} == {"Task not found"}
        assert {s["details"][0]["metadata"]["taskId"] for s in statuses} == {request_id}
    if owner is None:  # not served here (another agent's task)
        return
    seen = call("GetTask", a2a_pb2.GetTaskRequest(id=task_id), token=owner)
    assert seen.status.state == a2a_pb2.TASK_STATE_COMPLETED and len(seen.history) == 1
    configs = a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id)
    assert list(call("ListTaskPushNotificationConfigs", configs, token=owner).configs) == []
