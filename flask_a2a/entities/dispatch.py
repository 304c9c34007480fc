"""A request re-entering the host app: through its whole WSGI stack, as the run's caller.

The request carries the caller's ``Cookie``, ``Authorization`` and ``X-API-Key`` headers, says
it is a JSON API client (``Accept`` and ``Content-Type: application/json``, a body or not), and
comes from the caller's address: ``REMOTE_ADDR``, scheme, host and the ``X-Forwarded-*`` /
``Forwarded`` headers of the request that started the run (``exchange.reentry``). So the app
decides exactly as it does for its REST API called by that client. The agent's and the
entity's re-entry hooks then add what the host needs. It runs in an empty context, so it is a
request of its own (its own ``g`` and session, torn down after it).
"""

from __future__ import annotations

import contextvars
import json
import logging
import typing as t
import weakref
from http import HTTPStatus
from urllib.parse import urlencode, urlsplit

from flask.testing import EnvironBuilder

from ..exchange.reentry import AppAnswer, Reentry, ReentryHook, ReentryUnavailable
from ..protocol.pages import page_text
from ..protocol.scrub import scrub

if t.TYPE_CHECKING:
    from flask import Flask


log = logging.getLogger("flask_a2a")

#: Marks a request the exchange re-entered the app with (``request.environ`` key).
ENTITY_CALL_ENVIRON_KEY: t.Final = "flask_a2a.entity_call"
#: The largest app answer a re-entry reads.
MAX_ANSWER_BYTES: t.Final = 4 * 1024 * 1024


class AnswerTooLarge(Exception):
    """The app answered with more than :data:`MAX_ANSWER_BYTES`."""


class AppDispatcher:
    """Runs re-entered requests through one app (held weakly), its agent's hook applied first,
    then the entity's. The exchange's ``TaskContext.call_app`` and the entity skills share it.
    """

    def __init__(self, app: Flask, hook: ReentryHook | None = None) -> None:
        self._app = weakref.ref(app)
        self.hook = hook

    def __call__(self, reentry: Reentry, entity_hook: ReentryHook | None = None) -> AppAnswer:
        app = self._app()
        if app is None:
            raise ReentryUnavailable("the app of this exchange is gone")
        for hook in (self.hook, entity_hook):
            if hook is not None:
                hook(reentry)
        return dispatch(app, reentry)


def dispatch(app: Flask, reentry: Reentry) -> AppAnswer:
    """Run ``reentry`` through the app's whole WSGI stack; no test client involved."""
    builder = EnvironBuilder(
        app,
        path=reentry.path,
        method=reentry.method,
        query_string=urlencode(reentry.query, doseq=True) if reentry.query else None,
        json=reentry.json,
        headers=list(reentry.headers.items()),
    )
    try:
        environ = builder.get_environ()
    finally:
        builder.close()
    environ.update(reentry.environ)
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
    found = {k.lower(): v for k, v in headers}
    code = int(status[0].split(" ", 1)[0]) if status else 500
    mimetype = found.get("content-type", "").split(";", 1)[0].strip().lower()
    return AppAnswer(code, mimetype, b"".join(chunks), found.get("location"))


def refusal_text(answer: AppAnswer) -> str:
    """What a non-2xx answer said, after its status: where a redirect goes (its path, when it
    stays on the app's host) and what that means, or the answer's JSON compacted, its plain
    text, or the status phrase. ``status 302 → /login?next=%2F: the app did not accept the
    caller's credentials``, ``status 403: {"message":"banned"}``."""
    if 300 <= answer.status < 400:
        target = answer.location or ""
        parts = urlsplit(target)
        if parts.scheme in ("http", "https") and parts.path:
            target = parts.path + (f"?{parts.query}" if parts.query else "")
        where = f" → {scrub(target)[:300]}" if target else ""
        return f"status {answer.status}{where}: the app did not accept the caller's credentials"
    text = ""
    try:
        text = json.dumps(json.loads(answer.body), separators=(",", ":"), ensure_ascii=False)
    except (ValueError, UnicodeDecodeError):
        text = page_text(answer.body, answer.mimetype)  # an HTML error page: its heading
    if not text:
        try:
            text = HTTPStatus(answer.status).phrase
        except ValueError:
            text = "refused"
    return f"status {answer.status}: {scrub(text)[:500]}"
