"""A tool call re-entering the host app: through its whole WSGI stack, as the caller.

The request carries the caller's ``Cookie``, ``Authorization`` and ``X-API-Key`` headers and
nothing else of theirs, so the app decides exactly as it does for its REST API; it runs in an
empty context, so it is a request of its own (its own ``g`` and session, torn down after it).
"""

from __future__ import annotations

import contextvars
import json
import logging
import typing as t
from http import HTTPStatus
from urllib.parse import urlencode

from flask.testing import EnvironBuilder

from ..protocol.scrub import scrub

if t.TYPE_CHECKING:
    from flask import Flask

    from .tools import Call


log = logging.getLogger("flask_a2a")

#: Marks a request the exchange re-entered the app with (``request.environ`` key).
ENTITY_CALL_ENVIRON_KEY: t.Final = "flask_a2a.entity_call"
#: The largest app answer a tool call reads.
MAX_ANSWER_BYTES: t.Final = 4 * 1024 * 1024


class AnswerTooLarge(Exception):
    """The app answered with more than :data:`MAX_ANSWER_BYTES`."""


class Answer(t.NamedTuple):
    status: int
    mimetype: str
    body: bytes


def dispatch(app: Flask, call: Call, credentials: t.Mapping[str, str]) -> Answer:
    """Run ``call`` through the app's whole WSGI stack as the caller; no test client involved."""
    builder = EnvironBuilder(
        app,
        path=call.path,
        method=call.method,
        query_string=urlencode(call.query) if call.query else None,
        json=call.body,
        headers=list(credentials.items()),
    )
    try:
        environ = builder.get_environ()
    finally:
        builder.close()
    environ[ENTITY_CALL_ENVIRON_KEY] = True
    status: list[str] = []
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []
    size = 0

    def start_response(
        line: str, response_headers: list[tuple[str, str]], exc_info: t.Any = None
    ) -> t.Callable[[bytes], object]:
        status[:] = [line]
        headers[:] = response_headers
        return chunks.append

    def serve() -> None:
        nonlocal size
        iterable = app(environ, start_response)
        try:
            for chunk in iterable:
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise AnswerTooLarge(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")
                chunks.append(chunk)
        finally:
            close = getattr(iterable, "close", None)
            if close is not None:
                close()

    # An empty context: the call gets its own app and request context (its own ``g`` and
    # ``db.session``, torn down as after any request), not the run's.
    contextvars.Context().run(serve)
    content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
    code = int(status[0].split(" ", 1)[0]) if status else 500
    return Answer(code, content_type.split(";", 1)[0].strip().lower(), b"".join(chunks))


def refusal_text(answer: Answer) -> str:
    """What a non-2xx answer said: its JSON compacted, its plain text, or the status phrase."""
    text = ""
    try:
        text = json.dumps(json.loads(answer.body), separators=(",", ":"), ensure_ascii=False)
    except (ValueError, UnicodeDecodeError):
        if answer.mimetype == "text/plain":
            text = " ".join(answer.body.decode("utf-8", "replace").split())
    if not text:
        try:
            text = HTTPStatus(answer.status).phrase
        except ValueError:
            text = "refused"
    return scrub(text)[:500]
