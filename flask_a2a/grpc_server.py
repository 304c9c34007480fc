"""The gRPC server: ``lf.a2a.v1.A2AService`` on grpcio's own server, beside the app's web workers.

WSGI has no HTTP/2, and grpcio is not made to run under gevent's monkey-patching, so gRPC is
served by grpcio's threaded server: in a process of its own (``flask a2a grpc``), sharing the
SQL store and the Redis bus with the web workers, or for development in one process with the
app's own web server and the memory store (``flask a2a grpc --http``). Needs the ``grpc`` extra.

Each RPC runs inside a request context of the app built from its metadata (a WSGI environ
for ``POST A2A_PATH``, ``app.request_context``): the host's before-request hooks, its
principal hook and the helpers of ``flask_a2a.auth`` read ``authorization`` and every other
metadata entry as the request's headers, exactly as over HTTP; a hook that answers instead
refuses the call as the other bindings refuse it (an ``abort(403)`` PERMISSION_DENIED, a login
redirect UNAUTHENTICATED). The binding
(``bindings/grpc_binding.py``) does the rest.
"""

from __future__ import annotations

import functools
import io
import logging
import sys
import typing as t
from concurrent import futures
from urllib.parse import urlsplit

import grpc
from flask import Flask, Response
from grpc_status import rpc_status
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES

from .agents import agents
from .bindings import grpc_binding
from .bindings.grpc_binding import RPCS, SERVICE, Refusal, Rpc
from .exchange.calls import HTTPRequest
from .exchange.runner import gevent_patched
from .protocol.errors import A2AError, UnauthenticatedError, host_refusal
from .protocol.model import Principal
from .protocol.pages import answer_text
from .protocol.scrub import scrub
from .versions import check_versions

if t.TYPE_CHECKING:
    from google.protobuf.message import Message

    from .state import A2AState

#: Public (docs/api.md, "Where names live"); the rest of this module is private.
__all__ = ["GrpcServer", "serve"]

log = logging.getLogger("flask_a2a")

#: Where ``flask a2a grpc`` listens without ``--bind``.
DEFAULT_BIND: t.Final = "127.0.0.1:50051"
#: The request URL an RPC's request has when ``A2A_PUBLIC_BASE_URL`` is unset.
DEFAULT_BASE_URL: t.Final = "http://localhost"


class GrpcServer:
    """``lf.a2a.v1.A2AService`` for one agent of ``app`` on ``bind`` (``host:port``; port 0
    takes a free one: see :attr:`port`), on ``threads`` threads (``A2A_GRPC_THREADS``).

    ``credentials``: ``grpc.ssl_server_credentials(...)`` to serve TLS; plaintext otherwise.
    """

    def __init__(
        self,
        app: Flask,
        bind: str = DEFAULT_BIND,
        *,
        agent: str | None = None,
        threads: int | None = None,
        credentials: grpc.ServerCredentials | None = None,
    ) -> None:
        check_versions("grpc")  # a grpcio or SDK below its floor: one ConfigError naming it
        if gevent_patched():
            raise RuntimeError(
                "the gRPC server runs on threads, and this process is monkey-patched by gevent: "
                "run `flask a2a grpc` in its own process, not under gunicorn -k gevent"
            )
        registry = agents(app)
        state = registry.get(agent) if agent is not None else registry.first()
        if state is None:
            raise RuntimeError(f"A2A is not registered on the app {app.name!r}")
        settings = state.settings
        self.threads = threads or settings.grpc_threads
        self.service = Service(app, state)
        self._server = grpc.server(
            futures.ThreadPoolExecutor(self.threads, thread_name_prefix="a2a-grpc"),
            handlers=[grpc.method_handlers_generic_handler(SERVICE, self.service.handlers())],
            # Past the threads an RPC is refused at once (RESOURCE_EXHAUSTED), not queued.
            maximum_concurrent_rpcs=self.threads,
            options=[
                # The message-size cap of the other bindings; grpcio refuses a larger message
                # (RESOURCE_EXHAUSTED) before the binding sees a byte of it.
                ("grpc.max_receive_message_length", settings.max_body_bytes),
                # A port another server holds is an error, not a silent share (Linux).
                ("grpc.so_reuseport", 0),
            ],
        )
        try:
            if credentials is None:
                self.port = self._server.add_insecure_port(bind)
            else:
                self.port = self._server.add_secure_port(bind, credentials)
        except RuntimeError as exc:  # grpcio 1.60+: "Failed to bind to address ..."
            raise RuntimeError(f"the gRPC server cannot listen on {bind}: {exc}") from None
        if not self.port:  # older grpcio: 0 for a bind that failed
            raise RuntimeError(f"the gRPC server cannot listen on {bind}")
        host = bind.rpartition(":")[0] or "127.0.0.1"
        #: ``host:port`` as bound (the port chosen when ``bind`` asked for port 0).
        self.address = f"{host}:{self.port}"

    def start(self) -> GrpcServer:
        self._server.start()
        log.info("a2a: gRPC server on %s (%d threads)", self.address, self.threads)
        return self

    def stop(self, grace: float | None = None) -> None:
        """Refuse new RPCs, give the ones in flight ``grace`` seconds, then cancel them (an
        open stream's seat is freed as its call is cancelled)."""
        self._server.stop(grace).wait()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops (True) or ``timeout`` passes (False)."""
        return bool(self._server.wait_for_termination(timeout))


class Service:
    """The RPC behaviours of one agent: each RPC inside a request context made of its metadata."""

    def __init__(self, app: Flask, state: A2AState) -> None:
        self.app = app
        self.state = state
        base = urlsplit(state.settings.public_base_url or DEFAULT_BASE_URL)
        self.host = base.netloc
        scheme = base.scheme or "http"
        port = base.port or (443 if scheme == "https" else 80)
        #: What every RPC's request has in common: ``POST A2A_PATH`` on the public base URL.
        self.base_environ: dict[str, t.Any] = {
            "REQUEST_METHOD": "POST",
            "SCRIPT_NAME": base.path.rstrip("/"),
            "PATH_INFO": state.settings.path,
            "QUERY_STRING": "",
            "SERVER_NAME": base.hostname or "localhost",
            "SERVER_PORT": str(port),
            "SERVER_PROTOCOL": "HTTP/2",
            "HTTP_HOST": self.host,
            "CONTENT_LENGTH": "0",
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": scheme,
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }

    def environ(self, headers: t.Sequence[tuple[str, str]], address: str) -> dict[str, t.Any]:
        """The WSGI environ of an RPC's request: its metadata as headers (a key given twice is
        one header of both values, as WSGI joins them), its peer as ``REMOTE_ADDR``."""
        environ = dict(self.base_environ)
        environ["wsgi.input"] = io.BytesIO(b"")
        environ["REMOTE_ADDR"] = address
        for key, value in headers:
            name = key.upper().replace("-", "_")
            if name not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                name = "HTTP_" + name
            if name == "HTTP_HOST" or name == "CONTENT_LENGTH":
                continue  # the request's own, not the caller's to set
            environ[name] = f"{environ[name]},{value}" if name in environ else value
        return environ

    def handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        """The method name -> its grpcio handler, for every RPC of the service."""
        out = {}
        for name, rpc in RPCS.items():
            options: dict[str, t.Any] = {
                "request_deserializer": rpc.request.FromString,
                "response_serializer": rpc.response.SerializeToString,
            }
            if rpc.streaming:
                behaviour = functools.partial(self.stream, rpc)
                out[name] = grpc.unary_stream_rpc_method_handler(behaviour, **options)
            else:
                behaviour = functools.partial(self.unary, rpc)
                out[name] = grpc.unary_unary_rpc_method_handler(behaviour, **options)
        return out

    def unary(self, rpc: Rpc, request: Message, context: grpc.ServicerContext) -> Message:
        answer = self._answer(rpc, request, context)
        if answer.metadata:
            context.send_initial_metadata(answer.metadata)
        return t.cast("Message", answer.message)

    def stream(
        self, rpc: Rpc, request: Message, context: grpc.ServicerContext
    ) -> t.Iterator[Message]:
        answer = self._answer(rpc, request, context)
        body = t.cast(t.Any, answer.stream).body
        # A cancelled call (the client left, its deadline passed, the server stops) frees the
        # seat at once and wakes the relay, wherever it waits; called on any end, it is then
        # a no-op.
        if not context.add_callback(body.client_left):
            body.client_left()
        if answer.metadata:
            context.send_initial_metadata(answer.metadata)
        try:
            yield from grpc_binding.events_of(body)
        except Refusal as refused:  # the stream's caller no longer resolves
            context.abort_with_status(rpc_status.to_status(refused.status))
        finally:
            body.close()

    def _answer(
        self, rpc: Rpc, request: Message, context: grpc.ServicerContext
    ) -> grpc_binding.Answer:
        headers = headers_of(context.invocation_metadata())
        address = peer_address(context.peer())
        try:
            with self.app.request_context(self.environ(headers, address)):
                http = GrpcRequest(self, _Refresh(self, headers, address))
                return grpc_binding.handle(
                    http, self.state.exchange.methods, self.state.exchange.extensions, rpc, request
                )
        except Refusal as refused:
            if refused.metadata:
                context.send_initial_metadata(refused.metadata)
            context.abort_with_status(rpc_status.to_status(refused.status))
            raise  # abort_with_status raised already; this line only tells mypy

    def resolve(self) -> Principal | None:
        """The caller, in the RPC's request context: the host's before-request hooks first (as
        Flask runs them before a view), then its principal hook. A hook that answers instead
        refuses the call as the other bindings answer it (``host_refusals.py``): its
        ``abort(403, "banned")`` is PERMISSION_DENIED with the host's words, a page it returns
        the error of its status, a redirect (a login hook's) UNAUTHENTICATED naming where."""
        try:
            answered = self.app.preprocess_request()
        except HTTPException as exc:
            words = f"{exc.name}: {exc.description}" if exc.description else exc.name
            raise host_refusal(exc.code or 500, words) from None
        if answered is not None:
            raise _refusal_of(self.app.make_response(answered))
        return self.state.resolve_principal()


class GrpcRequest(HTTPRequest):
    """The exchange's view of an RPC: its metadata as the headers, no body (grpcio decoded the
    message), the caller resolved in the RPC's request context."""

    def __init__(self, service: Service, refresh: t.Callable[[], Principal | None]) -> None:
        from flask import request

        super().__init__(
            "POST",
            request.headers,
            service.host,
            None,
            _no_body,
            service.resolve,
            principal_refresher=lambda: refresh,
            environ=request.environ,  # where the call came from, for a run's re-entry
        )


def _refusal_of(response: Response) -> A2AError:
    """The error a page (or a redirect) returned by a host's hook stands for."""
    status = response.status_code
    if status < 400:
        where = scrub(response.headers.get("Location", "?"))[:300]
        phrase = HTTP_STATUS_CODES.get(status, "Redirect")
        return UnauthenticatedError(f"{phrase}: the app redirected it to {where}")
    words = answer_text(response.get_data()[:65536], response.mimetype or "")
    return host_refusal(status, words or HTTP_STATUS_CODES.get(status, "Refused"))


def _no_body(size: int) -> bytes:
    return b""


class _Refresh:
    """A stream's caller re-check at keep-alives: the RPC's metadata in a fresh request
    context, through the same hooks."""

    __slots__ = ("service", "headers", "address")

    def __init__(
        self, service: Service, headers: t.Sequence[tuple[str, str]], address: str
    ) -> None:
        self.service = service
        self.headers = headers
        self.address = address

    def __call__(self) -> Principal | None:
        service = self.service
        with service.app.request_context(service.environ(self.headers, self.address)):
            try:
                return service.resolve()
            except A2AError:  # a hook refuses the caller now: the stream ends
                return None


def headers_of(metadata: t.Iterable[t.Any] | None) -> list[tuple[str, str]]:
    """An RPC's metadata as request headers: every text entry (gRPC keys are lowercase; the
    request's headers are case-insensitive), in order; binary (``-bin``) entries are left out."""
    out = []
    for key, value in metadata or ():
        if isinstance(value, str) and not key.endswith("-bin"):
            out.append((key, value))
    return out


def peer_address(peer: str) -> str:
    """The client's address from grpcio's peer (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``),
    for the request's ``REMOTE_ADDR``; ``""`` for anything else (a Unix socket)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return ""


def serve(
    app: Flask,
    bind: str = DEFAULT_BIND,
    *,
    agent: str | None = None,
    threads: int | None = None,
    credentials: grpc.ServerCredentials | None = None,
) -> GrpcServer:
    """Start the gRPC server of ``app``'s agent on ``bind`` and return it (running, in the
    background: its threads are grpcio's). Call ``stop()`` to end it."""
    return GrpcServer(app, bind, agent=agent, threads=threads, credentials=credentials).start()
