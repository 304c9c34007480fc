"""SendMessage end to end: routing, blocking answers, returnImmediately, the wire shape."""

from __future__ import annotations

import threading
import typing as t

from flask import Flask

from flask_a2a import Skill, TaskContext
from flask_a2a.testing import A2ATestClient


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


def test_blocking_send_answers_at_the_pause_not_at_handler_return(
    make_app: t.Callable[..., Flask],
) -> None:
    release, returned = threading.Event(), threading.Event()

    def ask_then_linger(task: TaskContext) -> None:
        task.require_input("name?")
        release.wait(10)  # the handler goes on after pausing; the answer must not wait for it
        returned.set()

    skill = Skill(id="ask", name="Ask", description="Ask.", handler=ask_then_linger)
    client = A2ATestClient(make_app(skills=[skill]), token="alice")
    task = client.send("hi", skill="ask")["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert not returned.is_set()
    release.set()
