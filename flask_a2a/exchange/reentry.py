"""Re-entering the host app as the caller: what a run carries of the request that started it,
and what a re-entered request and its answer look like. Imports nothing of Flask: the
dispatcher that runs the request through the app is given to the exchange by the extension.

A run keeps the caller's credential headers and the WSGI environ keys that say where the call
came from (the client's address, scheme and host, and the proxy headers the host's
``ProxyFix`` reads), so the host's token checks, IP tracking, bans and rate limits see the
real caller, never an anonymous request from nowhere. Neither is ever stored.
"""

from __future__ import annotations

import dataclasses
import json
import typing as t

from ..protocol.model import Message, Principal

if t.TYPE_CHECKING:
    from .calls import HeaderLookup, HTTPRequest

#: The caller's headers a run re-enters the app with: its credentials, nothing else of theirs.
CREDENTIAL_HEADERS: t.Final = ("Cookie", "Authorization", "X-API-Key")
#: The WSGI environ keys of the originating request a re-entry carries: where the call came
#: from, as the host's own middleware (``ProxyFix``) saw it.
ORIGIN_KEYS: t.Final = (
    "REMOTE_ADDR",
    "wsgi.url_scheme",
    "HTTP_HOST",
    "SERVER_NAME",
    "SERVER_PORT",
    "SCRIPT_NAME",
    "HTTP_FORWARDED",
    "HTTP_X_REAL_IP",
)
#: ... and every ``X-Forwarded-*`` header (``For``, ``Proto``, ``Host``, ``Port``, ``Prefix``).
ORIGIN_PREFIX: t.Final = "HTTP_X_FORWARDED_"
#: What every re-entered request says it is: an API client speaking JSON. Host APIs that read
#: their token only from JSON requests (``request.is_json``) then see the caller's token.
API_HEADERS: t.Final = (("Accept", "application/json"), ("Content-Type", "application/json"))


def credential_headers(headers: HeaderLookup) -> dict[str, str]:
    """The caller's credential headers, by their canonical names (werkzeug matches any case)."""
    found = {name: headers.get(name) for name in CREDENTIAL_HEADERS}
    return {name: str(value) for name, value in found.items() if value is not None}


def origin_environ(environ: t.Mapping[str, t.Any]) -> dict[str, str]:
    """The :data:`ORIGIN_KEYS` and ``X-Forwarded-*`` keys of a request's WSGI environ."""
    found = {
        key: str(environ[key])
        for key in ORIGIN_KEYS
        if key in environ and environ[key] is not None  # no get(): a call per key per run
    }
    size = len(ORIGIN_PREFIX)  # a slice, not startswith: this runs for every key of every run
    for key, value in environ.items():
        if key[:size] == ORIGIN_PREFIX:
            found[key] = str(value)
    return found


class Caller:
    """What a run knows of the request that started (or resumed) it, to re-enter the app as
    its caller: the credential headers and the origin environ keys. Never stored.

    :meth:`of` keeps the request and reads both from it when first asked (then lets it go):
    most runs never re-enter the app, and reading them costs every request two dozen calls.
    """

    __slots__ = ("_http", "_headers", "_environ")

    def __init__(
        self, headers: t.Mapping[str, str] | None = None, environ: t.Mapping[str, str] | None = None
    ) -> None:
        self._http: HTTPRequest | None = None
        self._headers: t.Mapping[str, str] = headers if headers is not None else {}
        self._environ: t.Mapping[str, str] = environ if environ is not None else {}

    @classmethod
    def of(cls, http: HTTPRequest) -> Caller:
        caller = cls()
        caller._http = http
        return caller

    def _read(self) -> None:
        http = self._http
        if http is not None:
            self._headers = credential_headers(http.headers)
            self._environ = origin_environ(http.environ)
            self._http = None

    @property
    def headers(self) -> t.Mapping[str, str]:
        """The caller's ``Cookie``, ``Authorization`` and ``X-API-Key`` headers."""
        self._read()
        return self._headers

    @property
    def environ(self) -> t.Mapping[str, str]:
        """The originating request's :data:`ORIGIN_KEYS` and ``X-Forwarded-*`` keys."""
        self._read()
        return self._environ


class RunOf(t.Protocol):
    """What a re-entry knows of the run it is made for (a ``TaskContext``)."""

    @property
    def caller(self) -> Caller: ...
    @property
    def principal(self) -> Principal: ...
    @property
    def message(self) -> Message: ...


@dataclasses.dataclass
class Reentry:
    """One request about to re-enter the app; a re-entry hook may change ``headers`` (added to
    the request's) and ``environ`` (WSGI keys set on it) before it runs.

    ``headers`` starts with the caller's credentials and :data:`API_HEADERS`; ``environ`` with
    the caller's origin keys. ``task`` is the run it is made for (its caller, principal and
    message).
    """

    method: str
    #: The path in the app (its ``SCRIPT_NAME`` is the caller's).
    path: str
    #: The query string's values: a mapping or ``(key, value)`` pairs (``urlencode``'s).
    query: t.Mapping[str, t.Any] | t.Sequence[tuple[str, t.Any]] | None
    #: The JSON body (``None``: no body).
    json: t.Any
    headers: dict[str, str]
    environ: dict[str, t.Any]
    task: RunOf

    @classmethod
    def of(
        cls,
        task: RunOf,
        method: str,
        path: str,
        *,
        query: t.Mapping[str, t.Any] | t.Sequence[tuple[str, t.Any]] | None = None,
        json: t.Any = None,
        headers: t.Mapping[str, str] | None = None,
    ) -> Reentry:
        """A request of ``task``'s caller: its credentials, :data:`API_HEADERS` and
        ``headers``; its origin environ keys."""
        return cls(
            method.upper(),
            path,
            query,
            json,
            {**task.caller.headers, **dict(API_HEADERS), **dict(headers or {})},
            dict(task.caller.environ),
            task,
        )


#: ``hook(reentry)``: adds what the host needs to a re-entered request (``A2A(reentry=...)``,
#: ``Entity(reentry=...)``).
ReentryHook = t.Callable[[Reentry], None]


class AppAnswer(t.NamedTuple):
    """The app's answer to a re-entered request."""

    status: int
    #: The media type, lower-cased, without parameters.
    mimetype: str
    body: bytes
    #: The ``Location`` header of a redirect.
    location: str | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> t.Any:
        """The body parsed as JSON (``None`` for an empty body); ``ValueError`` if it is not."""
        return json.loads(self.body) if self.body.strip() else None


#: ``reenter(reentry, entity_hook) -> AppAnswer``: runs a request through the app's whole WSGI
#: stack (``entities.dispatch``); the extension gives it to the exchange.
Dispatcher = t.Callable[[Reentry, "ReentryHook | None"], AppAnswer]


class ReentryUnavailable(RuntimeError):
    """The exchange serves no app to re-enter (built by hand, without the extension)."""
