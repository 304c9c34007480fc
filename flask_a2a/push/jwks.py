"""The receiver's copy of the agent's JWKS: cached by ``kid``, fetched one bounded GET at a time.

A JWKS URL is an outside server a forged notification can make the receiver call, so every
fetch is bounded: a total deadline (:data:`FETCH_DEADLINE`; past it the fetch's socket is shut,
since a server sending a byte at a time never lets a read timeout fire), at most
:data:`MAX_JWKS_BYTES` read and :data:`MAX_JWKS_KEYS` keys kept, no redirect followed, https
only unless the caller opts into http (development). One fetch runs at a time, outside the
cache's lock: a verify that needs keys the cache lacks waits for that fetch (at most its
deadline), never starts a second. And no fetch starts within :data:`MIN_REFETCH` seconds of the
last one ending, whatever asked for it (a ``kid`` the cache lacks, a ``max-age=0`` response, a
failure): forged kids cannot make the receiver hammer the agent, and a JWKS that is down is
asked again every 10 s, not at every notification.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import typing as t
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3 import ProxyManager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from ..card.signing import SigningKey

#: Seconds that must pass after a fetch ends before another may start (whatever caused it).
MIN_REFETCH: t.Final = 10.0
#: Seconds one fetch may take in all: connect, headers and body.
FETCH_DEADLINE: t.Final = 5.0
#: The most bytes of a JWKS response read; a longer one is refused.
MAX_JWKS_BYTES: t.Final = 64 * 1024
#: The most keys a JWKS may hold; one with more is refused.
MAX_JWKS_KEYS: t.Final = 100
#: How long a JWKS is kept when its response names no ``max-age``.
DEFAULT_JWKS_TTL: t.Final = 300.0
#: The longest a JWKS is kept, whatever its response says.
MAX_JWKS_TTL: t.Final = 86400.0
#: Seconds a verify waits beyond a fetch's deadline for it to be read (parsing, a late wakeup).
_WAIT_MARGIN: t.Final = 1.0
_CHUNK: t.Final = 8192
_HEADERS: t.Final = {"Accept": "application/json", "Accept-Encoding": "identity"}


class JWKSUnavailable(Exception):
    """No key could be had: the fetch failed (the message says how) and none is cached."""


class FetchFailed(Exception):
    """One fetch of the JWKS failed; the message says how, for the receiver's log."""


def check_url(url: str, allow_http: bool) -> None:
    """Refuse a JWKS URL that is not https (http only when the caller opted in)."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "https" or (scheme == "http" and allow_http):
        return
    raise ValueError(
        f"the JWKS URL must be https (http only with allow_http=True, for development): {url!r}"
    )


class JWKSCache:
    """The agent's public keys by ``kid``: given once, or fetched from a URL and refreshed.

    :param source: the JWKS URL, a JWKS document, a list of JWKs or
        :class:`~flask_a2a.card.signing.SigningKey` objects.
    :param session: a ``requests.Session`` to fetch with. Without one each fetch uses a fresh
        session whose sockets are shut at the deadline; yours keeps its own transport, and the
        deadline is then checked between reads only.
    :param timeout: the total deadline of one fetch, in seconds.
    :param allow_http: accept an ``http://`` URL (development and tests only).
    """

    def __init__(
        self,
        source: t.Any,
        *,
        session: requests.Session | None = None,
        timeout: float = FETCH_DEADLINE,
        clock: t.Callable[[], float] = time.monotonic,
        allow_http: bool = False,
        max_bytes: int = MAX_JWKS_BYTES,
        max_keys: int = MAX_JWKS_KEYS,
    ) -> None:
        self.url = source if isinstance(source, str) else None
        if self.url is not None:
            check_url(self.url, allow_http)
        self.session = session
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.max_keys = max_keys
        #: A test seam: seconds, monotonic (the refetch floor and the TTL read it).
        self.clock = clock
        #: How many fetches were started (a receiver's health check may read it).
        self.fetches = 0
        self._lock = threading.Lock()
        self._keys: dict[str, dict[str, t.Any]] = {}
        self._expires = -1.0
        #: No fetch starts before this (the floor after the last one ended).
        self._next_fetch: float | None = None
        #: The fetch under way: set when it ends.
        self._fetching: threading.Event | None = None
        #: How the last fetch failed; None once one succeeds.
        self._failure: str | None = None
        if self.url is None:
            self._keys = by_kid(jwk_list(source))

    def jwk(self, kid: str) -> dict[str, t.Any] | None:
        """The JWK for ``kid``; a stale cache is refreshed, an unknown kid fetches once.

        Raises :class:`JWKSUnavailable` when no key is cached and the fetch failed.
        """
        if self.url is None:
            return self._keys.get(kid)
        with self._lock:
            found = self._keys.get(kid)
            if found is not None and self.clock() < self._expires:
                return found
            fetching = self._fetching
            mine = fetching is None and self._may_fetch()
            if mine:
                fetching = self._fetching = threading.Event()
                self.fetches += 1
        if mine:
            assert fetching is not None
            self._fetch(fetching)
        elif fetching is not None and found is None:  # a stale key serves until it is done
            fetching.wait(self.timeout + _WAIT_MARGIN)
        with self._lock:
            found = self._keys.get(kid)
            if found is None and not self._keys:
                raise JWKSUnavailable(self._failure or "the JWKS fetch under way has not ended")
            return found

    def _may_fetch(self) -> bool:
        return self._next_fetch is None or self.clock() >= self._next_fetch

    def _fetch(self, done: threading.Event) -> None:
        """One fetch, outside the lock; its outcome recorded, its waiters woken, come what may."""
        keys: dict[str, dict[str, t.Any]] | None = None
        ttl = 0.0
        failure = None
        try:
            keys, ttl = self._download()
        except FetchFailed as exc:
            failure = str(exc)
        except Exception as exc:  # a session of the caller's raising something odd
            failure = repr(exc)
        finally:
            with self._lock:
                now = self.clock()
                self._next_fetch = now + MIN_REFETCH
                if keys is not None:
                    self._keys, self._expires, self._failure = keys, now + ttl, None
                else:  # keep serving the keys we have
                    self._failure = failure or "the fetch was interrupted"
                self._fetching = None
            done.set()

    def _download(self) -> tuple[dict[str, dict[str, t.Any]], float]:
        """GET the URL within the deadline: the keys and how long they may be kept."""
        assert self.url is not None
        deadline = Deadline(self.timeout)
        session = self.session if self.session is not None else deadline.session()
        try:
            with deadline:
                response = session.get(
                    self.url,
                    headers=_HEADERS,
                    timeout=self.timeout,
                    stream=True,
                    allow_redirects=False,
                )
                try:
                    body = self._read(response, deadline)
                finally:
                    response.close()
        except (requests.RequestException, OSError) as exc:
            raise FetchFailed(deadline.explain(exc)) from None
        finally:
            if self.session is None:
                session.close()
        try:
            document = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise FetchFailed(f"the JWKS is not JSON: {exc}") from None
        return self._keys_of(document), ttl(response.headers.get("Cache-Control", ""))

    def _read(self, response: requests.Response, deadline: Deadline) -> bytes:
        status = response.status_code
        if 300 <= status < 400:
            location = response.headers.get("Location", "")
            raise FetchFailed(f"HTTP {status} to {location!r}: redirects are not followed")
        if status != 200:
            raise FetchFailed(f"HTTP {status}")
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise FetchFailed(f"Content-Encoding {encoding!r} (identity was asked for)")
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            raise FetchFailed(f"{length} bytes, over the {self.max_bytes}-byte limit")
        body = bytearray()
        for chunk in response.iter_content(_CHUNK):
            body += chunk
            if len(body) > self.max_bytes:
                raise FetchFailed(f"over the {self.max_bytes}-byte limit")
            deadline.check()
        deadline.check()  # a body cut short by the deadline is no JWKS
        return bytes(body)

    def _keys_of(self, document: t.Any) -> dict[str, dict[str, t.Any]]:
        keys = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(keys, list):
            raise FetchFailed("the JWKS has no 'keys' array")
        if len(keys) > self.max_keys:
            raise FetchFailed(f"the JWKS holds {len(keys)} keys, over the limit of {self.max_keys}")
        try:
            return by_kid(jwk_list(keys))
        except TypeError as exc:
            raise FetchFailed(str(exc)) from None


def ttl(cache_control: str) -> float:
    """Seconds a JWKS may be kept per its ``Cache-Control`` (the refetch floor still applies)."""
    lowered = cache_control.lower()
    if "no-cache" in lowered or "no-store" in lowered:
        return 0.0
    for directive in lowered.split(","):
        name, _, value = directive.strip().partition("=")
        if name == "max-age" and value.strip().isdigit():
            return min(float(value.strip()), MAX_JWKS_TTL)
    return DEFAULT_JWKS_TTL


def jwk_list(source: t.Any) -> list[dict[str, t.Any]]:
    """JWKs as dicts, from a JWKS document, a list of JWKs or of SigningKeys."""
    if isinstance(source, t.Mapping):
        source = source.get("keys", ())
    out = []
    for item in source:
        if isinstance(item, SigningKey):
            out.append(item.jwk())
        elif isinstance(item, t.Mapping):
            out.append(dict(item))
        else:
            raise TypeError(f"not a JWK or a SigningKey: {type(item).__name__}")
    return out


def by_kid(jwks: list[dict[str, t.Any]]) -> dict[str, dict[str, t.Any]]:
    """JWKs by their ``kid`` (a JWK without a string ``kid`` cannot be named by a token)."""
    return {jwk["kid"]: jwk for jwk in jwks if isinstance(jwk.get("kid"), str) and jwk["kid"]}


class Deadline:
    """One fetch's total deadline: when it passes, the sockets the fetch opened are shut."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self.passed = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` when the deadline passes (at once if it has)."""
        with self._lock:
            self._sockets.append(sock)
            if not self.passed:
                return
        _shut(sock)

    def check(self) -> None:
        if self.passed or time.monotonic() >= self.ends:
            self.passed = True
            raise FetchFailed(self.explain(None))

    def explain(self, exc: BaseException | None) -> str:
        if self.passed or time.monotonic() >= self.ends:
            return f"no JWKS within the {self.seconds:g} s deadline"
        return str(exc)

    def session(self) -> requests.Session:
        """A fresh session whose connections this deadline watches (one fetch, no reuse)."""
        session = requests.Session()
        adapter = _DeadlineAdapter(self)
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        return session

    def _expire(self) -> None:
        with self._lock:
            self.passed = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:  # wakes a thread blocked reading it; closing is left to its owner
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _pool_classes(deadline: Deadline) -> dict[str, type[HTTPConnectionPool]]:
    """Pool classes whose new sockets (before TLS) ``deadline`` watches."""

    class Conn(HTTPConnection):
        def _new_conn(self) -> socket.socket:
            sock = super()._new_conn()
            deadline.watch(sock)
            return sock

    class SConn(HTTPSConnection):
        def _new_conn(self) -> socket.socket:
            sock = super()._new_conn()
            deadline.watch(sock)
            return sock

    class Pool(HTTPConnectionPool):
        ConnectionCls = Conn

    class SPool(HTTPSConnectionPool):
        ConnectionCls = SConn

    return {"http": Pool, "https": SPool}


class _DeadlineAdapter(HTTPAdapter):
    """An ``HTTPAdapter`` whose connections (direct or through an HTTP proxy) a deadline shuts."""

    def __init__(self, deadline: Deadline) -> None:
        self.pools = _pool_classes(deadline)
        super().__init__(max_retries=0)

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: t.Any
    ) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = self.pools

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: t.Any) -> t.Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if isinstance(manager, ProxyManager):  # SOCKS keeps its own classes
            manager.pool_classes_by_scheme = self.pools
        return manager
