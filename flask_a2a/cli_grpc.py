"""``flask a2a grpc``: serve the agent over gRPC from its own process (``grpc_server.py``), or,
with ``--http``, serve the web app from the same process too (development, the memory store).

Imports nothing of the ``grpc`` extra until the command runs, so ``flask a2a`` works without it.
"""

from __future__ import annotations

import signal
import threading
import typing as t

import click
from flask import current_app
from flask.cli import with_appcontext

from .config import ConfigError
from .store.base import holds_nothing_at_rest
from .store.choice import chosen_store
from .wiring import shutdown_all

if t.TYPE_CHECKING:
    from flask import Flask

    from .state import A2AState

#: What the command says when the extra is missing.
MISSING_EXTRA: t.Final = (
    "flask a2a grpc needs the grpc extra (Python 3.10+): pip install 'flask-a2a[grpc]'"
)


def _address(value: str, name: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise click.BadParameter(f"HOST:PORT, got {value!r}", param_hint=name)
    return host.strip("[]"), int(port)


@click.command("grpc")
@click.option(
    "--bind",
    default="127.0.0.1:50051",
    show_default=True,
    metavar="HOST:PORT",
    help="Where the gRPC server listens (the card lists A2A_GRPC_URL, which is where clients "
    "reach it).",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    help="RPCs served at once (an open stream holds one); default A2A_GRPC_THREADS.",
)
@click.option(
    "--http",
    metavar="HOST:PORT",
    help="Development: also serve the web app from this process (Werkzeug's threaded server), "
    "so both share the memory store.",
)
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), help="PEM certificate.")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), help="PEM private key.")
@with_appcontext
def grpc_command(
    bind: str,
    threads: int | None,
    http: str | None,
    tls_cert: str | None,
    tls_key: str | None,
) -> None:
    """Serve the agent's lf.a2a.v1.A2AService over gRPC until SIGTERM or Ctrl+C."""
    try:
        from . import grpc_server
    except ImportError as exc:
        raise click.ClickException(f"{MISSING_EXTRA} ({exc})") from None
    from .cli import _state

    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    state = _state()
    _address(bind, "--bind")
    credentials = None
    if bool(tls_cert) != bool(tls_key):
        raise click.BadParameter("give both --tls-cert and --tls-key", param_hint="--tls-cert")
    if tls_cert and tls_key:
        import grpc

        with open(tls_key, "rb") as key, open(tls_cert, "rb") as cert:
            credentials = grpc.ssl_server_credentials([(key.read(), cert.read())])
    try:
        server = grpc_server.GrpcServer(
            app, bind, agent=state.name, threads=threads, credentials=credentials
        )
    except (RuntimeError, ConfigError) as exc:
        raise click.ClickException(str(exc)) from None
    web = _web_server(app, http) if http else None
    _warn_alone(state, web is not None)
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    server.start()
    click.echo(f"gRPC: lf.a2a.v1.A2AService of agent {state.name!r} on {server.address}")
    if web is not None:
        threading.Thread(target=web.serve_forever, name="a2a-grpc-http", daemon=True).start()
        click.echo(f"HTTP: the web app on http://{http}")
    if not state.settings.grpc_url:
        click.echo("(A2A_GRPC_URL is unset: the agent card lists no GRPC interface)", err=True)
    while not stopping.wait(1.0):  # a signal handler runs between two waits
        pass
    click.echo("stopping", err=True)
    if web is not None:
        web.shutdown()
    server.stop(state.settings.shutdown_timeout)
    # Then this process's runs end CANCELED, now: at exit the interpreter would first join
    # the threads running them (and a blocking send waiting for one), before any exit hook.
    shutdown_all()


def _web_server(app: Flask, http: str) -> t.Any:
    from werkzeug.serving import make_server

    host, port = _address(http, "--http")
    return make_server(host, port, app, threaded=True)


def _warn_alone(state: A2AState, with_web: bool) -> None:
    """The memory store in a gRPC process of its own shares nothing with the web workers."""
    store = chosen_store(state.exchange.store)
    if holds_nothing_at_rest(store) and not with_web:
        click.echo(
            "warning: the memory store: tasks sent over gRPC are seen only by this process. "
            "Share the SQL store (A2A_DATABASE_URL) and the Redis bus (A2A_REDIS_URL) with "
            "the web workers, or serve both from here with --http (development).",
            err=True,
        )
