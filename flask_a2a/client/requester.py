"""The client's HTTP requests: on the ``requests.Session`` it was given, with its own headers
and credentials on each request, never written onto the session.

A session handed to ``A2AClient(session=...)`` may be shared: by two clients holding two users'
tokens, or by the host's own code. Headers or auth set on it would go out with every request
made through it, so the client made last would speak for all of them (one user's calls made
with another's credentials). ``requests`` merges a request's own headers over the session's,
and a request's own ``auth`` replaces the session's (and ``~/.netrc``'s), so this is enough.
"""

from __future__ import annotations

import typing as t

import requests
from requests.auth import AuthBase


class BearerAuth(AuthBase):
    """``Authorization: Bearer <token>``, as a request's own ``auth``: applied after the
    session's headers and instead of the session's auth."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self.token}"
        return request

    def __repr__(self) -> str:
        return "<BearerAuth ***>"  # never the token


class Requester:
    """One client's view of a session: its headers under each request's own, its auth."""

    def __init__(
        self, session: requests.Session, headers: t.Mapping[str, str], auth: t.Any = None
    ) -> None:
        self.session = session
        self.headers = dict(headers)
        self.auth = auth

    def request(
        self, method: str, url: str, headers: t.Mapping[str, str] | None = None, **options: t.Any
    ) -> requests.Response:
        if self.auth is not None:
            options.setdefault("auth", self.auth)
        merged = {**self.headers, **(headers or {})}
        return self.session.request(method, url, headers=merged, **options)

    def get(self, url: str, **options: t.Any) -> requests.Response:
        return self.request("GET", url, **options)

    def post(self, url: str, **options: t.Any) -> requests.Response:
        return self.request("POST", url, **options)
