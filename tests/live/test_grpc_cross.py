"""The two-process layout of docs/grpc.md: a ``gunicorn -k gevent`` web worker and the
``flask a2a grpc`` process, one app (tests/replica_app.py) on one PostgreSQL and one Redis.

A task sent over gRPC runs in the gRPC process and is read over JSON-RPC and REST and streamed
over SSE from the web worker; a task sent over JSON-RPC or REST runs in the web worker and is
read, streamed and cancelled over gRPC (its run there cut).
"""

from __future__ import annotations

import typing as t
import uuid
from pathlib import Path

import pytest
import requests

pytest.importorskip("grpc_status", reason="the grpc extra is not installed")

import grpc  # noqa: E402
from a2a.types import a2a_pb2  # noqa: E402
from google.protobuf import json_format  # noqa: E402

from tests.conftest import pg_url, wait_for  # noqa: E402
from tests.fleet.test_replicas import ALICE, Replica, message  # noqa: E402
from tests.grpc.conftest import Caller  # noqa: E402
from tests.live_server import LiveGrpc  # noqa: E402
from tests.redis_support import REDIS_URL, SSEReader, redis_reason  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.replica_app:create_app()"


class Layout(t.NamedTuple):
    web: Replica
    grpc: LiveGrpc
    call: Caller


@pytest.fixture(scope="module")
def layout(pg_engine: t.Any) -> t.Iterator[Layout]:
    """One layout for the module (two servers take seconds to start): each test makes its own
    tasks and reads only those."""
    import redis

    from flask_a2a.store.sql import SQLStore
    from tests.live_server import free_port

    reason = redis_reason()
    if reason:
        pytest.skip(reason)
    prefix = f"a2a_{uuid.uuid4().hex[:10]}_"
    redis_prefix = f"a2a-test:{uuid.uuid4().hex[:12]}:"
    port = free_port()
    env = {
        "PYTHONPATH": str(ROOT),
        "FLASK_A2A_DATABASE_URL": pg_url(),
        "A2A_TEST_TABLE_PREFIX": prefix,
        "FLASK_A2A_REDIS_URL": REDIS_URL,
        "FLASK_A2A_REDIS_PREFIX": redis_prefix,
        "FLASK_A2A_GRPC_URL": f"127.0.0.1:{port}",
        "FLASK_A2A_KEEPALIVE_INTERVAL": "5",
    }
    web = Replica(env)
    server = None
    try:
        server = LiveGrpc(APP, chdir=str(ROOT), env=env, port=port)
        call = Caller(server.address, token="alice-token")
        yield Layout(web, server, call)
        call.close()
    finally:
        if server is not None:
            log = server.stop()
            assert "Traceback" not in log, log
        web.stop()
        SQLStore(pg_engine, prefix).drop()
        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(redis_prefix + "*"):
            client.delete(key)
        client.close()


def as_json(message_: t.Any) -> dict[str, t.Any]:
    return t.cast(dict[str, t.Any], json_format.MessageToDict(message_))


def test_the_web_card_lists_the_grpc_process(layout: Layout) -> None:
    card = requests.get(layout.web.url + "/.well-known/agent-card.json", timeout=10).json()
    assert card["supportedInterfaces"][-1] == {
        "url": layout.grpc.address,
        "protocolBinding": "GRPC",
        "protocolVersion": "1.0",
    }


def test_sent_over_grpc_read_and_streamed_from_the_web_worker(layout: Layout) -> None:
    web, call = layout.web, layout.call
    sent = call.send("go", skill="steps", return_immediately=True)
    task_id = sent.task.id
    # A stream on the web worker of a run in the gRPC process: its events come over Redis.
    stream = SSEReader(web.url + "/a2a", "SubscribeToTask", {"id": task_id}, token="alice-token")
    try:
        events = [e["result"] for e in stream.rest(timeout=20)]
    finally:
        stream.close()
    assert "task" in events[0]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert any("artifactUpdate" in e for e in events)

    over_grpc = as_json(call("GetTask", a2a_pb2.GetTaskRequest(id=task_id)))
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    over_jsonrpc = requests.post(web.url + "/a2a", json=body, headers=ALICE, timeout=10).json()
    assert over_jsonrpc["result"] == over_grpc
    over_rest = requests.get(f"{web.url}/a2a/rest/tasks/{task_id}", headers=ALICE, timeout=10)
    assert over_rest.json() == over_grpc
    parts = [p["text"] for p in over_grpc["artifacts"][0]["parts"]]
    assert parts == [f"step {i}" for i in range(6)]
    listed = web.rpc("ListTasks", {"pageSize": 100})["result"]
    assert task_id in [t["id"] for t in listed["tasks"]]


def test_sent_over_json_rpc_streamed_over_grpc(layout: Layout) -> None:
    web, call = layout.web, layout.call
    params = {"message": message("steps"), "configuration": {"returnImmediately": True}}
    task_id = web.rpc("SendMessage", params)["result"]["task"]["id"]
    events = list(
        call.stub.SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=call.metadata(), timeout=20
        )
    )
    assert events[0].task.id == task_id
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    got = call("GetTask", a2a_pb2.GetTaskRequest(id=task_id))
    assert [p.text for p in got.artifacts[0].parts] == [f"step {i}" for i in range(6)]
    listed = call("ListTasks", a2a_pb2.ListTasksRequest(page_size=100)).tasks
    assert task_id in [t.id for t in listed]


def test_sent_over_rest_cancelled_over_grpc(layout: Layout) -> None:
    web, call = layout.web, layout.call
    body = {"message": message("sleepy"), "configuration": {"returnImmediately": True}}
    sent = requests.post(web.url + "/a2a/rest/message:send", json=body, headers=ALICE, timeout=10)
    task_id = sent.json()["task"]["id"]
    stream = SSEReader(web.url + "/a2a", "SubscribeToTask", {"id": task_id}, token="alice-token")
    try:
        assert "task" in stream.next()["result"]
        canceled = call("CancelTask", a2a_pb2.CancelTaskRequest(id=task_id))
        assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
        rest = [e["result"] for e in stream.rest(timeout=20)]
    finally:
        stream.close()
    assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"

    def cut() -> bool:
        return requests.get(f"{web.url}/test/cut/{task_id}", timeout=5).status_code == 200

    assert wait_for(cut, timeout=10)  # the run in the web worker was cut, not left sleeping
    how = requests.get(f"{web.url}/test/cut/{task_id}", timeout=5).json()["how"]
    assert how == "TaskCanceled"
    refused = call.send("more", skill="sleepy", task_id=task_id)
    assert isinstance(refused, grpc.RpcError)
    assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_a_grpc_stream_sees_the_web_workers_events_one_by_one(layout: Layout) -> None:
    """The gRPC process follows a web worker's run over the Redis bus, chunk by chunk."""
    web, call = layout.web, layout.call
    params = {"message": message("paced"), "configuration": {"returnImmediately": True}}
    task_id = web.rpc("SendMessage", params)["result"]["task"]["id"]
    stream = call.stub.SubscribeToTask(
        a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=call.metadata(), timeout=30
    )
    assert next(stream).task.id == task_id
    seen: list[str] = []
    for n in range(3):
        requests.post(f"{web.url}/test/step/{task_id}", timeout=5).raise_for_status()
        while True:
            event = next(stream)
            if event.WhichOneof("payload") == "artifact_update":
                seen.append(event.artifact_update.artifact.parts[0].text)
                break
        assert seen[-1] == f"chunk {n}"
    requests.post(f"{web.url}/test/step/{task_id}?n=7", timeout=5).raise_for_status()
    last = list(stream)[-1]
    assert last.status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
