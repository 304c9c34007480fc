"""The gRPC binding's tests: a real grpcio server on 127.0.0.1 (port 0) for a test's app, and
the official SDK's stub. The whole directory is skipped, saying why, without the ``grpc`` extra
(it needs Python 3.10+ and pydantic 2, which the floors and CTFd environments do not have)."""

from __future__ import annotations

import contextlib
import typing as t

import pytest

pytest.importorskip(
    "grpc_status", reason="the grpc extra is not installed (pip install 'flask-a2a[grpc]')"
)
pytest.importorskip("a2a.types", reason="the grpc extra is not installed (no a2a-sdk)")

import grpc  # noqa: E402
from a2a.types import a2a_pb2, a2a_pb2_grpc  # noqa: E402
from flask import Flask  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from google.rpc import error_details_pb2  # noqa: E402
from grpc_status import rpc_status  # noqa: E402

from flask_a2a.grpc_server import GrpcServer  # noqa: E402


@contextlib.contextmanager
def grpc_server(app: Flask, **options: t.Any) -> t.Iterator[GrpcServer]:
    """``app``'s agent over gRPC on a free port of 127.0.0.1, stopped after the block."""
    server = GrpcServer(app, "127.0.0.1:0", **options).start()
    try:
        yield server
    finally:
        server.stop(0)


class Caller:
    """The SDK's stub on one channel, sending ``authorization: Bearer <token>`` and
    ``a2a-version: 1.0`` unless told otherwise."""

    def __init__(self, address: str, token: str | None = "alice") -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = a2a_pb2_grpc.A2AServiceStub(self.channel)
        self.token = token

    def metadata(
        self, token: str | None = None, extra: t.Sequence[tuple[str, str]] = ()
    ) -> list[tuple[str, str]]:
        out = [("a2a-version", "1.0")]
        token = token or self.token
        if token:
            out.append(("authorization", f"Bearer {token}"))
        return out + list(extra)

    def __call__(
        self,
        method: str,
        request: t.Any,
        *,
        token: str | None = None,
        extra: t.Sequence[tuple[str, str]] = (),
        timeout: float = 10.0,
    ) -> t.Any:
        """One RPC: its answer, or the grpc.RpcError it raised (returned, not raised)."""
        try:
            return getattr(self.stub, method)(
                request, metadata=self.metadata(token, extra), timeout=timeout
            )
        except grpc.RpcError as exc:
            return exc

    def send(
        self, text: str = "hi", *, skill: str = "echo", token: str | None = None, **options: t.Any
    ) -> t.Any:
        return self("SendMessage", send_request(text, skill=skill, **options), token=token)

    def close(self) -> None:
        self.channel.close()


def message(
    text: str = "hi",
    *,
    skill: str | None = "echo",
    task_id: str | None = None,
    message_id: str | None = None,
    data: t.Any = None,
) -> a2a_pb2.Message:
    out = a2a_pb2.Message(
        message_id=message_id or f"g-{next(_ids)}",
        role=a2a_pb2.ROLE_USER,
        parts=[a2a_pb2.Part(text=text)],
    )
    if data is not None:
        json_format.ParseDict(data, out.parts.add().data)
    if skill is not None:
        out.metadata.update({"skill": skill})
    if task_id is not None:
        out.task_id = task_id
    return out


def send_request(
    text: str = "hi",
    *,
    skill: str | None = "echo",
    task_id: str | None = None,
    return_immediately: bool = False,
    tenant: str = "",
    data: t.Any = None,
) -> a2a_pb2.SendMessageRequest:
    request = a2a_pb2.SendMessageRequest(
        message=message(text, skill=skill, task_id=task_id, data=data), tenant=tenant
    )
    if return_immediately:
        request.configuration.return_immediately = True
    return request


def _counter() -> t.Iterator[int]:
    n = 0
    while True:
        n += 1
        yield n


_ids = _counter()


def refusal(answer: t.Any, code: grpc.StatusCode, reason: str) -> dict[str, t.Any]:
    """Assert ``answer`` is a refusal with ``code`` whose google.rpc.Status leads with an
    ErrorInfo of ``reason`` in domain a2a-protocol.org; returns the status as ProtoJSON."""
    assert isinstance(answer, grpc.RpcError), answer
    assert answer.code() == code, (answer.code(), answer.details())
    status = rpc_status.from_call(answer)
    assert status is not None, "no grpc-status-details-bin trailer"
    assert status.code == code.value[0]
    assert status.message == answer.details()
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert (info.reason, info.domain) == (reason, "a2a-protocol.org")
    return t.cast(dict[str, t.Any], json_format.MessageToDict(status))


@pytest.fixture
def runner_kind() -> str:
    """Threads only: the gRPC server refuses a gevent-patched process (grpcio is not made for
    it), so these cases have no gevent twin (and run in the plain session)."""
    return "threads"


@pytest.fixture
def served(make_app: t.Callable[..., Flask]) -> t.Iterator[t.Callable[..., Caller]]:
    """``served(app=None, token="alice", **server options)``: the app (a fresh default one when
    not given) served over gRPC for the test, and a caller on it."""
    stack = contextlib.ExitStack()

    def serve(app: Flask | None = None, token: str | None = "alice", **options: t.Any) -> Caller:
        server = stack.enter_context(grpc_server(app or make_app(), **options))
        caller = Caller(server.address, token)
        stack.callback(caller.close)
        return caller

    with stack:
        yield serve
