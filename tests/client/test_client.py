"""A2AClient against the example agent over a real socket: every method, errors, streams."""

from __future__ import annotations

import typing as t

import pytest
import requests
from flask import Flask, request

from examples.agent import create_app
from flask_a2a import (
    A2AClient,
    A2AClientError,
    ExtendedAgentCardNotConfiguredError,
    ForbiddenOriginError,
    InvalidParamsError,
    PayloadTooLargeError,
    StreamSeatsExhaustedError,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
    UnauthenticatedError,
    UnsupportedOperationError,
)
from flask_a2a.client.messages import build_message
from flask_a2a.client.sse import sse_data
from flask_a2a.config import DEFAULTS
from flask_a2a.exchange.methods import Exchange
from flask_a2a.protocol.model import Message, TaskArtifactUpdateEvent, TaskStatusUpdateEvent
from tests.conftest import wait_for
from tests.live_server import werkzeug_server as serve

DEADLINE = 10.0


class Live(t.NamedTuple):
    app: Flask
    base: str
    exchange: Exchange

    def client(self, token: str | None = "alice-token", **options: t.Any) -> A2AClient:
        return A2AClient.from_card_url(self.base, token=token, **options)


def live_agent(**config: t.Any) -> t.Iterator[Live]:
    app = create_app({"TESTING": True, "A2A_KEEPALIVE_INTERVAL": 0.2, **config})
    exchange = app.extensions["a2a"].exchange
    try:
        with serve(app) as base:
            yield Live(app, base, exchange)
    finally:
        exchange.shutdown(5)


@pytest.fixture
def live() -> t.Iterator[Live]:
    yield from live_agent()


@pytest.fixture
def alice(live: Live) -> t.Iterator[A2AClient]:
    with live.client() as client:
        yield client


def stored(exchange: Exchange, *owners: str) -> int:
    """How many tasks the store holds for the example's owners."""
    return sum(len(exchange.store.export_owner(o)["tasks"]) for o in owners or ("alice", "bob"))


SLOW = {"steps": 20, "delay": 0.2}


# ------------------------------------------------------------------ building a client


def test_from_card_url_uses_the_cards_jsonrpc_interface(live: Live, alice: A2AClient) -> None:
    assert alice.endpoint == live.base + "/a2a"
    assert alice.card is not None
    assert alice.card["supportedInterfaces"][0]["url"] == alice.endpoint
    assert A2AClient.from_card_url(live.base + "/.well-known/agent-card.json").endpoint == (
        alice.endpoint
    )


def test_connect_takes_a_base_or_an_endpoint(live: Live) -> None:
    assert A2AClient.connect(live.base).endpoint == live.base + "/a2a"
    direct = A2AClient.connect(live.base + "/a2a", token="alice-token")
    # The card at the origin says which binding that URL speaks (issue 24 part 4).
    assert direct.card is not None and direct.binding == "JSONRPC"
    assert direct.call("echo", "hi").status.state is TaskState.COMPLETED
    told = A2AClient.connect(live.base + "/a2a", token="alice-token", binding="JSONRPC")
    assert told.card is None  # a binding given: no card is read
    assert told.call("echo", "hi").status.state is TaskState.COMPLETED


def test_a_url_without_a_card_is_a_client_error(live: Live) -> None:
    with pytest.raises(A2AClientError) as caught:
        A2AClient.from_card_url(live.base + "/nowhere")
    assert caught.value.status == 404


def test_token_and_auth_are_exclusive() -> None:
    with pytest.raises(ValueError):
        A2AClient("http://127.0.0.1:9/a2a", token="t", auth=("u", "p"))


def test_headers_sent_on_every_call(live: Live) -> None:
    seen: list[dict[str, str]] = []

    @live.app.before_request
    def record() -> None:
        if request.path == "/a2a":
            seen.append(dict(request.headers))

    with live.client() as client:
        client.call("echo", "hi")
        client.list_tasks()
    assert len(seen) == 2
    for headers in seen:
        assert headers["A2A-Version"] == "1.0"
        assert headers["Content-Type"] == "application/json"
        assert headers["Authorization"] == "Bearer alice-token"


def test_any_requests_auth_works(live: Live) -> None:
    class Bearer(requests.auth.AuthBase):
        def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
            r.headers["Authorization"] = "Bearer bob-token"
            return r

    with live.client(token=None, auth=Bearer()) as bob:
        task = bob.call("echo", "from bob")
    assert stored(live.exchange, "bob") == 1
    assert live.exchange.store.get_task(task.id, "bob") is not None


@pytest.fixture
def live_push() -> t.Iterator[Live]:
    yield from live_agent(A2A_ALLOW_PRIVATE_PUSH=True)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_two_clients_sharing_a_session_each_send_their_own_token(
    live_push: Live, binding: str
) -> None:
    """The client wrote its token onto the session it was handed: two clients sharing one
    session sent whichever token was set last (Alice's calls made as Bob). Each call kind,
    streams too, interleaved, is seen by the server with its own client's token."""
    live = live_push
    seen: list[str | None] = []

    @live.app.before_request
    def record() -> None:
        seen.append(request.headers.get("Authorization"))

    session = requests.Session()
    session.headers["X-Host-Header"] = "kept"
    alice = A2AClient.from_card_url(
        live.base, token="alice-token", session=session, binding=binding
    )
    bob = A2AClient.from_card_url(live.base, token="bob-token", session=session, binding=binding)
    clients = {"alice-token": alice, "bob-token": bob}
    tasks: dict[str, Task] = {}

    def each(call: t.Callable[[A2AClient, str], t.Any]) -> None:
        """``call`` made by Alice, then Bob, then Alice again: each seen as its own."""
        for token in ("alice-token", "bob-token", "alice-token"):
            seen.clear()
            call(clients[token], token)
            assert seen and set(seen) == {f"Bearer {token}"}, (token, seen)

    def send(client: A2AClient, token: str) -> None:
        tasks[token] = client.call("echo", token)

    def stream(client: A2AClient, token: str) -> None:
        with client.stream_call("countdown", data={"steps": 2, "delay": 0.01}) as events:
            assert isinstance(list(events)[-1], TaskStatusUpdateEvent)

    def subscribe(client: A2AClient, token: str) -> None:
        started = client.call(
            "countdown", data={"steps": 2, "delay": 0.05}, return_immediately=True
        )
        with client.subscribe_to_task(started.id) as events:
            list(events)
        assert events.state is TaskState.COMPLETED

    def cancel(client: A2AClient, token: str) -> None:
        started = client.call("countdown", data=SLOW, return_immediately=True)
        assert client.cancel_task(started.id).status.state is TaskState.CANCELED

    def read(client: A2AClient, token: str) -> None:
        own, other = tasks[token], tasks[next(k for k in tasks if k != token)]
        assert client.get_task(own.id).id == own.id
        with pytest.raises(TaskNotFoundError):  # the other's task: not this caller's
            client.get_task(other.id)
        assert other.id not in {task.id for task in client.list_tasks().tasks}

    def pushes(client: A2AClient, token: str) -> None:
        task_id = tasks[token].id
        made = client.create_task_push_notification_config(task_id, live.base + "/hook")
        assert client.get_task_push_notification_config(task_id, made.id) == made
        assert made in client.list_task_push_notification_configs(task_id).configs
        client.delete_task_push_notification_config(task_id, made.id)

    def cards(client: A2AClient, token: str) -> None:
        client.get_agent_card()
        client.get_extended_agent_card()

    for call in (send, stream, subscribe, cancel, read, pushes, cards):
        each(call)
    # Nothing of either client was written onto the session; the host's own header stays.
    assert session.headers.get("X-Host-Header") == "kept"
    assert dict(session.headers).get("Authorization") is None and session.auth is None
    assert "A2A-Version" not in session.headers
    alice.close()
    bob.close()
    session.close()


# ------------------------------------------------------------------ the unary methods


def test_call_sends_text_and_data_and_returns_a_typed_task(alice: A2AClient) -> None:
    task = alice.call("echo", "hello", data={"n": 1})
    assert isinstance(task, Task)
    assert task.status.state is TaskState.COMPLETED
    parts = task.artifacts[0].parts
    assert parts[0].text == "hello"
    assert parts[1].data == {"n": 1}
    assert task.history[0].metadata == {"skill": "echo"}


def test_call_builds_the_entity_skill_data_part(live: Live, alice: A2AClient) -> None:
    task = alice.call("echo", operation="list", arguments={"limit": 10})
    part = task.artifacts[0].parts[0]
    assert part.data == {"skill": "echo", "operation": "list", "arguments": {"limit": 10}}
    with pytest.raises(ValueError):
        alice.call("echo", data={}, operation="list")


def test_send_message_takes_a_message_object(alice: A2AClient) -> None:
    result = alice.send_message(build_message("plain", skill="echo"), history_length=0)
    assert isinstance(result, Task)
    assert result.history == ()
    assert result.artifacts[0].parts[0].text == "plain"


def test_pause_and_resume_through_call(alice: A2AClient) -> None:
    asked = alice.call("greet", "hi")
    assert asked.status.state is TaskState.INPUT_REQUIRED
    done = alice.call("greet", "Ada", task_id=asked.id, context_id=asked.context_id)
    assert done.id == asked.id
    assert done.status.state is TaskState.COMPLETED
    assert done.artifacts[0].parts[0].text == "Hello, Ada!"


def test_get_task_and_history_length(alice: A2AClient) -> None:
    task = alice.call("echo", "x")
    again = alice.get_task(task.id)
    assert again == task
    assert alice.get_task(task.id, history_length=0).history == ()


def test_list_tasks_pages_and_iterates(alice: A2AClient) -> None:
    made = [alice.call("echo", str(n)).id for n in range(3)]
    page = alice.list_tasks(page_size=2)
    assert page.total_size == 3
    assert page.page_size == 2
    assert page.next_page_token
    rest = alice.list_tasks(page_size=2, page_token=page.next_page_token)
    assert rest.next_page_token == ""
    assert {x.id for x in page.tasks + rest.tasks} == set(made)
    assert [x.id for x in alice.iter_tasks(page_size=1)] == [x.id for x in page.tasks + rest.tasks]
    completed = alice.list_tasks(status=TaskState.COMPLETED, include_artifacts=True)
    assert completed.total_size == 3
    assert completed.tasks[0].artifacts


def test_cancel_task(alice: A2AClient) -> None:
    started = alice.call("countdown", data=SLOW, return_immediately=True)
    assert not started.status.state.terminal
    canceled = alice.cancel_task(started.id)
    assert canceled.status.state is TaskState.CANCELED
    with pytest.raises(TaskNotCancelableError):
        alice.cancel_task(started.id)
    assert alice.get_task(started.id).status.state is TaskState.CANCELED


def test_push_config_to_a_private_address_is_refused(live: Live, alice: A2AClient) -> None:
    task = alice.call("echo", "x")
    with pytest.raises(InvalidParamsError):
        alice.create_task_push_notification_config(task.id, live.base + "/hook")
    assert alice.list_task_push_notification_configs(task.id).configs == ()


def test_push_config_methods() -> None:
    for live in live_agent(A2A_ALLOW_PRIVATE_PUSH=True):
        with live.client() as alice:
            task = alice.call("echo", "x")
            hook = live.base + "/hook"
            made = alice.create_task_push_notification_config(
                task.id, hook, token="secret", config_id="c1"
            )
            assert (made.id, made.task_id, made.url, made.token) == ("c1", task.id, hook, "secret")
            assert alice.get_task_push_notification_config(task.id, "c1") == made
            page = alice.list_task_push_notification_configs(task.id)
            assert page.configs == (made,)
            assert page.next_page_token == ""
            with live.client("bob-token") as bob, pytest.raises(TaskNotFoundError):
                bob.list_task_push_notification_configs(task.id)
            alice.delete_task_push_notification_config(task.id, "c1")
            assert alice.list_task_push_notification_configs(task.id).configs == ()
            with pytest.raises(TaskNotFoundError):
                alice.get_task_push_notification_config(task.id, "c1")


def test_extended_card(live: Live, alice: A2AClient) -> None:
    card = alice.get_extended_agent_card()
    assert isinstance(card, dict) and card["name"]
    live.exchange.extended_card = None
    with pytest.raises(ExtendedAgentCardNotConfiguredError):
        alice.get_extended_agent_card()


# ------------------------------------------------------------------ errors


def test_unknown_task_is_task_not_found_with_its_metadata(alice: A2AClient) -> None:
    with pytest.raises(TaskNotFoundError) as caught:
        alice.get_task("no-such-task")
    assert caught.value.code == -32001
    assert caught.value.metadata == {"taskId": "no-such-task"}


def test_another_owners_task_is_not_found(live: Live, alice: A2AClient) -> None:
    task = alice.call("countdown", data=SLOW, return_immediately=True)
    with live.client("bob-token") as bob, live.client("alice-readonly") as narrow:
        for caller in (bob, narrow):
            with pytest.raises(TaskNotFoundError):
                caller.get_task(task.id)
            with pytest.raises(TaskNotFoundError):
                caller.cancel_task(task.id)
            with pytest.raises(TaskNotFoundError):
                caller.subscribe_to_task(task.id)
            assert caller.list_tasks().total_size == 0
    assert not alice.get_task(task.id).status.state.terminal


def test_no_token_is_unauthenticated_and_writes_nothing(live: Live) -> None:
    with live.client(token=None) as anonymous:
        with pytest.raises(UnauthenticatedError) as caught:
            anonymous.call("echo", "hi")
        assert caught.value.code == -31401
        with pytest.raises(UnauthenticatedError):
            anonymous.stream_call("echo", "hi")
    assert stored(live.exchange) == 0


def test_foreign_origin_is_refused_and_writes_nothing(live: Live) -> None:
    with live.client(headers={"Origin": "http://127.0.0.2:8"}) as client:
        with pytest.raises(ForbiddenOriginError):
            client.call("echo", "hi")
    assert stored(live.exchange) == 0


def test_oversized_body_is_refused_and_writes_nothing() -> None:
    for live in live_agent(A2A_MAX_BODY_BYTES=2048):
        with live.client() as alice:
            with pytest.raises(PayloadTooLargeError):
                alice.call("echo", "x" * 4096)
            assert alice.call("echo", "small").status.state is TaskState.COMPLETED
        assert stored(live.exchange) == 1


def test_seat_cap_is_refused_and_writes_nothing() -> None:
    for live in live_agent(A2A_MAX_STREAM_SEATS_PER_OWNER=1):
        with live.client() as alice:
            with alice.stream_call("countdown", data=SLOW) as first:
                assert isinstance(next(first), Task)
                with pytest.raises(StreamSeatsExhaustedError):
                    alice.stream_call("countdown", data=SLOW)
                assert stored(live.exchange) == 1


def test_invalid_params_carry_field_violations(alice: A2AClient) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        alice.list_tasks(page_size=1000)
    assert [f for f, _ in caught.value.field_violations] == ["pageSize"]


# ------------------------------------------------------------------ streams


def test_stream_yields_typed_events_in_order(alice: A2AClient) -> None:
    with alice.stream_call("countdown", data={"steps": 3, "delay": 0.01}) as events:
        got = list(events)
        assert events.state is TaskState.COMPLETED
    assert isinstance(got[0], Task)
    assert events.task_id == got[0].id
    kinds = [type(e) for e in got[1:]]
    assert kinds == [TaskStatusUpdateEvent] + [TaskArtifactUpdateEvent] * 3 + [
        TaskStatusUpdateEvent
    ]
    chunks = [e for e in got if isinstance(e, TaskArtifactUpdateEvent)]
    assert [c.artifact.parts[0].text for c in chunks] == ["3...", "2...", "1..."]
    assert [c.append for c in chunks] == [False, True, True]
    assert chunks[-1].last_chunk
    last = got[-1]
    assert isinstance(last, TaskStatusUpdateEvent)
    assert last.status.state is TaskState.COMPLETED


def test_early_close_frees_the_servers_stream_seat(live: Live, alice: A2AClient) -> None:
    seats = live.exchange.seats
    with alice.stream_call("countdown", data=SLOW) as events:
        first = next(events)
        assert seats.count("alice") == 1
    assert wait_for(lambda: seats.count("alice") == 0)
    # Leaving a for loop and dropping the iterator closes the connection too.
    for event in alice.stream_call("countdown", data=SLOW):
        assert isinstance(event, Task)
        assert seats.count("alice") == 1
        break
    assert wait_for(lambda: seats.count("alice") == 0)
    assert isinstance(first, Task)


def test_subscribe_to_task(alice: A2AClient) -> None:
    started = alice.call("countdown", data={"steps": 2, "delay": 0.1}, return_immediately=True)
    with alice.subscribe_to_task(started.id) as events:
        got = list(events)
    assert isinstance(got[0], Task) and got[0].id == started.id
    assert events.state is TaskState.COMPLETED
    with pytest.raises(UnsupportedOperationError):
        alice.subscribe_to_task(started.id)


def test_stream_of_a_paused_task_ends_at_the_pause(alice: A2AClient) -> None:
    with alice.stream_call("greet", "hi") as events:
        got = list(events)
    assert events.state is TaskState.INPUT_REQUIRED
    assert all(not isinstance(e, Message) for e in got)


# ------------------------------------------------------------------ timeouts


def test_default_timeouts_bound_every_call() -> None:
    client = A2AClient("http://127.0.0.1:9/a2a")
    for timeout in (client.timeout, client.send_timeout, client.stream_timeout):
        assert isinstance(timeout, tuple) and all(x > 0 for x in timeout)
    assert isinstance(client.stream_timeout, tuple)
    assert client.stream_timeout[1] > DEFAULTS["A2A_KEEPALIVE_INTERVAL"]


def test_read_timeouts_are_applied() -> None:
    for live in live_agent(A2A_KEEPALIVE_INTERVAL=5.0):
        slow = {"steps": 2, "delay": 1.0}
        with live.client(send_timeout=(2.0, 0.3), stream_timeout=(2.0, 0.3)) as alice:
            with pytest.raises(requests.Timeout):
                alice.call("countdown", data=slow)
            events = alice.stream_call("countdown", data=slow)
            assert isinstance(next(events), Task)
            with pytest.raises(requests.Timeout):
                list(events)
            assert events.response.raw.closed  # the failed stream let go of its connection


# ------------------------------------------------------------------ the SSE reader


def test_sse_reader_handles_split_frames_comments_and_crlf() -> None:
    body = b': keep-alive\r\n\r\ndata: {"a":\r\ndata: 1}\r\n\r\nevent: x\ndata: [2]\n\n'
    chunks = [body[i : i + 3] for i in range(0, len(body), 3)]
    assert list(sse_data(chunks)) == ['{"a":\n1}', "[2]"]


def test_subscribe_to_a_paused_task_follows_the_resume(alice: A2AClient) -> None:
    """#14 item 5: the stream waits through the pause; a streamed refusal raises at the call."""
    paused = alice.call("greet", "hi")
    assert paused.status.state is TaskState.INPUT_REQUIRED
    with alice.subscribe_to_task(paused.id) as events:
        assert isinstance(next(events), Task)
        done = alice.call("greet", "Ada", task_id=paused.id)
        assert done.status.state is TaskState.COMPLETED
        rest = list(events)
    assert isinstance(rest[-1], TaskStatusUpdateEvent)
    assert events.state is TaskState.COMPLETED
    assert any(isinstance(e, TaskArtifactUpdateEvent) for e in rest)
    with pytest.raises(TaskNotFoundError) as caught:
        alice.subscribe_to_task("no-such-task")  # one -32001 event: raised here, not later
    assert caught.value.metadata == {"taskId": "no-such-task"}
