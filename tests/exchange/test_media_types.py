"""Media types checked against the skill that runs (issue 24 part 2, ``A2A_CHECK_MEDIA_TYPES``).

Over both bindings with the test client, and over a real socket under ``gunicorn -k gevent``.
"""

from __future__ import annotations

import json
import logging
import os
import typing as t
import urllib.request

import pytest
from flask import Flask

from flask_a2a import A2A, AgentCard, Principal, Skill
from flask_a2a.config import ConfigError
from flask_a2a.exchange.media import matches, part_media_type
from flask_a2a.protocol.model import Part
from flask_a2a.testing import A2ATestClient
from tests.live_server import gunicorn_server
from tests.wire_app import create_app, echo

pytestmark = pytest.mark.usefixtures("binding")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PNG = {"raw": "iVBORw0KGgo=", "mediaType": "image/png"}


def strict(**config: t.Any) -> tuple[Flask, A2ATestClient]:
    app = create_app({"A2A_CHECK_MEDIA_TYPES": "refuse", **config})
    return app, A2ATestClient(app, token="alice-token")


def send(
    client: A2ATestClient, parts: list[dict[str, t.Any]], skill: str, **configuration: t.Any
) -> t.Any:
    message = {"messageId": os.urandom(8).hex(), "role": "ROLE_USER", "parts": parts,
               "metadata": {"skill": skill}}  # fmt: skip
    params: dict[str, t.Any] = {"message": message}
    if configuration:
        params["configuration"] = configuration
    return client.rpc("SendMessage", params)


def stored(client: A2ATestClient) -> int:
    return int(client.rpc("ListTasks", {}).result["totalSize"])


def test_a_part_the_skill_does_not_accept_is_refused_before_anything_is_written() -> None:
    app, client = strict()
    refused = send(client, [{"text": "hi"}], "json_only")
    assert refused.code == -32005
    assert refused.error["message"] == (
        "Incompatible content types: message.parts[0] is text/plain; skill 'json_only' "
        "accepts application/json"
    )
    assert refused.error["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    assert refused.error["data"][0]["metadata"] == {"skill": "json_only"}
    if client.binding == "rest":
        assert refused.status == 400
    assert stored(client) == 0
    assert app.extensions["a2a"].exchange.live_runs() == []
    # The second part is the one refused: the index says so.
    mixed = send(client, [{"data": {"x": 1}}, PNG], "json_only")
    assert mixed.code == -32005 and "message.parts[1] is image/png" in mixed.error["message"]
    assert stored(client) == 0


def test_what_the_skill_accepts_runs() -> None:
    _, client = strict()
    assert send(client, [{"data": {"x": 1}}], "json_only").result["task"]["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )
    # image/* takes image/png; parameters and case do not matter.
    assert "task" in send(client, [PNG], "images").result
    upper = [{"text": "hi", "mediaType": "Text/Plain; charset=utf-8"}]
    assert "task" in send(client, upper, "echo").result
    # A raw part that says no media type has none to check.
    assert "task" in send(client, [{"raw": "AAE="}], "json_only").result
    assert stored(client) == 4


def test_accepted_output_modes_must_meet_the_skills_output_modes() -> None:
    _, client = strict()
    refused = send(client, [{"text": "hi"}], "echo", acceptedOutputModes=["image/png"])
    assert refused.code == -32005
    assert refused.error["message"] == (
        "Incompatible content types: configuration.acceptedOutputModes shares nothing with the "
        "output modes of skill 'echo' (text/plain)"
    )
    assert stored(client) == 0
    for accepted in (["image/png", "text/plain"], ["text/*"], ["*/*"]):
        assert "task" in send(client, [{"text": "hi"}], "echo", acceptedOutputModes=accepted).result
    # No acceptedOutputModes: nothing to check.
    assert "task" in send(client, [{"text": "hi"}], "echo").result


def test_a_skill_declaring_nothing_takes_the_cards_defaults(
    make_app: t.Callable[..., Flask],
) -> None:
    _, client = strict()
    assert "task" in send(client, [{"text": "hi"}], "plain").result  # text/plain: a default
    assert "task" in send(client, [{"data": 1}], "plain").result  # application/json too
    assert send(client, [PNG], "plain").code == -32005
    assert send(client, [{"text": "x"}], "plain", acceptedOutputModes=["image/png"]).code == (
        -32005
    )
    # Another card's defaults are that card's.
    images = make_app(
        skills=[Skill(id="plain", name="P", description="P.", handler=echo)],
        config={"A2A_CHECK_MEDIA_TYPES": "refuse"},
        card=AgentCard(default_input_modes=("image/png",)),
    )
    other = A2ATestClient(images, token="alice")
    assert "task" in send(other, [PNG], "plain").result
    assert send(other, [{"text": "hi"}], "plain").code == -32005


def test_a_resume_is_checked_against_the_tasks_skill() -> None:
    _, client = strict()
    paused = send(client, [{"data": {}}], "sign_in").result["task"]
    assert paused["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    resume = {"messageId": "r-1", "role": "ROLE_USER", "taskId": paused["id"],
              "parts": [{"text": "here"}]}  # fmt: skip
    refused = client.rpc("SendMessage", {"message": resume})
    assert refused.code == -32005 and "skill 'sign_in' accepts" in refused.error["message"]
    after = client.rpc("GetTask", {"id": paused["id"]}).result
    assert after["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    assert len(after["history"]) == len(paused["history"])  # nothing appended


@pytest.mark.jsonrpc_only("the stream's one error event; REST answers 400 before any stream")
def test_a_streaming_send_refuses_with_its_one_error_event() -> None:
    _, client = strict()
    message = {"messageId": "s-1", "role": "ROLE_USER", "parts": [{"text": "hi"}],
               "metadata": {"skill": "json_only"}}  # fmt: skip
    response, events = client.stream("SendStreamingMessage", {"message": message})
    assert response.mimetype == "text/event-stream"
    assert [e["error"]["code"] for e in events] == [-32005]
    assert stored(client) == 0


def test_the_default_logs_what_refuse_would_refuse(caplog: pytest.LogCaptureFixture) -> None:
    app = create_app()
    assert app.extensions["a2a"].settings.check_media_types == "log"
    client = A2ATestClient(app, token="alice-token")
    with caplog.at_level(logging.WARNING, logger="flask_a2a"):
        answered = send(client, [{"text": "hi"}], "json_only")
    assert answered.result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    lines = [r.getMessage() for r in caplog.records if "A2A_CHECK_MEDIA_TYPES" in r.getMessage()]
    assert lines == [
        (
            "a2a: A2A_CHECK_MEDIA_TYPES=refuse would refuse this message (-32005): "
            "message.parts[0] is text/plain; skill 'json_only' accepts application/json"
        )
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="flask_a2a"):
        send(client, [{"data": {}}], "json_only")  # nothing to say
    assert not [r for r in caplog.records if "A2A_CHECK_MEDIA_TYPES" in r.getMessage()]


def test_off_checks_nothing(caplog: pytest.LogCaptureFixture) -> None:
    client = A2ATestClient(create_app({"A2A_CHECK_MEDIA_TYPES": False}), token="alice-token")
    with caplog.at_level(logging.WARNING, logger="flask_a2a"):
        assert "task" in send(client, [PNG], "json_only").result
    assert not [r for r in caplog.records if "A2A_CHECK_MEDIA_TYPES" in r.getMessage()]


@pytest.mark.jsonrpc_only("configuration, not the wire")
def test_the_setting_reads_booleans_and_refuses_other_words() -> None:
    settings = create_app({"A2A_CHECK_MEDIA_TYPES": True}).extensions["a2a"].settings
    assert settings.check_media_types == "refuse"
    app = Flask("bad")
    app.config["A2A_CHECK_MEDIA_TYPES"] = "strict"
    with pytest.raises(ConfigError, match="A2A_CHECK_MEDIA_TYPES must be one of"):
        A2A(
            app,
            skills=[Skill(id="e", name="E", description="E.", handler=echo)],
            principal=lambda: Principal("a"),
        )


@pytest.mark.jsonrpc_only("pure functions")
def test_media_type_matching() -> None:
    assert part_media_type(Part(text="x")) == "text/plain"
    assert part_media_type(Part(data=None)) == "application/json"
    assert part_media_type(Part(raw=b"x")) is None
    assert part_media_type(Part(url="http://x", media_type="IMAGE/PNG; q=1")) == "image/png"
    assert matches("image/png", "image/*") and matches("*/*", "text/plain")
    assert matches("text/*", "text/plain") and not matches("image/*", "text/plain")
    assert not matches("application/json", "application/xml")


@pytest.mark.jsonrpc_only("one live server answers both bindings in this test")
def test_over_a_live_gevent_server() -> None:
    env = {"FLASK_A2A_CHECK_MEDIA_TYPES": "refuse"}
    with gunicorn_server("tests.wire_app:create_app()", chdir=ROOT, env=env) as url:
        message = {"messageId": "g-1", "role": "ROLE_USER", "parts": [{"text": "hi"}],
                   "metadata": {"skill": "json_only"}}  # fmt: skip
        body: dict[str, t.Any] = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": message},
        }
        status, doc = post(url + "/a2a", body)
        assert status == 200 and doc["error"]["code"] == -32005
        status, doc = post(url + "/a2a/rest/message:send", body["params"])
        assert status == 400
        assert doc["error"]["status"] == "INVALID_ARGUMENT"
        assert doc["error"]["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
        body["params"]["message"]["parts"] = [{"data": {"x": 1}}]
        status, doc = post(url + "/a2a", body)
        assert doc["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def post(url: str, body: t.Any) -> tuple[int, t.Any]:
    request = urllib.request.Request(
        url,
        json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": "Bearer alice-token"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)
