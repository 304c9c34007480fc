"""A database endpoint a test controls: it hangs (accepts, never answers), drops (accepts and
closes at once, as a database going down does), stalls (holds what it was sent and delivers it
once it forwards again, as a frozen server or a partitioned network does), or forwards to the
real server, switched at any moment. It stands in for PostgreSQL or MariaDB on a free loopback
port; the shared servers are never touched."""

from __future__ import annotations

import socket
import threading
import typing as t

from tests.live_server import HOST

HANG: t.Final = "hang"
DROP: t.Final = "drop"
FORWARD: t.Final = "forward"
STALL: t.Final = "stall"


class FaultyDatabase:
    """A TCP listener on 127.0.0.1 whose behaviour is :attr:`mode` when a client connects.

    :param target: (host, port) that ``forward`` connects to.
    """

    def __init__(self, mode: str = HANG, target: tuple[str, int] | None = None) -> None:
        self._mode = mode
        self.target = target
        self._server = socket.create_server((HOST, 0), backlog=128)
        self.port = self._server.getsockname()[1]
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        #: Notified when :attr:`mode` changes (a stalled pipe waits on it).
        self._moved = threading.Condition()
        self._closed = False
        #: Connections accepted so far (a test awaits a client's connect attempt on it).
        self.accepted = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, mode: str) -> None:
        with self._moved:
            self._mode = mode
            self._moved.notify_all()

    def url(self, real_url: str) -> str:
        """``real_url`` with its host and port replaced by this listener's."""
        import sqlalchemy as sa

        url = sa.engine.make_url(real_url).set(host=HOST, port=self.port)
        return url.render_as_string(hide_password=False)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            self.accepted += 1
            if self.mode == DROP:
                client.close()
            elif self.mode in (FORWARD, STALL) and self.target is not None:
                threading.Thread(target=self._forward, args=(client,), daemon=True).start()
            else:
                with self._lock:
                    self._held.append(client)  # read nothing, answer nothing

    def _forward(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(t.cast(tuple[str, int], self.target), timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            self._held.extend((client, upstream))
        threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()
        self._pipe(client, upstream)

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        """Copy until either side closes, then close both; while :attr:`mode` is ``hang``,
        what arrives is swallowed (a connection made earlier stops getting answers); while it
        is ``stall``, it is held and sent once the mode changes (what a client wrote before it
        gave up still reaches the server: an INSERT is then stored after all)."""
        try:
            while data := source.recv(65536):
                with self._moved:
                    while self._mode == STALL and not self._closed:
                        self._moved.wait(1.0)
                if self._closed:
                    break
                if self.mode != HANG:
                    sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.close()
                except OSError:
                    pass

    def close(self) -> None:
        with self._moved:
            self._closed = True
            self._moved.notify_all()
        self._server.close()
        with self._lock:
            held, self._held = self._held, []
        for sock in held:
            try:
                sock.close()
            except OSError:
                pass
