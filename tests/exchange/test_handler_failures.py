"""A raising handler: the caller reads a generic FAILED, the log gets the scrubbed traceback.

An exception's text can hold SQL, paths or tokens, and characters that rewrite a terminal or
reorder what a line seems to say (ESC, bidi overrides, C1 controls). None of it reaches the
caller; the log line has it escaped. ``task.fail(text)`` is how a handler tells the caller why.
"""

from __future__ import annotations

import logging
import typing as t

import pytest
from flask import Flask

from flask_a2a import Part, Skill, TaskContext
from flask_a2a.protocol.scrub import scrub, scrub_exception
from flask_a2a.testing import A2ATestClient

pytestmark = pytest.mark.usefixtures("binding")

HOSTILE = "boom \x1b[31m \u202e pwned \x9b"
SECRET = "SELECT * FROM users WHERE token='tok-123' -- /srv/app/db.py"
#: Every character the issue names, and the other invisible format characters scrub escapes.
UNSAFE = (
    [chr(c) for c in range(0x202A, 0x202F)]
    + [chr(c) for c in range(0x2066, 0x206A)]
    + [chr(c) for c in range(0x80, 0xA0)]
    + [chr(c) for c in [*range(0x00, 0x09), *range(0x0A, 0x20), 0x7F]]
    + ["\u200b", "\u200e", "\u200f", "\u061c", "\u2028", "\u2029", "\ufeff", "\U000e0041"]
)


def boom(task: TaskContext) -> None:
    raise RuntimeError(HOSTILE)


def leaky(task: TaskContext) -> None:
    task.artifact([Part(text="half")], name="partial")
    raise ValueError(SECRET)


def chained(task: TaskContext) -> None:
    try:
        raise KeyError("inner \u202e\nFORGED inner line")
    except KeyError as exc:
        raise RuntimeError("outer \x1b]0;title\x07\nFORGED outer line") from exc


def explains(task: TaskContext) -> None:
    task.fail("the invoice service is down; try again in a minute")


@pytest.fixture
def client(make_app: t.Callable[..., Flask]) -> A2ATestClient:
    skills = [
        Skill(id=f.__name__, name=f.__name__, description="x", handler=f)
        for f in (boom, leaky, chained, explains)
    ]
    return A2ATestClient(make_app(skills=skills), token="alice")


def status_text(task: dict[str, t.Any]) -> str:
    return t.cast(str, task["status"]["message"]["parts"][0]["text"])


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every record as the handler formats it, and as ``getMessage`` renders it."""
    return caplog.text + "\n".join(r.getMessage() for r in caplog.records)


def assert_clean(text: str) -> None:
    found = sorted({f"U+{ord(c):04X}" for c in text if c in UNSAFE and c != "\n"})
    assert found == [], found


def test_a_raising_handler_fails_generically_and_logs_scrubbed(
    client: A2ATestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="flask_a2a"):
        task = client.send("x", skill="boom")["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == "skill handler failed"
    assert task["status"]["message"]["role"] == "ROLE_AGENT"
    stored = client.rpc("GetTask", {"id": task["id"]}).result
    assert status_text(stored) == "skill handler failed"
    assert all("boom" not in p.get("text", "") for m in stored["history"] for p in m["parts"])

    text = logged(caplog)
    assert_clean(text)
    assert "RuntimeError: boom \\x1b[31m \\u202e pwned \\x9b" in text
    assert "Traceback (most recent call last):" in text and "in boom" in text
    [record] = [r for r in caplog.records if "skill boom failed" in r.getMessage()]
    assert record.levelno == logging.ERROR and record.exc_info is None


def test_what_the_exception_held_never_reaches_the_caller(
    client: A2ATestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="flask_a2a"):
        answer = client.rpc("SendMessage", {"message": client.message("x", skill="leaky")})
        response, events = client.stream(
            "SendStreamingMessage", {"message": client.message("x", skill="leaky")}
        )
    assert "tok-123" not in answer.text and "SELECT" not in answer.text
    task = answer.result["task"]
    assert status_text(task) == "skill handler failed"
    assert task["artifacts"][0]["parts"] == [{"text": "half"}]  # what it did before stays
    assert response.status_code == 200 and "tok-123" not in response.get_data(as_text=True)
    last = events[-1]["result"]["statusUpdate"]["status"]
    assert last["state"] == "TASK_STATE_FAILED" and status_text({"status": last}) == (
        "skill handler failed"
    )
    assert caplog.text.count("ValueError: SELECT * FROM users") == 2  # the log keeps it


def test_chained_exceptions_log_every_text_on_one_line(
    client: A2ATestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="flask_a2a"):
        task = client.send("x", skill="chained")["task"]
    assert status_text(task) == "skill handler failed"
    text = logged(caplog)
    assert_clean(text)
    assert "KeyError: 'inner \\u202e\\nFORGED inner line'" in text
    assert "RuntimeError: outer \\x1b]0;title\\x07\\x0aFORGED outer line" in text
    assert "The above exception was the direct cause of the following exception:" in text
    assert not any(line.startswith("FORGED") for line in text.splitlines())


def test_task_fail_is_how_a_handler_explains(client: A2ATestClient) -> None:
    task = client.send("x", skill="explains")["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == "the invoice service is down; try again in a minute"


def test_an_unexpected_request_failure_logs_scrubbed(
    make_app: t.Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    def principal() -> t.Any:
        raise RuntimeError(HOSTILE)

    app = make_app(principal=principal)
    with caplog.at_level(logging.WARNING, logger="flask_a2a"):
        answer = A2ATestClient(app, token="alice").rpc("ListTasks", {})
    assert answer.code == -32603 and answer.error["message"] == "Internal error"
    assert "boom" not in answer.text
    text = logged(caplog)
    assert_clean(text)
    assert "a2a: request failed" in text and "RuntimeError: boom \\x1b[31m \\u202e" in text


# ----------------------------------------------------------------------------- scrub itself


@pytest.mark.parametrize("char", UNSAFE, ids=lambda c: f"U+{ord(c):04X}")
def test_scrub_escapes_control_bidi_and_format_characters(char: str) -> None:
    out = scrub(f"a{char}b")
    assert char not in out and out.startswith("a\\") and out.endswith("b")
    code = ord(char)
    expected = (
        f"\\x{code:02x}"
        if code < 0x100
        else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    )
    assert out == f"a{expected}b"


def test_scrub_keeps_tabs_and_ordinary_text() -> None:
    text = "tab\there: é ß 日本語 עברית عربى 🙂"
    assert scrub(text) == text


def test_scrub_exception_keeps_frames_on_their_own_lines() -> None:
    try:
        raise OSError("disk \u2067full\u2069\r\nFORGED")
    except OSError as exc:
        out = scrub_exception(exc)
    lines = out.split("\n")
    assert lines[0] == "Traceback (most recent call last):"
    assert any(line.startswith('  File "') for line in lines)
    assert lines[-1] == "OSError: disk \\u2067full\\u2069\\x0d\\x0aFORGED"
    assert_clean(out)
