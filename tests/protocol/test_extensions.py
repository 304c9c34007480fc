"""A2A extensions: declared on the card, activated by ``A2A-Extensions``, required ones enforced.

A request activates the declared extensions its header names (others are ignored); the
activated ones are echoed in the response header and seen by the handler. A required
extension the request did not activate answers -32008 before anything is written.
"""

from __future__ import annotations

import http.client
import json
import typing as t

import pytest
from flask import Flask

from flask_a2a import (
    A2A,
    AgentCard,
    AgentExtension,
    ConfigError,
    Part,
    Principal,
    Skill,
    TaskContext,
)
from flask_a2a.testing import A2ATestClient, parse_sse
from tests.live_server import werkzeug_server

pytestmark = pytest.mark.usefixtures("binding")

GEO = "https://example.com/ext/geo/v1"
CITE = "https://example.com/ext/citations/v1"
SIGNED = "https://example.com/ext/signed-messages/v1"


class Seen:
    """A skill that records the extensions each run saw (and pauses once, for a resume)."""

    def __init__(self) -> None:
        self.runs: list[frozenset[str]] = []

    def handler(self, task: TaskContext) -> None:
        self.runs.append(task.extensions)
        if task.message.text == "ask" and len(task.history) == 1:
            task.require_input("more?")
            return
        task.artifact([Part(text=",".join(sorted(task.extensions)))], name="extensions")


@pytest.fixture
def seen() -> Seen:
    return Seen()


def app_with(
    make_app: t.Callable[..., Flask], seen: Seen, *extensions: t.Any, **options: t.Any
) -> tuple[Flask, A2ATestClient]:
    skills = [Skill(id="seen", name="Seen", description="Seen.", handler=seen.handler)]
    app = make_app(skills=skills, card=AgentCard(extensions=list(extensions)), **options)
    return app, A2ATestClient(app, token="alice")


def send(client: A2ATestClient, text: str = "hi", header: str | None = None, **kw: t.Any) -> t.Any:
    headers = {"A2A-Extensions": header} if header is not None else None
    return client.rpc("SendMessage", {"message": client.message(text, **kw)}, headers=headers)


# ----------------------------------------------------------------------------- the card


def test_card_lists_the_declared_extensions(make_app: t.Callable[..., Flask], seen: Seen) -> None:
    app, _ = app_with(
        make_app,
        seen,
        AgentExtension(GEO, description="Where the caller is.", params={"precision": "city"}),
        {"uri": CITE, "description": "Sources.", "required": True},
    )
    card = app.test_client().get("/.well-known/agent-card.json").get_json()
    assert card["capabilities"]["extensions"] == [
        {"uri": GEO, "description": "Where the caller is.", "params": {"precision": "city"}},
        {"uri": CITE, "description": "Sources.", "required": True},
    ]


def test_no_extensions_no_capability_entry(make_app: t.Callable[..., Flask], seen: Seen) -> None:
    app, client = app_with(make_app, seen)
    card = app.test_client().get("/.well-known/agent-card.json").get_json()
    assert "extensions" not in card["capabilities"]
    answer = send(client, header=GEO)
    assert answer.result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "A2A-Extensions" not in answer.headers
    assert seen.runs == [frozenset()]


@pytest.mark.parametrize(
    "declared, problem",
    [
        ({"uri": ""}, "non-empty"),
        ({"description": "no uri"}, "non-empty"),
        ({"uri": GEO, "requird": True}, "unknown keys"),
        ("https://example.com/ext/x/v1", "must be an AgentExtension"),
        ({"uri": "a,b"}, "non-empty URI"),
    ],
)
def test_bad_declarations_fail_at_startup(declared: t.Any, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        AgentCard(extensions=[declared])


def test_two_extensions_with_one_uri_fail_at_startup() -> None:
    with pytest.raises(ConfigError, match="share a uri"):
        AgentCard(extensions=[AgentExtension(GEO), {"uri": GEO}])


# ----------------------------------------------------------------------------- activation


def test_activated_extensions_are_echoed_and_seen(
    make_app: t.Callable[..., Flask], seen: Seen
) -> None:
    _, client = app_with(make_app, seen, AgentExtension(GEO), AgentExtension(CITE))
    answer = send(client, header=f"  {CITE} , urn:example:unknown,,{GEO}  ")
    # Only what the card declares, in the card's order; the unknown URI is ignored.
    assert answer.headers["A2A-Extensions"] == f"{GEO},{CITE}"
    assert seen.runs == [frozenset({GEO, CITE})]
    task = answer.result["task"]
    assert task["artifacts"][0]["parts"] == [{"text": f"{CITE},{GEO}"}]


def test_unknown_uri_is_not_echoed(make_app: t.Callable[..., Flask], seen: Seen) -> None:
    _, client = app_with(make_app, seen, AgentExtension(GEO))
    answer = send(client, header="urn:example:unknown")
    assert answer.result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "A2A-Extensions" not in answer.headers
    assert seen.runs == [frozenset()]


def test_no_header_activates_nothing(make_app: t.Callable[..., Flask], seen: Seen) -> None:
    _, client = app_with(make_app, seen, AgentExtension(GEO))
    answer = send(client)
    assert "A2A-Extensions" not in answer.headers
    assert seen.runs == [frozenset()]


def test_several_header_lines_are_merged(make_app: t.Callable[..., Flask], seen: Seen) -> None:
    _, client = app_with(make_app, seen, AgentExtension(GEO), AgentExtension(CITE))
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": client.message("hi")},
        }
    )
    response = client.client.post(
        client.path,
        data=body,
        headers=[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer alice"),
            ("A2A-Extensions", GEO),
            ("A2A-Extensions", f" {CITE} "),
        ],
    )
    assert response.get_json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert response.headers["A2A-Extensions"] == f"{GEO},{CITE}"
    assert seen.runs == [frozenset({GEO, CITE})]


def test_the_message_extensions_field_activates_nothing(
    make_app: t.Callable[..., Flask], seen: Seen
) -> None:
    _, client = app_with(make_app, seen, AgentExtension(GEO))
    message = {**client.message("hi"), "extensions": [GEO]}
    answer = client.rpc("SendMessage", {"message": message})
    assert "A2A-Extensions" not in answer.headers
    assert seen.runs == [frozenset()]


def test_a_resume_sees_the_resuming_request_s_extensions(
    make_app: t.Callable[..., Flask], seen: Seen
) -> None:
    _, client = app_with(make_app, seen, AgentExtension(GEO))
    paused = send(client, "ask").result["task"]
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    resumed = send(client, "more", header=GEO, task_id=paused["id"])
    assert resumed.result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert resumed.headers["A2A-Extensions"] == GEO
    assert seen.runs == [frozenset(), frozenset({GEO})]


def test_other_methods_echo_too(make_app: t.Callable[..., Flask], seen: Seen) -> None:
    _, client = app_with(make_app, seen, AgentExtension(GEO))
    task_id = send(client).result["task"]["id"]
    got = client.rpc("GetTask", {"id": task_id}, headers={"A2A-Extensions": GEO})
    assert got.result["id"] == task_id and got.headers["A2A-Extensions"] == GEO
    # An error answer of a method the request reached carries it as well.
    missing = client.rpc("GetTask", {"id": "nope"}, headers={"A2A-Extensions": GEO})
    assert missing.code == -32001 and missing.headers["A2A-Extensions"] == GEO


def test_streaming_answer_echoes(make_app: t.Callable[..., Flask], seen: Seen) -> None:
    _, client = app_with(make_app, seen, AgentExtension(GEO))
    response, events = client.stream(
        "SendStreamingMessage",
        {"message": client.message("hi")},
        headers={"A2A-Extensions": f"{GEO}, urn:example:unknown"},
    )
    assert response.status_code == 200
    assert response.mimetype == "text/event-stream"
    assert response.headers["A2A-Extensions"] == GEO
    states = [
        e["result"]["statusUpdate"]["status"]["state"]
        for e in events
        if "statusUpdate" in e["result"]
    ]
    assert states[-1] == "TASK_STATE_COMPLETED"
    assert seen.runs == [frozenset({GEO})]


def test_browser_may_read_the_echo(make_app: t.Callable[..., Flask], seen: Seen) -> None:
    _, client = app_with(make_app, seen, AgentExtension(GEO))
    answer = client.rpc(
        "SendMessage",
        {"message": client.message("hi")},
        headers={"A2A-Extensions": GEO, "Origin": "http://localhost"},
    )
    assert answer.result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answer.headers["Access-Control-Expose-Headers"] == "A2A-Extensions"


# ----------------------------------------------------------------------------- required


def required_app(
    make_app: t.Callable[..., Flask], seen: Seen, **options: t.Any
) -> tuple[Flask, A2ATestClient]:
    return app_with(
        make_app, seen, AgentExtension(GEO), AgentExtension(SIGNED, required=True), **options
    )


def assert_extension_required(answer: t.Any) -> None:
    assert answer.status == (400 if A2ATestClient.default_binding == "rest" else 200)
    assert answer.code == -32008
    assert answer.error["message"] == f"Extension support is required: {SIGNED}"
    info = answer.error["data"][0]
    assert info["reason"] == "EXTENSION_SUPPORT_REQUIRED"
    assert info["metadata"] == {"extensions": SIGNED}
    assert "A2A-Extensions" not in answer.headers


def test_required_not_activated_refuses_and_stores_nothing(
    make_app: t.Callable[..., Flask], seen: Seen
) -> None:
    _, client = required_app(make_app, seen)
    assert_extension_required(send(client))
    assert_extension_required(send(client, header=GEO))  # another one is not enough
    assert seen.runs == []
    listed = client.rpc("ListTasks", {}, headers={"A2A-Extensions": SIGNED})
    assert listed.result["tasks"] == [] and listed.result["totalSize"] == 0
    assert listed.headers["A2A-Extensions"] == SIGNED


def test_required_refuses_every_method(make_app: t.Callable[..., Flask], seen: Seen) -> None:
    _, client = required_app(make_app, seen, extended_card=lambda caller: {"name": "x"})
    task_id = send(client, header=SIGNED).result["task"]["id"]
    for method, params in [
        ("GetTask", {"id": task_id}),
        ("ListTasks", {}),
        ("CancelTask", {"id": task_id}),
        ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "x"}),
    ]:
        assert_extension_required(client.rpc(method, params))
    # Before the params are read: a malformed call is refused for the extension first.
    assert_extension_required(client.rpc("GetTask", {"id": 5}))
    # The streaming methods answer it as a stream of one error event (issue 14 item 6),
    # before anything is written.
    for method, params in [
        ("SendStreamingMessage", {"message": client.message("hi")}),
        ("SubscribeToTask", {"id": task_id}),
    ]:
        response, events = client.stream(method, params)
        if client.binding == "jsonrpc":  # REST answers a refusal with its HTTP status (400)
            assert response.mimetype == "text/event-stream"
        assert [e["error"]["code"] for e in events] == [-32008]
    assert seen.runs == [frozenset({SIGNED})]
    assert client.rpc("ListTasks", {}, headers={"A2A-Extensions": SIGNED}).result["totalSize"] == 1


def test_the_extended_card_is_discovery_and_answers_without_it(
    make_app: t.Callable[..., Flask], seen: Seen
) -> None:
    _, client = required_app(make_app, seen, extended_card=lambda caller: {"name": "x"})
    plain = client.rpc("GetExtendedAgentCard", {})
    assert plain.result == {"name": "x"} and "A2A-Extensions" not in plain.headers
    echoed = client.rpc("GetExtendedAgentCard", {}, headers={"A2A-Extensions": GEO})
    assert echoed.result == {"name": "x"} and echoed.headers["A2A-Extensions"] == GEO


def test_required_activated_runs(make_app: t.Callable[..., Flask], seen: Seen) -> None:
    _, client = required_app(make_app, seen)
    answer = send(client, header=f"{SIGNED},{GEO}")
    assert answer.result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answer.headers["A2A-Extensions"] == f"{GEO},{SIGNED}"
    assert seen.runs == [frozenset({GEO, SIGNED})]


def test_earlier_checks_keep_their_answers(make_app: t.Callable[..., Flask], seen: Seen) -> None:
    app, client = required_app(make_app, seen)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks"})
    assert (
        client.post(body, headers={"Content-Type": "text/plain"}).get_json()["error"]["code"]
        == -32005
    )
    unauthenticated = client.post(body, token="nobody")
    assert unauthenticated.status_code == 401
    assert unauthenticated.get_json()["error"]["code"] == -31401
    assert client.rpc("ListTasks", {}, headers={"A2A-Version": "0.3"}).code == -32009
    assert client.rpc("Summarize", {}).code == -32601
    # The card is public: a client reads the required extension there first.
    card = app.test_client().get("/.well-known/agent-card.json")
    assert card.status_code == 200
    assert {"uri": SIGNED, "required": True} in card.get_json()["capabilities"]["extensions"]


# ----------------------------------------------------------------------------- a real socket


def test_stream_over_a_socket_merges_header_lines_and_echoes() -> None:
    seen = Seen()
    app = Flask("extensions_live")
    A2A(
        app,
        principal=lambda: Principal("alice"),
        skills=[Skill(id="seen", name="Seen", description="Seen.", handler=seen.handler)],
        card=AgentCard(extensions=[AgentExtension(GEO), AgentExtension(CITE)]),
    )
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {"message": A2ATestClient.message("hi")},
        }
    ).encode()
    with werkzeug_server(app) as base_url:
        host, port = base_url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            conn.putrequest("POST", "/a2a")
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(len(body)))
            conn.putheader("A2A-Extensions", CITE)
            conn.putheader("A2A-Extensions", f"urn:example:unknown, {GEO}")
            conn.endheaders(body)
            response = conn.getresponse()
            text = response.read().decode()
        finally:
            conn.close()
    assert response.status == 200
    assert response.getheader("Content-Type", "").startswith("text/event-stream")
    assert response.getheader("A2A-Extensions") == f"{GEO},{CITE}"
    events = parse_sse(text)
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert seen.runs == [frozenset({GEO, CITE})]


@pytest.mark.live
def test_over_gunicorn_gevent_streams_echo_and_failures_log_scrubbed() -> None:
    from pathlib import Path

    from tests.live_server import LiveGunicorn

    server = LiveGunicorn(
        "tests.live_app:create_extensions_app()", chdir=str(Path(__file__).resolve().parents[2])
    )
    try:
        host, port = server.url.removeprefix("http://").split(":")
        answers = []
        for skill in ("extensions", "boom"):
            message = {**A2ATestClient.message("hi"), "metadata": {"skill": skill}}
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendStreamingMessage",
                    "params": {"message": message},
                }
            ).encode()
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            try:
                conn.putrequest("POST", "/a2a")
                for name, value in [
                    ("Content-Type", "application/json"),
                    ("Authorization", "Bearer alice-token"),
                    ("Content-Length", str(len(body))),
                    ("A2A-Extensions", CITE),
                    ("A2A-Extensions", f"urn:example:unknown, {GEO}"),
                ]:
                    conn.putheader(name, value)
                conn.endheaders(body)
                response = conn.getresponse()
                answers.append((response, parse_sse(response.read().decode())))
            finally:
                conn.close()
    finally:
        log = server.stop()
    (ok, ok_events), (failed, failed_events) = answers
    for response in (ok, failed):
        assert response.status == 200
        assert response.getheader("Content-Type", "").startswith("text/event-stream")
        assert response.getheader("A2A-Extensions") == f"{GEO},{CITE}"
    artifact = next(
        e["result"]["artifactUpdate"] for e in ok_events if "artifactUpdate" in e["result"]
    )
    assert artifact["artifact"]["parts"] == [{"text": f"{CITE},{GEO}"}]
    status = failed_events[-1]["result"]["statusUpdate"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert status["message"]["parts"] == [{"text": "skill handler failed"}]
    assert "a2a: skill boom failed" in log, log
    assert "RuntimeError: boom \\x1b[31m \\u202e pwned \\x9b" in log
    assert not any(c in log for c in "\x1b\u202e\x9b")
