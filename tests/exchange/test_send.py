"""SendMessage end to end: routing, blocking answers, returnImmediately, the wire shape."""

from __future__ import annotations

import threading
import typing as t

import pytest
from flask import Flask

from flask_a2a import Skill, TaskContext
from flask_a2a.testing import A2ATestClient

pytestmark = pytest.mark.usefixtures("binding")


def test_echo_completes_with_artifact(client: A2ATestClient) -> None:
    task = client.send("hello", skill="echo")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["name"] == "echo"
    assert task["artifacts"][0]["parts"] == [{"text": "hello"}]
    assert task["history"][0]["taskId"] == task["id"]
    assert task["history"][0]["contextId"] == task["contextId"]
    assert task["status"]["timestamp"].endswith("Z")


def test_only_skill_is_used_when_none_is_named(client: A2ATestClient) -> None:
    task = client.send("hi")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"


def test_unknown_skill_is_rejected_naming_only_the_asked_skill(client: A2ATestClient) -> None:
    task = client.send("hi", skill="purge")["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    text = task["status"]["message"]["parts"][0]["text"]
    assert '"purge"' in text
    assert "echo" not in text


def test_blocking_send_runs_the_handler_to_completion(make_app: t.Callable[..., Flask]) -> None:
    """The product spec: SendMessage runs the handler to completion, then answers; the run's
    slot is free by the time the answer arrives (a next send at the cap is not refused)."""
    returned = threading.Event()

    def ask_then_tidy(task: TaskContext) -> None:
        task.require_input("name?")
        returned.set()  # work after pausing still belongs to this run

    skill = Skill(id="ask", name="Ask", description="Ask.", handler=ask_then_tidy)
    app = make_app(skills=[skill], config={"A2A_MAX_CONCURRENT_RUNS_PER_OWNER": 1})
    client = A2ATestClient(app, token="alice")
    for _ in range(3):
        task = client.send("hi", skill="ask")["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert returned.is_set()
        returned.clear()
