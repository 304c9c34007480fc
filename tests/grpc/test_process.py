"""``flask a2a grpc``: the gRPC server in a process of its own (threads, not gevent), its
one-process development mode (``--http``), how it starts and stops, and the core without the
extra. Each server is a real subprocess on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import typing as t
from pathlib import Path

import grpc
import pytest
import requests
from a2a.types import a2a_pb2

from tests.grpc.conftest import Caller, refusal, send_request
from tests.live_server import HOST, free_port, wait_http

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.live


class FlaskProcess:
    """``python -m flask --app examples/agent.py ARGS`` in a subprocess (its own group)."""

    def __init__(self, *args: str, env: t.Mapping[str, str] | None = None) -> None:
        self.log = tempfile.TemporaryFile(mode="w+")
        environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", "examples/agent.py", *args],
            cwd=ROOT,
            env=environ,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def wait_grpc(self, address: str, timeout: float = 30.0) -> None:
        """Until the server accepts a connection (grpcio's own readiness future)."""
        with grpc.insecure_channel(address) as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=timeout)
            except grpc.FutureTimeoutError:
                raise AssertionError(f"no gRPC server on {address}:\n{self.stop()}") from None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
                raise AssertionError(f"did not stop on {sig}:\n{self.output()}") from None
        return self.output()


@pytest.fixture
def processes() -> t.Iterator[list[FlaskProcess]]:
    started: list[FlaskProcess] = []
    yield started
    for process in started:
        if process.proc.poll() is None:
            os.killpg(process.proc.pid, signal.SIGKILL)
            process.proc.wait(5)
        process.log.close()


def test_its_own_process_serves_grpc_and_stops_on_sigterm(processes: list[FlaskProcess]) -> None:
    address = f"{HOST}:{free_port()}"
    server = FlaskProcess(
        "a2a", "grpc", "--bind", address, "--threads", "4",
        env={"FLASK_A2A_SHUTDOWN_TIMEOUT": "1"},
    )  # fmt: skip
    processes.append(server)
    server.wait_grpc(address)
    call = Caller(address, token="alice-token")
    sent = call.send("over grpc")
    assert sent.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert call("GetTask", a2a_pb2.GetTaskRequest(id=sent.task.id)).id == sent.task.id
    refusal(call.send("x", token="nobody"), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
    # A stream left open is cancelled by the stop, which still ends in time.
    stream = call.stub.SendStreamingMessage(
        send_request("", skill="countdown", data={"steps": 20, "delay": 1}),
        metadata=call.metadata(),
    )
    assert next(stream).WhichOneof("payload") == "task"
    log = server.stop()
    assert server.proc.returncode == 0, log
    assert f"on {address}" in log and "stopping" in log
    assert "warning: the memory store" in log  # alone, it shares no task with web workers
    assert "A2A_GRPC_URL is unset" in log
    with pytest.raises(grpc.RpcError) as cut:
        list(stream)
    assert cut.value.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
    call.close()


def test_one_process_for_development_shares_the_memory_store(
    processes: list[FlaskProcess],
) -> None:
    address, web = f"{HOST}:{free_port()}", f"{HOST}:{free_port()}"
    server = FlaskProcess(
        "a2a", "grpc", "--bind", address, "--http", web, env={"FLASK_A2A_GRPC_URL": address}
    )
    processes.append(server)
    server.wait_grpc(address)
    base = f"http://{web}"
    assert wait_http(base + "/.well-known/agent-card.json")
    card = requests.get(base + "/.well-known/agent-card.json", timeout=10).json()
    assert card["supportedInterfaces"][-1] == {
        "url": address,
        "protocolBinding": "GRPC",
        "protocolVersion": "1.0",
    }
    call = Caller(address, token="alice-token")
    over_grpc = call.send("sent over grpc").task.id
    auth = {"Authorization": "Bearer alice-token", "A2A-Version": "1.0"}
    read = requests.get(f"{base}/a2a/rest/tasks/{over_grpc}", headers=auth, timeout=10)
    assert read.status_code == 200 and read.json()["id"] == over_grpc
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "web-1",
                "role": "ROLE_USER",
                "parts": [{"text": "sent over http"}],
                "metadata": {"skill": "echo"},
            }
        },
    }
    over_http = requests.post(f"{base}/a2a", json=body, headers=auth, timeout=10).json()
    task_id = over_http["result"]["task"]["id"]
    assert call("GetTask", a2a_pb2.GetTaskRequest(id=task_id)).artifacts[0].parts[0].text == (
        "sent over http"
    )
    assert "warning: the memory store" not in server.output()
    call.close()
    assert server.stop() and server.proc.returncode == 0


def test_a_port_in_use_is_an_error_not_a_shared_port(processes: list[FlaskProcess]) -> None:
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind((HOST, 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        server = FlaskProcess("a2a", "grpc", "--bind", f"{HOST}:{port}")
        processes.append(server)
        assert server.proc.wait(30) == 1
        assert f"cannot listen on {HOST}:{port}" in server.output()
    finally:
        taken.close()


def test_a_gevent_patched_process_is_refused() -> None:
    script = textwrap.dedent(
        """
        from gevent import monkey
        monkey.patch_all()
        from examples.agent import create_app
        from flask_a2a.grpc_server import GrpcServer
        try:
            GrpcServer(create_app(), "127.0.0.1:0")
        except RuntimeError as exc:
            print("refused:", exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "refused: the gRPC server runs on threads" in done.stdout, done.stderr
    assert "gunicorn -k gevent" in done.stdout


def test_the_core_runs_without_the_extra(tmp_path: Path) -> None:
    """grpc cannot import (a shadow package, as where the extra is not installed): the app
    serves JSON-RPC, a card's GRPC interface is passed over by the client, ``flask a2a`` works
    and ``flask a2a grpc`` says what to install."""
    shadow = tmp_path / "grpc"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('No module named grpc (shadowed)')\n")
    (tmp_path / "grpc_status").mkdir()
    (tmp_path / "grpc_status" / "__init__.py").write_text("raise ImportError('shadowed')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    script = textwrap.dedent(
        """
        from examples.agent import create_app
        from flask_a2a.client import bindings
        from flask_a2a.client.sse import A2AClientError
        from flask_a2a.testing import A2ATestClient

        app = create_app({"A2A_GRPC_URL": "127.0.0.1:50051"})
        task = A2ATestClient(app, token="alice-token").send("hi", skill="echo")["task"]
        print("jsonrpc:", task["status"]["state"])
        card = app.test_client().get("/.well-known/agent-card.json").get_json()
        print("card:", [i["protocolBinding"] for i in card["supportedInterfaces"]])
        print("chosen:", bindings.choose(card, "http://localhost/").binding)
        only = {"supportedInterfaces": [card["supportedInterfaces"][-1]]}
        try:
            bindings.choose(only, "http://localhost/")
        except A2AClientError as exc:
            print("only grpc:", exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "jsonrpc: TASK_STATE_COMPLETED"
    assert lines[1] == "card: ['JSONRPC', 'HTTP+JSON', 'GRPC']"
    assert lines[2] == "chosen: JSONRPC"
    assert "pip install 'flask-a2a[grpc]'" in lines[3]
    flask = [sys.executable, "-m", "flask", "--app", "examples/agent.py", "a2a"]
    skills = subprocess.run(
        [*flask, "skills"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert skills.returncode == 0 and "echo" in skills.stdout, skills.stderr
    refused = subprocess.run(
        [*flask, "grpc"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 1
    assert "flask a2a grpc needs the grpc extra" in refused.stderr
