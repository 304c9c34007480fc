"""Where a push notification may go: the address policy and the guarded requests client.

A push URL names a host chosen by the caller, so without a guard the server could be made to
POST into its own network (a metadata endpoint, an admin port on loopback). The policy refuses
loopback, RFC 1918, CGNAT (100.64/10), link-local, unspecified, multicast and every other
address that is not globally routable, also when wrapped in an IPv4-mapped, IPv4-translated,
IPv4-compatible, 6to4 or well-known-prefix NAT64 IPv6 address (unwrapped and judged by the
IPv4 address inside: the tables ``_WRAPS_V4``); the local-use NAT64 prefix ``64:ff9b:1::/48``
is refused whole (``_REFUSED_V6``). It is applied twice:

* **at registration** (:func:`check_url`): the host, or every address it resolves to now;
* **at dial time** (:class:`GuardedAdapter`): the connection classes under the requests
  adapter resolve the host, check every address, and connect to a checked address while the
  ``Host`` header, SNI and certificate checks keep the name. The address checked is the
  address connected to, so a name that rebinds to a private address after registration fails.

The guarded client never uses a proxy (``trust_env`` off, no ``proxies``): the dial check
cannot see the connection a proxy makes. Redirects are never followed.

A caller-supplied ``requests.Session`` whose adapters are all plain ``HTTPAdapter`` s (and
which names no proxies) is cloned with guarded adapters of the same pool settings. Any other
session (a custom adapter, configured proxies) keeps its own routing and gets a
**resolve-then-check** guard instead (:class:`CheckedClient`): the host is resolved and checked
just before the request, and the adapter resolves it again to connect. Caveat: a DNS name that
rebinds between those two lookups (a short TTL answering public, then private) passes that
guard. Use the default client, or a plain session, where that matters.
"""

from __future__ import annotations

import copy
import ipaddress
import re
import socket
import typing as t
from collections import OrderedDict
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError
from urllib3.util import connection as u3connection

from . import deadline

IPAddress = t.Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
#: ``resolver(host) -> addresses`` (IP literals as strings); the seam tests replace.
Resolver = t.Callable[[str], t.Sequence[str]]

_CGNAT: t.Final = ipaddress.ip_network("100.64.0.0/10")
_V4_COMPAT: t.Final = ipaddress.ip_network("::/96")
#: IPv6 prefixes whose last 32 bits are an IPv4 address, judged by that address: IPv4-mapped
#: (``::ffff:a.b.c.d``), IPv4-translated (``::ffff:0:a.b.c.d``, RFC 2765) and the well-known
#: NAT64 prefix (RFC 6052). 6to4 (``2002::/16``, bits 16-47) is read by ``ipaddress``;
#: IPv4-compatible ``::/96`` past ``::`` and ``::1`` in :func:`_embedded_v4`.
_WRAPS_V4: t.Final = tuple(
    ipaddress.ip_network(prefix) for prefix in ("::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96")
)
#: IPv6 prefixes refused whole, with why. In the local-use NAT64 prefix (RFC 8215) the network
#: chooses where the IPv4 address sits, so no check can read it; IANA lists it as not globally
#: reachable (Python 3.13's ``ipaddress`` calls it private, older releases global).
_REFUSED_V6: t.Final = (
    (
        ipaddress.ip_network("64:ff9b:1::/48"),
        "is in the local-use NAT64 prefix 64:ff9b:1::/48, which is not globally reachable",
    ),
)
#: inet_aton spellings of IPv4 (``127.1``, ``0x7f.0.0.1``, ``2130706433``).
_V4_SHORTHAND: t.Final = re.compile(r"^(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+)){0,3}$", re.I)


class RefusedURLError(ValueError):
    """A push URL the policy refuses; the message says why, for the caller."""


class RefusedAddressError(NewConnectionError):
    """A dial-time refusal: the host resolved to an address the policy refuses."""

    def __init__(self, host: str, reason: str) -> None:
        # NewConnectionError wants the connection; the message is what gets logged.
        super().__init__(None, f"a2a: push address refused: {host} {reason}")  # type: ignore[arg-type]


def system_resolver(host: str) -> list[str]:
    """Every address ``host`` resolves to for a TCP connection, in resolver order."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def literal_ip(host: str) -> IPAddress | None:
    """The address ``host`` spells, if it is an IP literal (shorthand IPv4 included)."""
    bare = host.strip("[]")
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if _V4_SHORTHAND.match(bare):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(bare))
        except OSError:
            return None
    return None


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in prefix for prefix in _WRAPS_V4) or (ip in _V4_COMPAT and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refusal(ip: IPAddress) -> str | None:
    """Why ``ip`` is not a push target (None when it is a public unicast address)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            ip = ipaddress.IPv6Address(ip.compressed.split("%", 1)[0])
        for prefix, reason in _REFUSED_V6:
            if ip in prefix:
                return reason
        inner = _embedded_v4(ip)
        if inner is not None:
            why = refusal(inner)
            return f"embeds {inner}, which {why}" if why else None
    if ip.is_unspecified:
        return "is unspecified"
    if ip.is_loopback:
        return "is loopback"
    if ip.is_link_local:
        return "is link-local"
    if ip.is_multicast:
        return "is multicast"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "is in the CGNAT range 100.64.0.0/10"
    if ip.is_private:
        return "is a private address"
    if not ip.is_global:
        return "is not a globally routable address"
    return None


class AddressPolicy:
    """Resolves push hosts and checks their addresses (everything passes with ``allow_private``)."""

    def __init__(self, resolver: Resolver | None = None, allow_private: bool = False) -> None:
        self.resolver = resolver or system_resolver
        self.allow_private = allow_private

    def addresses(self, host: str) -> list[str]:
        """The addresses to connect to for ``host``; raises if any of them is refused."""
        ip = literal_ip(host)
        found = [str(ip)] if ip is not None else list(self.resolver(host))
        if not found:
            raise OSError(f"{host} resolves to no address")
        if not self.allow_private:
            for address in found:
                why = refusal(ipaddress.ip_address(address))
                if why is not None:
                    shown = host if address == host.strip("[]") else f"{host} ({address})"
                    raise RefusedAddressError(shown, why)
        return found


def check_url(url: str, policy: AddressPolicy) -> None:
    """Refuse a push URL at registration: scheme, shape, and the addresses its host has now.

    A name that does not resolve yet is accepted (the dial-time guard still checks it).
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError on a port out of range
    except ValueError as exc:
        raise RefusedURLError(f"push URL is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise RefusedURLError("push URL must use http or https")
    host = parts.hostname
    if not host:
        raise RefusedURLError("push URL has no host")
    if parts.username is not None or parts.password is not None:
        raise RefusedURLError("push URL must not carry credentials; use authentication")
    if policy.allow_private:
        return
    ip = literal_ip(host)
    try:
        found = [str(ip)] if ip is not None else list(policy.resolver(host))
    except (OSError, UnicodeError):
        return
    for address in found:
        why = refusal(ipaddress.ip_address(address))
        if why is not None:
            named = host if address == host.strip("[]") else f"{host} resolves to {address}, which"
            raise RefusedURLError(
                f"push URL host {named} {why}; private push targets are refused "
                "(A2A_ALLOW_PRIVATE_PUSH allows them)"
            )


# --------------------------------------------------------------------------- dial time


def _guarded_conn(self: HTTPConnection, policy: AddressPolicy) -> socket.socket:
    """Resolve, check, connect to a checked address; the name stays for Host, SNI and certs."""
    try:
        addresses = policy.addresses(self._dns_host)
    except RefusedAddressError as exc:
        exc.conn = self
        raise
    except (OSError, UnicodeError) as exc:
        raise NewConnectionError(self, f"Failed to resolve {self.host}: {exc}") from exc
    error: OSError | None = None
    bound = self.timeout if isinstance(self.timeout, (int, float)) else None
    for address in addresses:
        timeout = deadline.left(bound)  # the connect bound, within the attempt's deadline
        if timeout == 0:
            raise NewConnectionError(self, "the attempt's deadline passed while connecting")
        try:
            sock = u3connection.create_connection(
                (address, self.port),
                self.timeout if timeout is None else timeout,
                source_address=self.source_address,
                socket_options=self.socket_options,
            )
        except OSError as exc:
            error = exc
            continue
        deadline.watch(sock)
        return sock
    raise NewConnectionError(self, f"Failed to establish a new connection: {error}")


def _pool_classes(policy: AddressPolicy) -> dict[str, type[HTTPConnectionPool]]:
    """Pool classes whose connections dial through ``policy``."""

    class Conn(HTTPConnection):
        def _new_conn(self) -> socket.socket:
            return _guarded_conn(self, policy)

        def putrequest(self, *args: t.Any, **kwargs: t.Any) -> None:
            if self.sock is not None:  # a kept-alive connection: this attempt's deadline too
                deadline.watch(self.sock)
            super().putrequest(*args, **kwargs)

    class SConn(HTTPSConnection):
        def _new_conn(self) -> socket.socket:
            return _guarded_conn(self, policy)

        def putrequest(self, *args: t.Any, **kwargs: t.Any) -> None:
            if self.sock is not None:
                deadline.watch(self.sock)
            super().putrequest(*args, **kwargs)

    class Pool(HTTPConnectionPool):
        ConnectionCls = Conn

    class SPool(HTTPSConnectionPool):
        ConnectionCls = SConn

    return {"http": Pool, "https": SPool}


class GuardedAdapter(HTTPAdapter):
    """An ``HTTPAdapter`` that checks every address at dial time and never uses a proxy."""

    def __init__(self, policy: AddressPolicy, **kwargs: t.Any) -> None:
        self.policy = policy
        super().__init__(**kwargs)

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: t.Any
    ) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = _pool_classes(self.policy)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: t.Any) -> t.Any:
        raise requests.exceptions.InvalidProxyURL("a2a: the guarded push client never uses a proxy")


def guarded_session(
    policy: AddressPolicy, base: requests.Session | None = None
) -> requests.Session:
    """A session whose adapters are guarded: a fresh one, or a clone of a plain ``base``."""
    session = copy.copy(base) if base is not None else requests.Session()
    adapters = (
        base.adapters
        if base is not None
        else OrderedDict(
            (prefix, HTTPAdapter(pool_maxsize=16)) for prefix in ("https://", "http://")
        )
    )
    session.adapters = OrderedDict()
    for prefix, adapter in adapters.items():
        assert isinstance(adapter, HTTPAdapter)
        session.mount(
            prefix,
            GuardedAdapter(
                policy,
                pool_connections=adapter._pool_connections,  # type: ignore[attr-defined]
                pool_maxsize=adapter._pool_maxsize,  # type: ignore[attr-defined]
                pool_block=adapter._pool_block,  # type: ignore[attr-defined]
                max_retries=0,  # one attempt, whatever the base said
            ),
        )
    session.trust_env = False
    session.proxies = {}
    return session


def is_plain(session: requests.Session) -> bool:
    """Every adapter is exactly ``HTTPAdapter`` and the session names no proxies."""
    return not session.proxies and all(
        type(adapter) is HTTPAdapter for adapter in session.adapters.values()
    )


class PushClient(t.Protocol):
    def post(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> t.Any:
        """POST once, no redirects; returns the ``requests.Response`` with its body unread
        (``stream``: the caller reads what it wants of it, then closes it)."""


class GuardedClient:
    """Posts through a session whose adapters check the address at dial time."""

    def __init__(self, session: requests.Session) -> None:
        self.session = session

    def post(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> t.Any:
        return self.session.post(
            url,
            data=body,
            headers=headers,
            timeout=timeout,
            allow_redirects=False,
            proxies={},
            stream=True,
        )


class CheckedClient:
    """Resolve-then-check around a session with its own routing (see the module docstring)."""

    def __init__(self, session: requests.Session, policy: AddressPolicy) -> None:
        self.session = session
        self.policy = policy

    def post(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> t.Any:
        host = urlsplit(url).hostname or ""
        try:
            self.policy.addresses(host)
        except RefusedAddressError as exc:
            raise requests.exceptions.ConnectionError(str(exc)) from None
        except (OSError, UnicodeError) as exc:
            raise requests.exceptions.ConnectionError(f"Failed to resolve {host}: {exc}") from None
        return self.session.post(
            url, data=body, headers=headers, timeout=timeout, allow_redirects=False, stream=True
        )


def build_client(session: requests.Session | None, policy: AddressPolicy) -> PushClient:
    """The push client: guarded by default and for plain sessions, checked otherwise."""
    if session is None or is_plain(session):
        return GuardedClient(guarded_session(policy, session))
    return CheckedClient(session, policy)
