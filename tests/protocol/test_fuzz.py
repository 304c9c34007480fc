"""A fuzz test of our own (issue 13): hypothesis over the envelope and every method's params.

Every generated request goes through the Flask test client to an app whose skills and principal
hook are well-behaved, so whatever the request, the answer must be:

- never a 5xx, and never -32603 (any internal error here is the library's defect);
- a valid JSON-RPC answer: ``"jsonrpc": "2.0"``, the request id echoed (null when the id could
  not be read), exactly one of ``result`` / ``error``, an ``error.code`` from the spec's list
  carried by the HTTP status that code names, a string ``error.message``; a stream is
  ``text/event-stream`` whose every event is such an answer;
- a refusal leaves the store as it was: every task and push config of both owners.

The suite runs a fixed, derandomized number of examples. A longer run, bounded in count and
time (docs/security.md):

    A2A_FUZZ_EXAMPLES=20000 A2A_FUZZ_SECONDS=600 \\
        python -m pytest -q -s -p no:cacheprovider tests/protocol/test_fuzz.py
"""

from __future__ import annotations

import collections
import json
import os
import re
import socket
import time
import typing as t

import pytest
import requests
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flask_a2a import A2A, AgentCard, AgentExtension, Part, Skill, TaskContext
from flask_a2a.exchange.runner import ThreadRunner
from flask_a2a.protocol.errors import error_class_for_code
from flask_a2a.protocol.model import TaskState
from flask_a2a.store import MemoryStore
from flask_a2a.testing import A2ATestClient
from tests.conftest import TOKENS as PRINCIPALS
from tests.conftest import token_principal, wait_for
from tests.fuzz_strategies import EXTENSION, Ref, encode, envelopes, headers, rarely

EXAMPLES = int(os.environ.get("A2A_FUZZ_EXAMPLES") or 0)
SECONDS = float(os.environ.get("A2A_FUZZ_SECONDS") or 0)
LONG = EXAMPLES > 0
#: The long run goes in rounds of ROUND examples (a fresh seed each): past the time budget a
#: round is skipped before it draws anything.
ROUND: t.Final = min(EXAMPLES, 1000)
ROUNDS: t.Final = range(-(-EXAMPLES // ROUND) if LONG else 1)

OWNERS: t.Final = ("alice", "bob")
STREAMING: t.Final = frozenset(
    {"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"}
)
#: The spec's codes (a2a-v1-wire.md §4) and our HTTP-level ones; -32603 is left out on purpose.
CODES: t.Final = frozenset(
    {
        -32700,
        -32600,
        -32601,
        -32602,
        -32001,
        -32002,
        -32003,
        -32004,
        -32005,
        -32006,
        -32007,
        -32008,
        -32009,
        -31400,
        -31401,
        -31403,
        -31405,
        -31413,
        -31429,
    }
)
#: Refusals made before the request id could be read: they answer ``"id": null``.
BEFORE_ID: t.Final = frozenset({-32700, -32005, -31400, -31403, -31405, -31413})


_F = t.TypeVar("_F", bound=t.Callable[..., t.Any])


def fuzz_settings(examples: int) -> t.Callable[[_F], _F]:
    """``examples`` derandomized in the suite; rounds of random ones when
    ``A2A_FUZZ_EXAMPLES`` is set."""
    return settings(
        max_examples=ROUND if LONG else examples,
        derandomize=not LONG,
        database=None,
        deadline=None,
        print_blob=LONG,
        suppress_health_check=list(HealthCheck),
    )


# --------------------------------------------------------------------------- the app under test


def echo(task: TaskContext) -> None:
    task.artifact([Part(text=task.message.text)], name="echo")


def ask(task: TaskContext) -> None:
    """Asks once (INPUT_REQUIRED), completes on the follow-up."""
    if len(task.history) == 1:
        task.require_input("which one?")
        return
    task.artifact([Part(text="thanks")], name="answer")


class NoNetwork(requests.Session):
    """The push client: every delivery "succeeds" without leaving the process."""

    def post(self, url: t.Any, data: t.Any = None, json: t.Any = None, **kw: t.Any) -> t.Any:
        response = requests.Response()
        response.status_code = 204
        return response


HOOK: t.Final = "https://hooks.example.com/a"
#: Where the push hosts of the generated configs resolve. Nothing is ever dialled (NoNetwork).
HOSTS: t.Final = {"hooks.example.com": ["93.184.215.14"], "inside.example.com": ["10.1.2.3"]}


def resolve(host: str) -> list[str]:
    """The push resolver: the names above, else what the system resolver raises for ``host``
    without a lookup (``AI_NUMERICHOST``: an odd name's UnicodeError, or "no such name")."""
    if host in HOSTS:
        return HOSTS[host]
    infos = socket.getaddrinfo(host, None, flags=socket.AI_NUMERICHOST)
    return [str(info[4][0]) for info in infos]


class Harness:
    """One app with seeded tasks of two owners, and the checks every answer must pass."""

    def __init__(self, store: t.Any, config: t.Mapping[str, t.Any] | None = None) -> None:
        self.app = Flask("fuzz_app")
        self.app.config.update(TESTING=True, A2A_KEEPALIVE_INTERVAL=0.2, **(config or {}))
        self.a2a = A2A(
            self.app,
            skills=[
                Skill(id="echo", name="Echo", description="Echo.", handler=echo),
                Skill(id="ask", name="Ask", description="Asks once.", handler=ask),
            ],
            principal=token_principal,
            store=store,
            runner=ThreadRunner(8),
            extended_card=lambda p: {"name": "extended", "owner": p.owner},
            card=AgentCard(extensions=[AgentExtension(EXTENSION)]),
            push_client=NoNetwork(),
            push_resolver=resolve,
        )
        self.exchange = self.a2a.exchange(self.app)
        push: t.Any = self.exchange.push  # a PushSender, its client a GuardedClient
        assert isinstance(push.client.session, NoNetwork)  # no delivery leaves
        self.store = store
        self.client = A2ATestClient(self.app)
        self.seeds: dict[tuple[str, str], str] = {}
        self.stats: collections.Counter[str] = collections.Counter()
        self.started = time.monotonic()
        self.budgets: dict[str, float] = {}

    # -- seeds

    def ensure_seeds(self) -> None:
        """Each owner holds a COMPLETED, an INPUT_REQUIRED and a REJECTED task, the first
        two with a push config ``cfg-1``; a seed consumed (canceled, answered, trimmed by
        retention) is made again."""
        want = {"done": TaskState.COMPLETED, "ask": TaskState.INPUT_REQUIRED,
                "rejected": TaskState.REJECTED}  # fmt: skip
        for owner in OWNERS:
            for kind, state in want.items():
                task_id = self.seeds.get((owner, kind))
                record = self.store.get_task(task_id) if task_id else None
                if record is None or record.state is not state:
                    skill = {"done": "echo", "ask": "ask", "rejected": "nope"}[kind]
                    task = self.client.send("seed", skill=skill, token=owner)["task"]
                    assert task["status"]["state"] == state.value, task
                    self.seeds[(owner, kind)] = task_id = task["id"]
                if kind != "rejected" and self.store.get_push_config(task_id, "cfg-1") is None:
                    params = {"taskId": task_id, "id": "cfg-1", "url": HOOK}
                    made = self.client.rpc("CreateTaskPushNotificationConfig", params, token=owner)
                    assert made.result["id"] == "cfg-1"
        self.settle()

    def resolve(self, value: t.Any, headers: t.Mapping[str, str]) -> t.Any:
        """``value`` with each :class:`Ref` replaced by the id it names now."""
        scheme, _, token = headers.get("Authorization", "").partition(" ")
        principal = PRINCIPALS.get(token) if scheme == "Bearer" else None
        caller = principal.owner if principal is not None else "alice"
        other = "bob" if caller == "alice" else "alice"

        def walk(value: t.Any) -> t.Any:
            if isinstance(value, Ref):
                if value.kind == "config":
                    return "cfg-1"
                return self.seeds[(caller if value.owner == "caller" else other, value.kind)]
            if isinstance(value, dict):
                return {k: walk(v) for k, v in value.items()}
            if isinstance(value, list):
                return [walk(v) for v in value]
            return value

        return walk(value)

    def settle(self) -> None:
        """No run in flight: what is stored changes only by the next request."""
        assert wait_for(lambda: not self.exchange.live_runs(), timeout=30)

    def snapshot(self) -> dict[str, t.Any]:
        return {owner: self.store.export_owner(owner) for owner in OWNERS}

    def out_of_time(self, test: str) -> bool:
        """``A2A_FUZZ_SECONDS`` spent on ``test``: its remaining examples send nothing."""
        started = self.budgets.setdefault(test, time.monotonic())
        return SECONDS > 0 and time.monotonic() - started > SECONDS

    def next_round(self, test: str) -> None:
        """Skip a long run's round once ``test`` has spent its time."""
        if self.out_of_time(test):
            pytest.skip(f"A2A_FUZZ_SECONDS={SECONDS:g} spent")

    # -- sending and checking

    def send(
        self,
        body: bytes,
        headers: dict[str, str],
        *,
        http_method: str = "POST",
        expected_id: t.Any = None,
        id_known: bool = False,
        rpc_method: str | None = None,
        query: str = "",
        environ: dict[str, str] | None = None,
        path: str | None = None,
        check: t.Callable[[t.Any, collections.Counter[str]], bool] | None = None,
    ) -> None:
        """Send one request and check its answer and the store against the properties
        (``path``, ``check``: another route than the JSON-RPC endpoint, and its answer's
        check, which says whether it was a refusal)."""
        self.settle()
        before = self.snapshot()
        response = self.client.client.open(
            (path or self.client.path) + query,
            method=http_method,
            data=body,
            headers=headers,
            environ_overrides=environ,
        )
        if check is not None:
            refused = check(response, self.stats)
        else:
            refused = check_answer(response, expected_id, id_known, rpc_method, self.stats)
        self.settle()
        if refused:
            assert self.snapshot() == before, "a refused request changed the store"
        self.stats["sent"] += 1
        self.stats["refused" if refused else "answered"] += 1


def check_answer(
    response: t.Any,
    expected_id: t.Any,
    id_known: bool,
    rpc_method: str | None,
    stats: collections.Counter[str],
) -> bool:
    """Assert the answer is valid JSON-RPC; True when it is a refusal."""
    status = response.status_code
    if response.mimetype == "text/event-stream":
        text = read_stream(response)
    else:
        text = response.get_data(as_text=True)
    assert status < 500, (status, text[:500])
    if status == 204:  # a CORS preflight the Origin gate let through
        assert text == ""
        return True
    if response.mimetype == "text/event-stream":
        assert status == 200
        assert rpc_method in STREAMING, rpc_method
        events = sse_events(text)
        assert events, "a stream with no event"
        answers = [check_envelope(e, status, expected_id, id_known, stats) for e in events]
        return all(answers)
    assert response.mimetype == "application/json", (status, response.mimetype, text[:500])
    doc = json.loads(text)
    refused = check_envelope(doc, status, expected_id, id_known, stats)
    if not refused:
        assert status == 200
    return refused


def check_envelope(
    doc: t.Any,
    status: int,
    expected_id: t.Any,
    id_known: bool,
    stats: collections.Counter[str],
) -> bool:
    assert isinstance(doc, dict), doc
    assert doc.get("jsonrpc") == "2.0", doc
    assert "id" in doc, doc
    assert set(doc) <= {"jsonrpc", "id", "result", "error"}, doc
    assert ("result" in doc) != ("error" in doc), doc
    error = doc.get("error")
    if error is None:
        if id_known:
            assert doc["id"] == expected_id and type(doc["id"]) is type(expected_id), doc
        return False
    assert isinstance(error, dict), doc
    code = error.get("code")
    assert type(code) is int, doc
    assert code != -32603, f"-32603 for a caller's fault: {doc}"
    assert code in CODES, doc
    assert isinstance(error.get("message"), str), doc
    assert "data" not in error or isinstance(error["data"], list), doc
    assert error_class_for_code(code).http_status == status, (status, doc)
    if code in BEFORE_ID:
        assert doc["id"] is None, doc
    elif id_known:
        assert doc["id"] == expected_id and type(doc["id"]) is type(expected_id), doc
    else:
        assert doc["id"] is None or type(doc["id"]) in (str, int), doc
    stats[f"code {code}"] += 1
    return True


def read_stream(response: t.Any) -> str:
    """A stream's frames to its end, or to its first keep-alive after an event: a stream that
    idles is waiting on a paused task (a subscribe may stay open for what comes of the pause).
    Closing the response ends the stream and frees its seat."""
    frames: list[str] = []
    try:
        for chunk in response.response:  # the app's iterator, frame by frame
            frame = chunk.decode() if isinstance(chunk, bytes) else str(chunk)
            frames.append(frame)
            if frame.startswith(":") and any("data:" in f for f in frames):
                break
    finally:
        response.close()
    return "".join(frames)


def sse_events(text: str) -> list[t.Any]:
    """Each event's ``data:``, decoded (keep-alive comments skipped; any other line fails)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        for line in lines:
            assert re.match(r"^(data|event): ?", line), line
        data = [line[5:].lstrip() for line in lines if line.startswith("data:")]
        if data:
            events.append(json.loads("\n".join(data)))
    return events


# --------------------------------------------------------------------------- the properties


@pytest.fixture(scope="module")
def memory() -> t.Iterator[Harness]:
    harness = Harness(MemoryStore())
    yield harness
    report("memory", harness)
    harness.exchange.shutdown(timeout=5)


@pytest.fixture(scope="module")
def sqlite(tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[Harness]:
    import sqlalchemy as sa

    from flask_a2a.store.sql import SQLStore

    engine = sa.create_engine(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'a2a.db'}")
    harness = Harness(SQLStore(engine, table_prefix="fuzz_"))
    yield harness
    report("sqlite", harness)
    harness.exchange.shutdown(timeout=5)
    engine.dispose()


def report(name: str, harness: Harness) -> None:
    if LONG:
        elapsed = time.monotonic() - harness.started
        print(f"\nfuzz[{name}] {elapsed:.0f}s {dict(sorted(harness.stats.items()))}")


def run_structured(harness: Harness, data: st.DataObject) -> None:
    doc, expected_id, id_known, method = data.draw(envelopes())
    odd_headers = data.draw(rarely(10))
    hdrs = data.draw(headers(odd=odd_headers))
    ascii_only = data.draw(st.booleans())
    if harness.out_of_time("structured"):  # after every draw: hypothesis replays prefixes
        return
    harness.ensure_seeds()
    body = encode(harness.resolve(doc, hdrs), ascii_only=ascii_only)
    harness.send(body, hdrs, expected_id=expected_id, id_known=id_known, rpc_method=method)


@pytest.fixture
def memory_round(memory: Harness) -> Harness:
    memory.next_round("structured")
    return memory


@pytest.fixture
def sqlite_round(sqlite: Harness) -> Harness:
    sqlite.next_round("structured")
    return sqlite


@pytest.fixture
def raw_round(memory: Harness) -> Harness:
    memory.next_round("raw")
    return memory


@pytest.mark.parametrize("round_", ROUNDS)
@fuzz_settings(200)
@given(data=st.data())
def test_structured_requests_memory(
    memory_round: Harness, round_: int, data: st.DataObject
) -> None:
    """Near-valid requests to every method, on the memory store."""
    run_structured(memory_round, data)


@pytest.mark.parametrize("round_", ROUNDS)
@fuzz_settings(60)
@given(data=st.data())
def test_structured_requests_sqlite(
    sqlite_round: Harness, round_: int, data: st.DataObject
) -> None:
    """The same requests on the SQL store (SQLite)."""
    run_structured(sqlite_round, data)


@st.composite
def raw_bodies(draw: st.DrawFn) -> bytes:
    """Bytes that are not a request: random, a valid request cut or spliced, odd JSON text."""
    valid = b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}'
    return draw(
        st.one_of(
            st.binary(max_size=80),
            st.integers(0, len(valid)).map(lambda n: valid[:n]),
            st.tuples(st.integers(0, len(valid)), st.binary(min_size=1, max_size=4)).map(
                lambda p: valid[: p[0]] + p[1] + valid[p[0] :]
            ),
            st.sampled_from(
                [
                    b"",
                    b"null",
                    b"[]",
                    b"[{}]",
                    b'"x"',
                    b"1e400",
                    b"NaN",
                    b"\xef\xbb\xbf{}",
                    valid.decode().encode("utf-16"),
                    b'{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}',
                    b'{"jsonrpc":"2.0","id":"\\ud800","method":"GetTask"}',
                    b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"\\udc00"}}',
                    b"[" * 100_000 + b"]" * 100_000,
                    b"{" * 5000,
                    b" " * 2_000_000,
                    b'{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1e400}}',
                ]
            ),
            st.text(max_size=40).map(lambda s: s.encode("utf-8")),
        )
    )


def lenient_read(body: bytes) -> tuple[t.Any, bool, str | None]:
    """The id a lenient parser reads, whether one was readable at all, and the method."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None, False, None
    if not isinstance(doc, dict):
        return None, False, None
    method = doc.get("method") if isinstance(doc.get("method"), str) else None
    if "id" in doc and type(doc["id"]) in (str, int, type(None)):
        return doc["id"], True, method
    return None, False, method


@pytest.mark.parametrize("round_", ROUNDS)
@fuzz_settings(200)
@given(data=st.data())
def test_raw_bodies_and_headers(raw_round: Harness, round_: int, data: st.DataObject) -> None:
    """Bytes that are no JSON-RPC request, under odd headers and HTTP methods."""
    memory = raw_round
    body = data.draw(raw_bodies())
    hdrs = data.draw(headers(odd=True))
    http_method = data.draw(st.sampled_from(["POST"] * 6 + ["GET", "PUT", "DELETE", "OPTIONS"]))
    query = data.draw(
        st.sampled_from(
            ["", "", "", "?A2A-Version=1.0", "?A2A-Version=0.3", "?A2A-Version=", "?x=%00"]
        )
    )
    environ = None
    if data.draw(rarely(10)):  # a Content-Length that lies, or is no number
        environ = {
            "CONTENT_LENGTH": data.draw(
                st.one_of(
                    st.integers(-1, len(body) + 10).map(str), st.sampled_from(["", "abc", "1e3"])
                )
            )
        }
    if memory.out_of_time("raw"):  # after every draw: hypothesis replays prefixes
        return
    memory.ensure_seeds()
    rid, readable, method = lenient_read(body)
    if environ is not None:
        readable = False  # the body read may be a cut of what was sent
    memory.send(
        body,
        hdrs,
        http_method=http_method,
        expected_id=rid,
        id_known=readable,
        rpc_method=method,
        query=query,
        environ=environ,
    )
