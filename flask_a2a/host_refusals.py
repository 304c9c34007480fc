"""The host app's own refusals on the exchange's endpoints, answered as the binding's errors.

A legacy app's ``before_request`` hooks run in front of every view, ours included: a home-made
CSRF check, a ban check, a login hook, a rate limit. They answer with the app's HTML error
pages, which an A2A client can only report as "not JSON-RPC". On an endpoint of the exchange
(JSON-RPC, REST, the card and JWKS, the console's JSON reads), such a refusal is answered as
that endpoint's own error instead, with the host's words and status: ``abort(403, "banned")``
is a JSON-RPC ``-31403 Forbidden: banned``, a REST ``403 PERMISSION_DENIED``. The host's pages
everywhere else are untouched.

Two ways a refusal arrives, both caught per blueprint:

- ``abort(...)`` raised in a hook: an error handler per status on the blueprint, which Flask
  prefers to the app's own for requests routed to it;
- a page the hook returns itself: an ``after_request`` on the blueprint converts any answer of
  400 or more that no view of ours made (each view marks a request that reached it: the view
  itself or :func:`passes_hooks`, which costs a request nothing, where a ``before_request`` of
  the blueprint would cost every request a hook call; :func:`answer_host_refusals` registers
  such a hook for a blueprint whose views do not mark). On the API endpoints a redirect is one
  too (a login or password-change hook's, which an A2A client would follow to an HTML page):
  -31401, naming where it pointed.
"""

from __future__ import annotations

import functools
import typing as t

from flask import Blueprint, Response, request
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES

from .protocol.errors import HOST_REFUSALS, A2AError, host_refusal
from .protocol.pages import answer_text
from .protocol.scrub import scrub

#: ``request.environ`` key: the request passed the host's hooks (or its refusal was answered).
PASSED_HOOKS: t.Final = "flask_a2a.passed_host_hooks"
#: ``answer(error) -> Response``: the endpoint's own error answer.
Answer = t.Callable[[A2AError], Response]


V = t.TypeVar("V", bound=t.Callable[..., t.Any])


def passes_hooks(view: V) -> V:
    """``view`` marking each request that reaches it as one the host's hooks let through
    (for a blueprint registered with ``views_mark=True``)."""

    @functools.wraps(view)
    def marked(*args: t.Any, **kwargs: t.Any) -> t.Any:
        request.environ[PASSED_HOOKS] = True
        return view(*args, **kwargs)

    return t.cast(V, marked)


def answer_host_refusals(
    bp: Blueprint,
    answer: t.Callable[[], Answer],
    redirects: t.Callable[[], bool] = lambda: False,
    *,
    views_mark: bool = False,
) -> None:
    """Answer the host's refusals on ``bp``'s endpoints with ``answer()(error)``
    (``answer`` chooses by ``request.endpoint``: JSON-RPC for the exchange, REST for the
    rest). Where ``redirects()`` says so (an API endpoint, which no client follows to a page),
    a redirect made by the host's hooks is refused too, naming where it pointed.

    ``views_mark``: every view of ``bp`` sets :data:`PASSED_HOOKS` itself (or is wrapped in
    :func:`passes_hooks`), so no ``before_request`` hook is registered to do it."""

    def handled(exc: HTTPException) -> Response:
        status = exc.code or 500
        words = f"{exc.name}: {exc.description}" if exc.description else exc.name
        return _refusal(answer(), status, words, getattr(exc, "valid_methods", None))

    for status in HOST_REFUSALS:
        bp.register_error_handler(status, handled)

    if not views_mark:

        @bp.before_request
        def passed() -> None:
            request.environ[PASSED_HOOKS] = True

    @bp.after_request
    def converted(response: Response) -> Response:
        status = response.status_code
        if status < 300 or request.environ.get(PASSED_HOOKS):  # the usual answer: one look
            return response
        if status < 400:
            if not redirects():
                return response
            where = scrub(response.headers.get("Location", "?"))[:300]
            phrase = HTTP_STATUS_CODES.get(status, "Redirect")
            return _refusal(answer(), 401, f"{phrase}: the app redirected it to {where}", None)
        words = answer_text(response.get_data()[:65536], response.mimetype or "")
        return _refusal(answer(), status, words or HTTP_STATUS_CODES.get(status, "Refused"), None)


def _refusal(answer: Answer, status: int, words: str, allowed: t.Iterable[str] | None) -> Response:
    request.environ[PASSED_HOOKS] = True  # answered: the after_request hook leaves it be
    error = host_refusal(status, words)
    if allowed:
        error.metadata["allow"] = ", ".join(allowed)
    return answer(error)
