"""The two sections past raw throughput: idle streams per worker, ListTasks at scale.

Idle streams: one gevent worker holds a gated task open while this process opens N
SubscribeToTask streams on raw non-blocking sockets (epoll), then checks that every stream
gets two keep-alives and, once the gate opens, the final event.

ListTasks: PostgreSQL rows for a small and a large owner are seeded in bulk through the
store's own table and encoder; then ``ListTasks pageSize=50`` is timed over HTTP for each.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import time
import typing as t
from datetime import datetime, timedelta, timezone

from bench import loadgen
from bench.servers import HOST, Server, gunicorn_command, post_json, rss_kb

A2A_APP: t.Final = "bench.apps:create_app()"
TOKEN: t.Final = "bench-token"
KEEPALIVE_S: t.Final = 2.0
_KEEPALIVE = b": keep-alive"
_DATA = b"data:"
_DONE = b"TASK_STATE_COMPLETED"
_TAIL = 24


def _rpc(method: str, params: dict[str, t.Any], request_id: int = 1) -> str:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
        separators=(",", ":"),
    )


# ----------------------------------------------------------------------------- idle streams


class _Stream:
    __slots__ = ("sock", "tail", "first", "keepalives", "done", "closed", "failed")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.tail = b""
        self.first = self.done = self.closed = self.failed = False
        self.keepalives = 0

    def feed(self, data: bytes) -> None:
        both = self.tail + data
        self.keepalives += both.count(_KEEPALIVE) - self.tail.count(_KEEPALIVE)
        self.first = self.first or _DATA in both
        self.done = self.done or _DONE in both
        self.tail = both[-_TAIL:]


class _Pool:
    """Many streams on one selector; every loop here is bounded by a deadline."""

    def __init__(self, port: int, request: bytes) -> None:
        self.port = port
        self.request = request
        self.sel = selectors.DefaultSelector()
        self.streams: list[_Stream] = []

    def _read(self, stream: _Stream) -> None:
        try:
            data = stream.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            stream.closed = True
            self.sel.unregister(stream.sock)
            return
        stream.feed(data)

    def _event(self, stream: _Stream, events: int) -> None:
        if events & selectors.EVENT_WRITE:
            if stream.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                stream.failed = stream.closed = True
                self.sel.unregister(stream.sock)
                return
            stream.sock.send(self.request)
            self.sel.modify(stream.sock, selectors.EVENT_READ, stream)
        else:
            self._read(stream)

    def open(self, n: int, deadline: float, in_flight: int = 256) -> int:
        """Open ``n`` streams, at most ``in_flight`` waiting for their first frame at once."""
        waiting: set[_Stream] = set()
        while time.monotonic() < deadline:
            while len(self.streams) < n and len(waiting) < in_flight:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setblocking(False)
                sock.connect_ex((HOST, self.port))
                stream = _Stream(sock)
                self.streams.append(stream)
                waiting.add(stream)
                self.sel.register(sock, selectors.EVENT_WRITE, stream)
            for key, events in self.sel.select(timeout=0.2):
                self._event(key.data, events)
            waiting = {s for s in waiting if not (s.first or s.closed)}
            if len(self.streams) >= n and not waiting:
                break
        return sum(1 for s in self.streams if s.first and not s.closed)

    def pump(self, until: float, stop: t.Callable[[], bool] | None = None) -> None:
        while time.monotonic() < until and not (stop is not None and stop()):
            wait = min(0.2, max(0.0, until - time.monotonic()))
            for key, events in self.sel.select(timeout=wait):
                self._event(key.data, events)

    def close(self) -> None:
        for stream in self.streams:
            stream.sock.close()
        self.sel.close()


def idle_streams(bench: t.Any, sizes: tuple[int, ...]) -> dict[str, t.Any]:
    """Open streams up to each count of ``sizes`` in turn on one worker; at each, worker RSS
    per stream once every stream has had two keep-alives."""
    n = sizes[-1]
    need = 30 + n / 500 + 2 * KEEPALIVE_S * (len(sizes) - 1)
    if bench.left() < need:
        bench.skip("streams", f"time bound: {bench.left():.0f}s left, {need:.0f}s needed")
        return {}
    env = {
        "A2A_MAX_STREAM_SEATS_PER_OWNER": "-1",
        "A2A_MAX_CONCURRENT_RUNS_PER_OWNER": "-1",
        "A2A_KEEPALIVE_INTERVAL": str(KEEPALIVE_S),
    }
    command = gunicorn_command(A2A_APP, 1, connections=n + 500)
    steps: list[dict[str, t.Any]] = []
    with Server(command, env, "/bench/ping") as server:
        send = _rpc(
            "SendMessage",
            {
                "message": {
                    "messageId": "gate-1",
                    "role": "ROLE_USER",
                    "parts": [{"text": "hold"}],
                    "metadata": {"skill": "gate"},
                },
                "configuration": {"returnImmediately": True},
            },
        )
        task = post_json(server.base + "/a2a", send, TOKEN)["result"]["task"]
        body = _rpc("SubscribeToTask", {"id": task["id"]}).encode()
        request = (
            f"POST /a2a HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
            f"A2A-Version: 1.0\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        port = int(server.base.rsplit(":", 1)[1])
        # Warm the worker's code paths with a few streams before the baseline.
        warm = _Pool(port, request)
        warm.open(20, time.monotonic() + 10)
        warm.close()
        worker = server.workers()[0]
        time.sleep(0.5)  # let the closed warm-up streams unwind (no event marks it)
        before = rss_kb(worker)
        pool = _Pool(port, request)
        for size in sizes:
            bench.log(
                f"streams: opening {size - len(pool.streams)} more SubscribeToTask "
                f"streams on one worker (to {size})"
            )
            began = time.monotonic()
            count = [s.keepalives for s in pool.streams]
            opened = pool.open(size, began + max(20.0, (size - len(pool.streams)) / 200))
            open_s = time.monotonic() - began
            after_open = rss_kb(worker)
            bench.log(f"streams: {opened}/{size} open ({open_s:.1f}s); waiting two keep-alives")
            pool.pump(time.monotonic() + 2 * KEEPALIVE_S + 1.5)
            after = rss_kb(worker)
            count += [0] * (len(pool.streams) - len(count))
            alive = sum(
                1
                for s, k in zip(pool.streams, count)
                if s.first and not s.closed and s.keepalives - k >= 2
            )
            steps.append(
                {
                    "streams": size,
                    "opened": opened,
                    "open_s": round(open_s, 2),
                    "rss_after_mb": round(after / 1024, 1),
                    "kb_per_stream": round((after - before) / max(1, opened), 1),
                    "kb_per_stream_at_open": round((after_open - before) / max(1, opened), 1),
                    "alive_after_two_keepalives": alive,
                }
            )
            bench.log(f"streams: {steps[-1]}")
        post_json(server.base + "/bench/release", "{}", TOKEN)
        pool.pump(time.monotonic() + 15, stop=lambda: all(s.done for s in pool.streams))
        done = sum(1 for s in pool.streams if s.done)
        pool.close()
    return {
        "streams": n,
        "rss_before_mb": round(before / 1024, 1),
        "keepalive_s": KEEPALIVE_S,
        "sizes": steps,
        "got_final_event": done,
    }


# ----------------------------------------------------------------------------- ListTasks


def _seed(store: t.Any, owner: str, count: int) -> None:
    """Insert ``count`` completed echo tasks for ``owner``, as create/update would store them."""
    from flask_a2a.protocol.model import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
    from flask_a2a.store.base import encode_task
    from flask_a2a.store.sql_dialect import micros

    start = datetime.now(timezone.utc) - timedelta(days=1)
    rows: list[dict[str, t.Any]] = []
    for i in range(count):
        task_id, context_id = f"{owner}-{i:07d}", f"ctx-{owner}-{i}"
        stamp = start + timedelta(milliseconds=i)
        message = Message(f"m-{i}", Role.USER, (Part(text=f"hello {i}"),), context_id, task_id)
        task = Task(
            task_id,
            context_id,
            TaskStatus(TaskState.COMPLETED, stamp),
            artifacts=(Artifact(f"a-{i}", (Part(text=f"hello {i}"),), name="echo"),),
            history=(message,),
            metadata={"flask_a2a.skill": "echo"},
        )
        rows.append(
            {
                "id": task_id,
                "owner": owner,
                "tenant": None,
                "scopes": None,
                "skill": "echo",
                "version": 3,
                "state": task.status.state.value,
                "status_ts": micros(stamp),
                "context_id": context_id,
                "created_at": micros(stamp),
                "body": encode_task(task),
            }
        )
        if len(rows) == 5000 or i == count - 1:
            with store.engine.begin() as conn:
                conn.execute(store.tasks.insert(), rows)
            rows = []


def list_tasks(bench: t.Any, db_url: str, sizes: tuple[int, int]) -> dict[str, t.Any]:
    small, large = sizes
    need = 25 + 2 * bench.plan.duration + (small + large) / 5000
    if bench.left() < need:
        bench.skip("list", f"time bound: {bench.left():.0f}s left, {need:.0f}s needed")
        return {}
    from flask_a2a.store.sql import SQLStore, engine_from_url

    prefix = f"bench_{os.getpid()}_list_"
    engine = engine_from_url(db_url)
    store = SQLStore(engine, table_prefix=prefix)
    result: dict[str, t.Any] = {"page_size": 50}
    try:
        began = time.monotonic()
        _seed(store, "list-small", small)
        _seed(store, "list-large", large)
        # What autovacuum does after a bulk load: statistics, and the visibility map that lets
        # the totalSize COUNT read the index alone (MySQL: the index statistics).
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            if store.mysql:
                conn.exec_driver_sql(f"ANALYZE TABLE {prefix}tasks")
            else:
                conn.exec_driver_sql(f"VACUUM ANALYZE {prefix}tasks")
        result["seed_s"] = round(time.monotonic() - began, 1)
        bench.log(f"list: seeded {small} + {large} tasks in {result['seed_s']}s")
        env = {
            "BENCH_STORE": "sql",
            "BENCH_TABLE_PREFIX": prefix,
            "A2A_DATABASE_URL": db_url,
            "A2A_TERMINAL_TASK_RETENTION": "-1",
        }
        body = _rpc("ListTasks", {"pageSize": 50})
        with Server(gunicorn_command(A2A_APP, 1), env, "/bench/ping") as server:
            url = server.base + "/a2a"
            for token, count in (("list-small", small), ("list-large", large)):
                expect = f'"totalSize":{count}'
                loadgen.run(bench.generator, url, body, token, expect, 1, 1.0)
                stats = loadgen.run(
                    bench.generator, url, body, token, expect, 1, bench.plan.duration / 2
                )
                result[str(count)] = stats
                bench.log(
                    f"list: {count} tasks: p50 {stats['p50_ms']:.2f} ms, "
                    f"p99 {stats['p99_ms']:.2f} ms, bad {stats['bad']}"
                )
        p_small, p_large = result[str(small)]["p50_ms"], result[str(large)]["p50_ms"]
        result["sizes"] = [small, large]
        result["ratio"] = round(p_large / p_small, 2) if p_small else None
    finally:
        store.drop()
        engine.dispose()
    return result
