"""The gRPC binding over a real grpcio server: all eleven RPCs of ``lf.a2a.v1.A2AService`` on the
same exchange as JSON-RPC, the wire rules of spec §10 (metadata, ``google.rpc.Status`` with an
ErrorInfo, the v1.0.1 codes) and the bounds the other bindings keep (message size, run cap,
stream seats, a cancelled call's seat)."""

from __future__ import annotations

import threading
import typing as t

import grpc
import pytest
from a2a.types import a2a_pb2
from flask import Flask
from google.protobuf import empty_pb2, json_format

from flask_a2a import AgentCard, AgentExtension, Part, Skill, TaskContext
from flask_a2a.protocol.errors import STATUSES
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, echo, wait_for
from tests.grpc.conftest import Caller, grpc_server, refusal, send_request

NOT_FOUND = grpc.StatusCode.NOT_FOUND
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED


def as_json(message: t.Any) -> dict[str, t.Any]:
    return t.cast(dict[str, t.Any], json_format.MessageToDict(message))


def set_fields(result: dict[str, t.Any]) -> dict[str, t.Any]:
    """A JSON-RPC result as a proto has it: a field at its default value is not there."""
    return {k: v for k, v in result.items() if v not in ("", 0, [], False, None)}


def ask(task: TaskContext) -> None:
    """Pauses for input, then completes with what the follow-up said."""
    if task.message.text == "again":
        task.artifact([Part(text="answered")], name="answer")
        return
    task.require_input("and then?")


@pytest.fixture
def gate_app(make_app: t.Callable[..., Flask], gate: Gate) -> Flask:
    return make_app(
        skills=[
            Skill(id="echo", name="Echo", description="Echo.", handler=echo),
            Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler),
            Skill(id="ask", name="Ask", description="Ask.", handler=ask),
        ],
        extended_card=lambda principal: AgentCard(name=f"for {principal.owner}"),
    )


# ------------------------------------------------------------------------- the eleven RPCs


def test_every_rpc_answers_what_json_rpc_answers_for_the_same_task(
    gate_app: Flask, served: t.Callable[..., Caller]
) -> None:
    call = served(gate_app)
    jsonrpc = A2ATestClient(gate_app, token="alice")

    sent = call.send("hello")
    assert sent.WhichOneof("payload") == "task"
    task_id = sent.task.id
    assert sent.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert sent.task.artifacts[0].parts[0].text == "hello"

    got = call("GetTask", a2a_pb2.GetTaskRequest(id=task_id))
    assert as_json(got) == jsonrpc.rpc("GetTask", {"id": task_id}).result
    short = call("GetTask", a2a_pb2.GetTaskRequest(id=task_id, history_length=0))
    assert as_json(short) == jsonrpc.rpc("GetTask", {"id": task_id, "historyLength": 0}).result

    listed = call("ListTasks", a2a_pb2.ListTasksRequest(page_size=10))
    assert listed.total_size == 1 and [t.id for t in listed.tasks] == [task_id]
    assert as_json(listed) == set_fields(jsonrpc.rpc("ListTasks", {"pageSize": 10}).result)

    config = call(
        "CreateTaskPushNotificationConfig",
        a2a_pb2.TaskPushNotificationConfig(
            task_id=task_id, id="cfg-1", url="https://example.com/hook", token="t0k"
        ),
    )
    assert (config.id, config.task_id, config.url, config.token) == (
        "cfg-1",
        task_id,
        "https://example.com/hook",
        "t0k",
    )
    ref = {"taskId": task_id, "id": "cfg-1"}
    fetched = call(
        "GetTaskPushNotificationConfig",
        a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task_id, id="cfg-1"),
    )
    assert as_json(fetched) == jsonrpc.rpc("GetTaskPushNotificationConfig", ref).result
    configs = call(
        "ListTaskPushNotificationConfigs",
        a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id),
    )
    assert [c.id for c in configs.configs] == ["cfg-1"]
    deleted = call(
        "DeleteTaskPushNotificationConfig",
        a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="cfg-1"),
    )
    assert deleted == empty_pb2.Empty()
    assert jsonrpc.rpc("ListTaskPushNotificationConfigs", {"taskId": task_id}).result == {
        "configs": []
    }

    card = call("GetExtendedAgentCard", a2a_pb2.GetExtendedAgentCardRequest())
    assert card.name == "for alice"
    assert [i.protocol_binding for i in card.supported_interfaces][:1] == ["JSONRPC"]

    paused = call.send("first", skill="ask").task
    assert paused.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    canceled = call("CancelTask", a2a_pb2.CancelTaskRequest(id=paused.id))
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    assert jsonrpc.rpc("GetTask", {"id": paused.id}).result["status"]["state"] == (
        "TASK_STATE_CANCELED"
    )


def test_send_streaming_message_streams_the_task_to_its_end(
    gate_app: Flask, served: t.Callable[..., Caller]
) -> None:
    call = served(gate_app)
    events = list(
        call.stub.SendStreamingMessage(send_request("streamed"), metadata=call.metadata())
    )
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds == ["task", "artifact_update", "status_update"]
    assert events[1].artifact_update.artifact.parts[0].text == "streamed"
    assert events[2].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert len({events[0].task.id, events[1].artifact_update.task_id}) == 1


def test_subscribe_follows_a_running_task_to_its_end(
    gate_app: Flask, gate: Gate, served: t.Callable[..., Caller]
) -> None:
    call = served(gate_app)
    task = call.send("hold", skill="gate", return_immediately=True).task
    assert gate.entered.wait(5)
    stream = call.stub.SubscribeToTask(
        a2a_pb2.SubscribeToTaskRequest(id=task.id), metadata=call.metadata(), timeout=10
    )
    first = next(stream)
    assert first.task.id == task.id
    assert first.task.status.state == a2a_pb2.TASK_STATE_WORKING
    gate.release.set()
    rest = list(stream)
    assert [e.WhichOneof("payload") for e in rest] == ["artifact_update", "status_update"]
    assert rest[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


def test_a_stream_ends_when_its_task_pauses(
    gate_app: Flask, served: t.Callable[..., Caller]
) -> None:
    call = served(gate_app)
    events = list(
        call.stub.SendStreamingMessage(
            send_request("first", skill="ask"), metadata=call.metadata(), timeout=10
        )
    )
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED


# ----------------------------------------------------------------------------- errors


def test_errors_are_google_rpc_status_with_the_v101_codes(
    gate_app: Flask, served: t.Callable[..., Caller]
) -> None:
    call = served(gate_app)
    done = call.send("x").task.id

    unknown = refusal(
        call("GetTask", a2a_pb2.GetTaskRequest(id="no-such-task")), NOT_FOUND, "TASK_NOT_FOUND"
    )
    assert unknown["details"][0]["metadata"] == {"taskId": "no-such-task"}
    assert unknown["message"] == "Task not found"
    refusal(
        call("CancelTask", a2a_pb2.CancelTaskRequest(id=done)),
        FAILED_PRECONDITION,
        "TASK_NOT_CANCELABLE",
    )
    refusal(
        call.send("again", task_id=done), FAILED_PRECONDITION, "UNSUPPORTED_OPERATION"
    )  # a follow-up to a terminal task
    terminal = call.stub.SubscribeToTask(
        a2a_pb2.SubscribeToTaskRequest(id=done), metadata=call.metadata(), timeout=10
    )
    with pytest.raises(grpc.RpcError) as subscribed:
        next(terminal)
    refusal(subscribed.value, FAILED_PRECONDITION, "UNSUPPORTED_OPERATION")

    bad = refusal(
        call("SendMessage", a2a_pb2.SendMessageRequest()), INVALID_ARGUMENT, "INVALID_PARAMS"
    )
    assert bad["details"][1]["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert bad["details"][1]["fieldViolations"][0]["field"] == "message"
    refusal(
        call("ListTasks", a2a_pb2.ListTasksRequest(page_token="not-ours")),
        INVALID_ARGUMENT,
        "INVALID_PARAMS",
    )


def test_every_error_names_a_grpc_status_code() -> None:
    """``errors.STATUSES`` names each error's gRPC code by name (the protocol layer imports no
    grpc): every name is one of ``grpc.StatusCode``'s, so no refusal fails to find its code."""
    assert {row[2] for row in STATUSES.values()} <= set(grpc.StatusCode.__members__)


def test_the_version_metadata_is_checked(served: t.Callable[..., Caller]) -> None:
    call = served()
    request = a2a_pb2.ListTasksRequest()
    for version in ("0.3", "2.0"):
        answer = call.stub.ListTasks
        try:
            answer(request, metadata=[("authorization", "Bearer alice"), ("a2a-version", version)])
        except grpc.RpcError as exc:
            status = refusal(exc, FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED")
            assert status["details"][0]["metadata"] == {"supportedVersions": "1.0"}
        else:
            raise AssertionError(f"a2a-version {version} was served")
    for version in ("1.0", "1", "1.0.1"):
        ok = call.stub.ListTasks(
            request, metadata=[("authorization", "Bearer alice"), ("a2a-version", version)]
        )
        assert ok.total_size == 0
    # Without the metadata a call is 1.0 (as a JSON-RPC call without the header is).
    assert call.stub.ListTasks(request, metadata=[("authorization", "Bearer alice")]).page_size == 0


def test_no_caller_is_unauthenticated(served: t.Callable[..., Caller]) -> None:
    call = served(token=None)
    refusal(call.send("x"), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
    refusal(
        call("ListTasks", a2a_pb2.ListTasksRequest(), token="no-such-token"),
        grpc.StatusCode.UNAUTHENTICATED,
        "UNAUTHENTICATED",
    )


def test_what_the_agent_does_not_offer_is_failed_precondition(
    make_app: t.Callable[..., Flask], served: t.Callable[..., Caller]
) -> None:
    call = served(make_app(config={"A2A_DISABLE_PUSH_NOTIFICATIONS": True}))
    task_id = call.send("x").task.id
    refusal(
        call(
            "CreateTaskPushNotificationConfig",
            a2a_pb2.TaskPushNotificationConfig(task_id=task_id, url="https://example.com/h"),
        ),
        FAILED_PRECONDITION,
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
    )
    refusal(
        call("GetExtendedAgentCard", a2a_pb2.GetExtendedAgentCardRequest()),
        FAILED_PRECONDITION,
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    )


def test_an_unknown_method_is_unimplemented(served: t.Callable[..., Caller]) -> None:
    call = served()
    method = call.channel.unary_unary(
        "/lf.a2a.v1.A2AService/Summarize",
        request_serializer=a2a_pb2.ListTasksRequest.SerializeToString,
        response_deserializer=a2a_pb2.ListTasksResponse.FromString,
    )
    with pytest.raises(grpc.RpcError) as refused:
        method(a2a_pb2.ListTasksRequest(), metadata=call.metadata(), timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED


# ------------------------------------------------------------------------ extensions


GEO = "https://example.com/ext/geo/v1"
TRACE = "https://example.com/ext/trace/v1"


def test_extensions_come_and_go_as_metadata(
    make_app: t.Callable[..., Flask], served: t.Callable[..., Caller]
) -> None:
    seen: list[frozenset[str]] = []

    def note(task: TaskContext) -> None:
        seen.append(task.extensions)

    app = make_app(
        skills=[Skill(id="echo", name="Echo", description="Echo.", handler=note)],
        card=AgentCard(extensions=[AgentExtension(GEO), AgentExtension(TRACE, required=True)]),
    )
    call = served(app)
    refusal(call.send("x"), FAILED_PRECONDITION, "EXTENSION_SUPPORT_REQUIRED")
    assert seen == []
    response, outcome = call.stub.SendMessage.with_call(
        send_request("x"),
        metadata=call.metadata(extra=[("a2a-extensions", f"{TRACE}, {GEO}, https://other")]),
        timeout=10,
    )
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert ("a2a-extensions", f"{GEO},{TRACE}") in outcome.initial_metadata()
    assert seen == [frozenset({GEO, TRACE})]
    # A refusal of a method the call reached says what it activated too.
    with pytest.raises(grpc.RpcError) as missing:
        call.stub.GetTask(
            a2a_pb2.GetTaskRequest(id="nope"),
            metadata=call.metadata(extra=[("a2a-extensions", TRACE)]),
            timeout=10,
        )
    refusal(missing.value, NOT_FOUND, "TASK_NOT_FOUND")
    assert ("a2a-extensions", TRACE) in missing.value.initial_metadata()
    stream = call.stub.SendStreamingMessage(
        send_request("y"), metadata=call.metadata(extra=[("a2a-extensions", TRACE)]), timeout=10
    )
    assert ("a2a-extensions", TRACE) in stream.initial_metadata()
    assert list(stream)[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


# ----------------------------------------------------------------------------- bounds


def test_a_message_over_the_size_cap_is_refused_and_nothing_is_stored(
    make_app: t.Callable[..., Flask], served: t.Callable[..., Caller]
) -> None:
    app = make_app(config={"A2A_MAX_BODY_BYTES": 4096})
    call = served(app)
    answer = call.send("x" * 5000)
    assert isinstance(answer, grpc.RpcError)
    assert answer.code() == RESOURCE_EXHAUSTED
    assert call("ListTasks", a2a_pb2.ListTasksRequest()).total_size == 0
    assert call.send("x" * 3000).task.status.state == a2a_pb2.TASK_STATE_COMPLETED


def test_the_run_cap_refuses_before_anything_is_written(
    make_app: t.Callable[..., Flask], gate: Gate, served: t.Callable[..., Caller]
) -> None:
    app = make_app(
        skills=[Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler)],
        config={"A2A_MAX_CONCURRENT_RUNS_PER_OWNER": 1},
    )
    call = served(app)
    call.send("one", skill="gate", return_immediately=True)
    assert gate.entered.wait(5)
    refusal(
        call.send("two", skill="gate", return_immediately=True),
        FAILED_PRECONDITION,
        "UNSUPPORTED_OPERATION",
    )
    assert call("ListTasks", a2a_pb2.ListTasksRequest()).total_size == 1
    assert call.send("three", skill="gate", token="bob", return_immediately=True).task.id
    gate.release.set()


def test_stream_seats_are_counted_and_a_cancelled_call_frees_its_seat_at_once(
    make_app: t.Callable[..., Flask], gate: Gate, served: t.Callable[..., Caller]
) -> None:
    app = make_app(
        skills=[Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler)],
        # A keep-alive far away: only the cancellation can free the seat within the test.
        config={"A2A_MAX_STREAM_SEATS_PER_OWNER": 1, "A2A_KEEPALIVE_INTERVAL": 60.0},
    )
    exchange = app.extensions["a2a"].exchange
    call = served(app)
    task = call.send("hold", skill="gate", return_immediately=True).task
    assert gate.entered.wait(5)
    request = a2a_pb2.SubscribeToTaskRequest(id=task.id)
    first = call.stub.SubscribeToTask(request, metadata=call.metadata())
    assert next(first).task.id == task.id
    assert exchange.seats.count("alice") == 1

    second = call.stub.SubscribeToTask(request, metadata=call.metadata(), timeout=10)
    with pytest.raises(grpc.RpcError) as refused:
        next(second)
    refusal(refused.value, RESOURCE_EXHAUSTED, "STREAM_SEATS_EXHAUSTED")

    first.cancel()  # the client leaves
    assert wait_for(lambda: exchange.seats.count("alice") == 0, timeout=3.0)
    third = call.stub.SubscribeToTask(request, metadata=call.metadata(), timeout=10)
    assert next(third).task.id == task.id
    gate.release.set()
    assert list(third)[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert wait_for(lambda: exchange.seats.count("alice") == 0, timeout=3.0)


def test_the_server_refuses_past_its_threads(make_app: t.Callable[..., Flask], gate: Gate) -> None:
    """``A2A_GRPC_THREADS`` bounds the RPCs at once: the next is refused, not queued."""
    app = make_app(
        skills=[Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler)],
        config={"A2A_GRPC_THREADS": 1},
    )
    with grpc_server(app) as server:
        call = Caller(server.address)
        held = call.stub.SendMessage.future(
            send_request("hold", skill="gate"), metadata=call.metadata(), timeout=10
        )
        assert gate.entered.wait(5)
        answer = call.send("next", skill="gate")
        assert isinstance(answer, grpc.RpcError)
        assert answer.code() == RESOURCE_EXHAUSTED
        gate.release.set()
        assert held.result().task.status.state == a2a_pb2.TASK_STATE_COMPLETED
        call.close()


def test_a_blocking_send_waits_for_its_run(
    make_app: t.Callable[..., Flask], gate: Gate, served: t.Callable[..., Caller]
) -> None:
    app = make_app(
        skills=[Skill(id="gate", name="Gate", description="Gate.", handler=gate.handler)]
    )
    call = served(app)
    answer: list[t.Any] = []
    sender = threading.Thread(target=lambda: answer.append(call.send("wait", skill="gate")))
    sender.start()
    assert gate.entered.wait(5)
    assert answer == []
    gate.release.set()
    sender.join(10)
    assert answer[0].task.status.state == a2a_pb2.TASK_STATE_COMPLETED


def test_a_reply_is_a_message_not_a_task(
    make_app: t.Callable[..., Flask], served: t.Callable[..., Caller]
) -> None:
    def answer(task: TaskContext) -> None:
        task.reply("just a message")

    app = make_app(skills=[Skill(id="echo", name="Answer", description="Answer.", handler=answer)])
    call = served(app)
    sent = call.send("hi")
    assert sent.WhichOneof("payload") == "message"
    assert sent.message.role == a2a_pb2.ROLE_AGENT
    assert sent.message.parts[0].text == "just a message"
    events = list(
        call.stub.SendStreamingMessage(send_request("hi"), metadata=call.metadata(), timeout=10)
    )
    assert [e.WhichOneof("payload") for e in events] == ["message"]
    assert call("ListTasks", a2a_pb2.ListTasksRequest()).total_size == 0  # no task remains


def test_an_entity_skill_re_enters_the_app_as_the_caller_with_whole_numbers() -> None:
    """examples/invoices.py over gRPC: the tool call re-enters the app with the caller's own
    credentials (each sees their invoices), and ``{"limit": 1}`` reaches the tool as the
    integer JSON-RPC hands it, though a protobuf Value carries every number as a double."""
    from examples.invoices import create_app

    app = create_app()
    try:
        with grpc_server(app) as server:
            call = Caller(server.address, token="alice-token")
            request = send_request("", skill="entity.invoices")
            arguments = {"operation": "list", "arguments": {"limit": 1, "page": 2}}
            json_format.ParseDict(arguments, request.message.parts.add().data)
            task = call("SendMessage", request).task
            assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED, task.status
            page = json_format.MessageToDict(task.artifacts[0].parts[0].data)
            assert (page["page"], page["perPage"], page["total"]) == (2, 1, 2)
            bob = call("SendMessage", request, token="bob-token").task
            assert json_format.MessageToDict(bob.artifacts[0].parts[0].data)["total"] == 1
            call.close()
    finally:
        app.extensions["a2a"].exchange.shutdown(2)
