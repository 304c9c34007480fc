"""Webhook receivers that attack the sender, on raw sockets at 127.0.0.1 (a free port).

``Drip`` reads each request, then answers one byte every ``pause`` seconds (after answering
the first ``prompt`` requests of a connection at once, so the sender keeps it alive and reuses
it; over TLS with ``tls``, a context from :func:`tls_for_loopback`); ``Flood`` answers 200
with a body of ``size`` bytes, made as it is sent. Each connection is a :class:`Seen`: when it
came, when each request on it came, when the sender closed it, how many bytes the receiver
managed to send. Every loop is bounded (``LIMIT`` seconds a connection at most), and
``close()`` ends them all.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import socket
import ssl
import threading
import time
import typing as t

#: No connection is served longer than this, whatever the sender does.
LIMIT: t.Final = 30.0
#: The answer a dripping receiver sends, one byte at a time (it never gets to the end of it).
DRIP_ANSWER: t.Final = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + b" " * 4096
#: A whole answer, sent at once, on a connection kept alive.
PROMPT_ANSWER: t.Final = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


@dataclasses.dataclass
class Seen:
    """One connection: when it came and was closed by the sender (monotonic), bytes sent."""

    at: float
    closed_at: float | None = None
    sent: int = 0
    #: When each request on the connection had come in whole.
    requests: list[float] = dataclasses.field(default_factory=list)

    @property
    def held(self) -> float | None:
        return None if self.closed_at is None else self.closed_at - self.at


class _Receiver:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(0.1)
        self.port = int(self._listener.getsockname()[1])
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                continue
            seen = Seen(time.monotonic())
            with self._cond:
                self.seen.append(seen)
                self._cond.notify_all()
            threading.Thread(target=self._serve, args=(conn, seen), daemon=True).start()

    def _serve(self, conn: socket.socket, seen: Seen) -> None:
        try:
            self.serve(conn, seen)
        except OSError:
            pass
        finally:
            conn.close()
            with self._cond:
                seen.closed_at = seen.closed_at or time.monotonic()
                self._cond.notify_all()

    def serve(self, conn: socket.socket, seen: Seen) -> None:
        raise NotImplementedError

    def request(self, conn: socket.socket, seen: Seen) -> bool:
        """Read one request whole; False if the sender went away first."""
        if not _read_request(conn):
            return False
        seen.requests.append(time.monotonic())
        return True

    def closed(self, seen: Seen) -> None:
        """The sender closed the connection (seen by the receiver now)."""
        with self._cond:
            seen.closed_at = time.monotonic()
            self._cond.notify_all()

    def wait_for(self, count: int, *, closed: bool = False, timeout: float = 10.0) -> list[Seen]:
        """At least ``count`` connections (closed ones, with ``closed``); fails past timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [s for s in self.seen if not closed or s.closed_at is not None]
                if len(got) >= count:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(got)} of {count} connections in {timeout} s")
                self._cond.wait(left)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()


def _read_request(conn: socket.socket) -> bool:
    """Read one request's head and body (Content-Length); False if the sender went away."""
    conn.settimeout(LIMIT)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        body += chunk
    return True


class Drip(_Receiver):
    """Answers one byte every ``pause`` seconds until the sender closes (or ``LIMIT``)."""

    def __init__(
        self, pause: float = 0.5, *, prompt: int = 0, tls: ssl.SSLContext | None = None
    ) -> None:
        self.pause = pause
        self.prompt = prompt
        self.tls = tls
        super().__init__()

    def url(self, path: str = "/hook") -> str:
        return super().url(path).replace("http:", "https:") if self.tls else super().url(path)

    def serve(self, conn: socket.socket, seen: Seen) -> None:
        if self.tls is None:
            self.answer(conn, seen)
            return
        conn.settimeout(LIMIT)
        with self.tls.wrap_socket(conn, server_side=True) as wrapped:
            self.answer(wrapped, seen)

    def answer(self, conn: socket.socket, seen: Seen) -> None:
        for _ in range(self.prompt):
            if not self.request(conn, seen):
                return
            conn.sendall(PROMPT_ANSWER)
        if self.request(conn, seen):
            self.drip(conn, seen, DRIP_ANSWER)

    def drip(self, conn: socket.socket, seen: Seen, answer: bytes) -> None:
        conn.settimeout(self.pause)
        end = time.monotonic() + LIMIT
        for byte in answer:
            if self._stop.is_set() or time.monotonic() > end:
                return
            conn.sendall(bytes([byte]))
            seen.sent += 1
            try:  # the pause, cut short by the sender closing (end of stream)
                if conn.recv(1) == b"":
                    self.closed(seen)
                    return
            except socket.timeout:
                continue


class Flood(_Receiver):
    """Answers 200 with a ``size``-byte body, generated as it goes, until the sender closes."""

    CHUNK: t.Final = 65536

    def __init__(self, size: int) -> None:
        self.size = size
        super().__init__()

    def serve(self, conn: socket.socket, seen: Seen) -> None:
        if self.request(conn, seen):
            self.flood(conn, seen)

    def flood(self, conn: socket.socket, seen: Seen) -> None:
        # A small send buffer, so what counts as sent is about what the sender took.
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.CHUNK)
        conn.settimeout(LIMIT)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % self.size)
        chunk = bytes(self.CHUNK)
        end = time.monotonic() + LIMIT
        while seen.sent < self.size and not self._stop.is_set() and time.monotonic() < end:
            try:
                seen.sent += conn.send(chunk[: self.size - seen.sent])
            except OSError:  # reset or broken pipe: the sender closed it
                self.closed(seen)
                return


def tls_for_loopback(directory: str) -> tuple[ssl.SSLContext, str]:
    """A server context for 127.0.0.1 and the CA file a client trusts it with (written into
    ``directory``): a throwaway CA and a certificate it signed."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "a2a test CA")])
    usage = dict.fromkeys(
        ("content_commitment", "data_encipherment", "key_agreement", "encipher_only"), False
    )
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False, key_cert_sign=True, crl_sign=True, decipher_only=False,
                key_encipherment=False, **usage,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_file, cert_file, key_file = (f"{directory}/{name}" for name in ("ca", "cert", "key"))
    with open(ca_file, "wb") as out:
        out.write(ca.public_bytes(pem))
    with open(cert_file, "wb") as out:
        out.write(cert.public_bytes(pem))
    with open(key_file, "wb") as out:
        out.write(
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    return context, ca_file
