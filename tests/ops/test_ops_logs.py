"""Log lines an operator can use, over real requests: the task id and skill as ``extra``
fields (what a JSON formatter picks up), the level an operator would choose, no message body
or credential, a run failure's traceback once."""

from __future__ import annotations

import logging
import threading
import typing as t

import pytest
from flask import Flask

from flask_a2a import Skill, TaskContext
from flask_a2a.store import MemoryStore
from flask_a2a.testing import A2ATestClient
from tests.conftest import wait_for
from tests.webhook import Webhook

BODY = "a-message-body-no-log-line-may-hold"


def boom(task: TaskContext) -> None:
    raise RuntimeError("handler broke")


def writes(task: TaskContext) -> None:
    task.working()
    task.complete()


def no_dns(host: str) -> list[str]:
    return ["127.0.0.1"]


class BrokenUpdates(MemoryStore):
    """Creates work; every update fails as a lost database connection would."""

    def update_task(self, record: t.Any, expected_version: int) -> t.Any:
        raise ConnectionError("server closed the connection unexpectedly")


def records_of(caplog: pytest.LogCaptureFixture, needle: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if needle in r.getMessage()]


def no_body_or_credential(caplog: pytest.LogCaptureFixture) -> None:
    for record in caplog.records:
        text = record.getMessage()
        assert BODY not in text and "Bearer" not in text and "push-token" not in text, text


def test_a_run_failure_logs_its_traceback_once_with_task_and_skill(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(skills=[Skill(id="boom", name="Boom", description="Raises.", handler=boom)])
    caplog.set_level(logging.DEBUG, logger="flask_a2a")
    task = A2ATestClient(app, token="alice").send(BODY, skill="boom")["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    failed = records_of(caplog, "a2a: skill boom failed")
    assert len(failed) == 1
    assert failed[0].levelno == logging.ERROR
    assert failed[0].a2a_task_id == task["id"]  # type: ignore[attr-defined]
    assert failed[0].a2a_skill == "boom"  # type: ignore[attr-defined]
    assert "Traceback" in failed[0].getMessage() and "handler broke" in failed[0].getMessage()
    tracebacks = [r for r in caplog.records if "Traceback" in r.getMessage() or r.exc_info]
    assert tracebacks == failed  # once
    no_body_or_credential(caplog)


def test_a_store_failure_is_an_error_naming_the_task(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(
        skills=[Skill(id="writes", name="W", description="Writes.", handler=writes)],
        store=BrokenUpdates(),
        config={"A2A_BLOCKING_WRITE_DELAY": 0},
    )
    caplog.set_level(logging.INFO, logger="flask_a2a")
    client = A2ATestClient(app, token="alice")
    answer = client.rpc("SendMessage", {"message": client.message(BODY, skill="writes")})
    assert answer.code == -32603, answer.text  # its end was not stored: the caller is told so
    (task,) = client.rpc("ListTasks", {}).result["tasks"]
    written = records_of(caplog, "a2a: writing a task failed")
    assert written and all(r.levelno == logging.ERROR for r in written)
    assert {r.a2a_task_id for r in written} == {task["id"]}  # type: ignore[attr-defined]
    assert {r.a2a_skill for r in written} == {"writes"}  # type: ignore[attr-defined]
    no_body_or_credential(caplog)


def test_a_failed_push_is_a_warning_naming_the_task(
    make_app: t.Callable[..., Flask], webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(config={"A2A_ALLOW_PRIVATE_PUSH": True}, push_resolver=no_dns)
    caplog.set_level(logging.INFO, logger="flask_a2a")
    webhook.answer(500)
    config = {"taskPushNotificationConfig": {"url": webhook.url(), "token": "push-token-x"}}
    task = A2ATestClient(app, token="alice").send(BODY, configuration=config)["task"]
    assert wait_for(lambda: bool(records_of(caplog, "a2a: push delivery got HTTP 500")))
    pushed = records_of(caplog, "a2a: push delivery got HTTP 500")
    assert all(r.levelno == logging.WARNING for r in pushed)
    assert {r.a2a_task_id for r in pushed} == {task["id"]}  # type: ignore[attr-defined]
    no_body_or_credential(caplog)


def test_a_refused_request_is_info_at_most(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app()
    client = A2ATestClient(app, token="alice")
    caplog.set_level(logging.DEBUG, logger="flask_a2a")
    assert client.rpc("GetTask", {"id": "nope"}).code == -32001
    assert client.rpc("Nope", {}).code == -32601
    assert A2ATestClient(app).rpc("GetTask", {"id": "x"}).status == 401
    assert (
        client.post(
            '{"jsonrpc": "2.0", "id": 1, "method": "GetTask"',
        ).status_code
        == 200
    )
    short = app.test_client().post(  # a body shorter than its Content-Length: the client left
        "/a2a",
        data=b'{"jsonrpc"',
        headers=client.headers(None),
        environ_overrides={"CONTENT_LENGTH": "50"},
    )
    assert "error" in short.get_json()
    assert records_of(caplog, "request body unreadable")
    ours = [r for r in caplog.records if r.thread == threading.get_ident()]  # not a late push
    assert all(r.levelno <= logging.INFO for r in ours), [
        (r.levelname, r.getMessage()) for r in ours
    ]
