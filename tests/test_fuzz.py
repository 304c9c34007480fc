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
        python -m pytest -q -s -p no:cacheprovider tests/test_fuzz.py
"""

from __future__ import annotations

import base64
import collections
import copy
import dataclasses
import json
import os
import re
import socket
import sys
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

EXAMPLES = int(os.environ.get("A2A_FUZZ_EXAMPLES") or 0)
SECONDS = float(os.environ.get("A2A_FUZZ_SECONDS") or 0)
LONG = EXAMPLES > 0
#: The long run goes in rounds of ROUND examples (a fresh seed each): past the time budget a
#: round is skipped before it draws anything.
ROUND: t.Final = min(EXAMPLES, 1000)
ROUNDS: t.Final = range(-(-EXAMPLES // ROUND) if LONG else 1)

OWNERS: t.Final = ("alice", "bob")
EXTENSION: t.Final = "https://example.com/ext/geo/v1"
METHODS: t.Final = (
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
)
STREAMING: t.Final = frozenset({"SendStreamingMessage", "SubscribeToTask"})
#: The spec's codes (a2a-v1-wire.md §4) and our HTTP-level ones; -32603 is left out on purpose.
CODES: t.Final = frozenset(
    {-32700, -32600, -32601, -32602, -32001, -32002, -32003, -32004, -32005, -32006, -32007,
     -32008, -32009, -31400, -31401, -31403, -31405, -31413, -31429}
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


@dataclasses.dataclass(frozen=True)
class Ref:
    """A seeded row, named symbolically: resolved to its current id when the request is sent."""

    owner: str  # "caller" (the owner the request authenticates as) or "other"
    kind: str  # "done" | "ask" | "rejected" (a task) or "config" (its push config id)


class Harness:
    """One app with seeded tasks of two owners, and the checks every answer must pass."""

    def __init__(self, store: t.Any) -> None:
        self.app = Flask("fuzz_app")
        self.app.config.update(TESTING=True, A2A_KEEPALIVE_INTERVAL=0.2)
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
        assert isinstance(self.exchange.push.client.session, NoNetwork)  # no delivery leaves
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
    ) -> None:
        """Send one request and check its answer and the store against the properties."""
        self.settle()
        before = self.snapshot()
        response = self.client.client.open(
            self.client.path + query, method=http_method, data=body, headers=headers,
            environ_overrides=environ,
        )
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
    doc: t.Any, status: int, expected_id: t.Any, id_known: bool,
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


# --------------------------------------------------------------------------- strategies

#: Strings that have broken servers before: empty, NUL, bidi and other format characters,
#: C0/C1 controls, astral code points, lengths at and past every store limit.
ODD_STRINGS: t.Final = [
    "", " ", "\x00", "a\x00b", "\u202egnp.exe", "\u2066x\u2069", "\u200b", "\ufeff", "\x7f",
    "\x85", "\x9b[31m", "\t\r\n", "\U0001f600", "\U0010ffff", "\ud7ff", "null", "0", "-1",
    "ROLE_USER", "TASK_STATE_COMPLETED", "../../etc/passwd", "<script>", "%00", "\\u0000",
    "\ud800", "a" * 128, "a" * 129, "a" * 255, "a" * 256, "é" * 300, "\U0001d518" * 200,
    "a" * 70000,
]


def strings() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(ODD_STRINGS),
        st.text(max_size=12),
        st.text(st.characters(codec="utf-8"), max_size=40),
        st.text(st.characters(min_codepoint=0, max_codepoint=0x9f), max_size=8),
    )


def numbers() -> st.SearchStrategy[t.Any]:
    return st.one_of(
        st.integers(-5, 200),
        st.sampled_from([2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**53 + 1, 2**64, 10**30,
                         -0.0, 0.5, 1.0, 1e308, -1e308, 5e-324]),
        st.floats(),  # NaN and the infinities too: they must be parse errors
    )


def scalars() -> st.SearchStrategy[t.Any]:
    return st.one_of(st.none(), st.booleans(), numbers(), strings())


def junk() -> st.SearchStrategy[t.Any]:
    """Any JSON value, small."""
    return st.recursive(
        scalars(),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(strings(), inner, max_size=3)
        ),
        max_leaves=6,
    )


def task_ids() -> st.SearchStrategy[t.Any]:
    """Valid-looking task ids: the caller's and the other owner's seeded tasks, unknown ones
    (odd values come from :func:`mutate`)."""
    kinds = st.sampled_from(["done", "ask", "rejected"])
    return st.one_of(
        st.builds(Ref, st.just("caller"), kinds),
        st.builds(Ref, st.just("caller"), kinds),
        st.builds(Ref, st.just("caller"), kinds),
        st.builds(Ref, st.just("other"), kinds),
        st.text("0123456789abcdef", min_size=32, max_size=32),
    )


def config_ids() -> st.SearchStrategy[t.Any]:
    return st.sampled_from([Ref("caller", "config"), "cfg-2"])


MISSING: t.Final = object()


def rarely(one_in: int) -> st.SearchStrategy[bool]:
    """True about once in ``one_in`` draws; False is the simplest value, the one hypothesis
    falls back to (and shrinks to), so a near-valid request stays near-valid."""
    return st.integers(0, one_in - 1).map(lambda i: i == one_in // 2)


def maybe(strategy: st.SearchStrategy[t.Any]) -> st.SearchStrategy[t.Any]:
    """A value, or ``MISSING`` (the key is left out)."""
    return st.one_of(st.just(MISSING), strategy)


def obj(**members: st.SearchStrategy[t.Any]) -> st.SearchStrategy[dict[str, t.Any]]:
    """A dict drawing each member, leaving out those that drew ``MISSING``."""
    return st.fixed_dictionaries(members).map(
        lambda d: {k: v for k, v in d.items() if v is not MISSING}
    )


def texts() -> st.SearchStrategy[str]:
    return st.text(max_size=16)


@dataclasses.dataclass(frozen=True)
class Deep:
    """Placeholder for ``depth`` nested arrays (or objects), spliced in as text: json.dumps
    would recurse. A negative depth counts down from the interpreter's recursion limit, where
    the parser's and the encoder's limits lie (hypothesis raises it while a test runs)."""

    depth: int
    brace: bool = False

    def text(self) -> str:
        depth = self.depth if self.depth > 0 else sys.getrecursionlimit() + self.depth
        if self.brace:
            return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)
        return "[" * depth + "]" * depth


def deep() -> st.SearchStrategy[Deep]:
    """Nesting at and around every limit: ours, the parser's, the encoder's."""
    return st.builds(
        Deep,
        st.one_of(st.sampled_from([20, 99, 100, 101, 500, 100_000]), st.integers(-120, -40)),
        st.booleans(),
    )


def json_values() -> st.SearchStrategy[t.Any]:
    """Valid JSON values (finite numbers), now and then nested deep."""
    return st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40),
                  st.floats(allow_nan=False, allow_infinity=False), texts(),
                  st.builds(Deep, st.integers(-90, -60), st.booleans())),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(texts(), inner, max_size=3)
        ),
        max_leaves=5,
    )


def parts() -> st.SearchStrategy[t.Any]:
    part = st.one_of(
        obj(text=texts()),
        obj(text=texts(), mediaType=maybe(st.just("text/plain")), filename=maybe(texts()),
            metadata=maybe(st.dictionaries(texts(), json_values(), max_size=2))),
        obj(data=json_values()),
        obj(url=st.just("https://example.com/f"), mediaType=maybe(st.just("image/png"))),
        obj(raw=st.sampled_from(["aGk=", "aGk", "-_8"]), filename=maybe(texts())),
    )
    return st.lists(part, min_size=1, max_size=3)


def messages() -> st.SearchStrategy[t.Any]:
    return obj(
        messageId=st.one_of(st.just("m-1"), st.text(min_size=1, max_size=8)),
        role=st.sampled_from(["ROLE_USER", "ROLE_USER", "ROLE_AGENT", 1, 2]),
        parts=parts(),
        metadata=maybe(obj(skill=st.sampled_from(["echo", "echo", "ask", "nope"]))),
        taskId=maybe(task_ids()),
        contextId=maybe(st.text(min_size=1, max_size=8)),
        extensions=maybe(st.lists(st.just(EXTENSION), max_size=1)),
        referenceTaskIds=maybe(st.lists(task_ids(), max_size=2)),
    )


def push_configs() -> st.SearchStrategy[t.Any]:
    return obj(
        url=st.sampled_from(
            ["https://hooks.example.com/a", "http://hooks.example.com:8080/b?x=1",
             "https://unknown.invalid/", "http://inside.example.com/", "http://127.0.0.1/x",
             "http://0x7f.1/", "http://[::ffff:10.0.0.1]/", "http://[fe80::1%25eth0]/",
             "http://93.184.215.14:99999/", "http://user:pw@hooks.example.com/",
             "http://" + "a" * 64 + ".com/", "http://a..b/", "http://\u00e9x.example/",
             "ftp://hooks.example.com/", "http:///x", "http://[::1/"]
        ),
        id=maybe(st.one_of(config_ids(), st.text(min_size=1, max_size=8))),
        taskId=maybe(task_ids()),
        token=maybe(st.sampled_from(["tok", "a b", "x" * 40])),
        authentication=maybe(obj(scheme=st.sampled_from(["Bearer", "Basic"]),
                                 credentials=maybe(st.just("c2VjcmV0")))),
    )


def page_tokens() -> st.SearchStrategy[str]:
    """Tokens shaped like ours (base64 of ``[timestamp, task id]``) around odd members."""
    stamps = st.one_of(
        st.sampled_from(["2026-01-01T00:00:00.000Z", "0001-01-01T00:00:00Z",
                         "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59.999Z"]),
        scalars(),
    )
    members = st.one_of(st.tuples(stamps, st.one_of(task_ids(), scalars())).map(list), junk())
    return members.map(
        lambda m: base64.urlsafe_b64encode(
            json.dumps(m, default=lambda r: "0" * 32).encode()
        ).decode().rstrip("=")
    )


def send_params() -> st.SearchStrategy[t.Any]:
    return obj(
        message=messages(),
        configuration=maybe(obj(
            returnImmediately=maybe(st.booleans()),
            historyLength=maybe(st.integers(0, 5)),
            acceptedOutputModes=maybe(st.just(["text/plain"])),
            taskPushNotificationConfig=maybe(
                push_configs().map(lambda c: {k: v for k, v in c.items() if k != "taskId"})
            ),
        )),
        metadata=maybe(st.dictionaries(texts(), json_values(), max_size=2)),
        tenant=maybe(st.sampled_from(["", "t2"])),
    )


PARAMS: t.Final[dict[str, st.SearchStrategy[t.Any]]] = {
    "SendMessage": send_params(),
    "SendStreamingMessage": send_params(),
    "GetTask": obj(id=task_ids(), historyLength=maybe(st.integers(0, 5))),
    "ListTasks": obj(
        contextId=maybe(st.text(min_size=1, max_size=8)),
        status=maybe(st.one_of(st.sampled_from([s.value for s in TaskState]),
                               st.integers(0, 8))),
        pageSize=maybe(st.integers(1, 100)),
        pageToken=maybe(page_tokens()),
        historyLength=maybe(st.integers(0, 5)),
        statusTimestampAfter=maybe(st.sampled_from(
            ["2026-01-02T03:04:05Z", "2020-01-01T00:00:00.123456789+05:30",
             "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z"]
        )),
        includeArtifacts=maybe(st.booleans()),
    ),
    "CancelTask": obj(id=task_ids(), metadata=maybe(st.dictionaries(texts(), json_values()))),
    "SubscribeToTask": obj(id=task_ids()),
    "CreateTaskPushNotificationConfig": push_configs(),
    "GetTaskPushNotificationConfig": obj(taskId=task_ids(), id=config_ids()),
    "ListTaskPushNotificationConfigs": obj(
        taskId=task_ids(), pageSize=maybe(st.integers(0, 100)),
        pageToken=maybe(st.sampled_from(["0", "1", "8"])),
    ),
    "DeleteTaskPushNotificationConfig": obj(taskId=task_ids(), id=config_ids()),
    "GetExtendedAgentCard": obj(tenant=maybe(st.just(""))),
}

#: Odd values :func:`mutate` puts anywhere.
ODD_VALUES: t.Final[dict[str, st.SearchStrategy[t.Any]]] = {
    "junk": junk(),
    "string": strings(),
    "number": numbers(),
    "task id": task_ids(),
    "deep": deep(),
}
MUTATIONS: t.Final = (*ODD_VALUES, "delete", "extra", "snake", "both", "wrap")


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def snake_all(value: t.Any) -> t.Any:
    """Every key in the proto's snake_case spelling (ProtoJSON readers accept both)."""
    if isinstance(value, dict):
        return {snake(k): snake_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_all(v) for v in value]
    return value


def paths(value: t.Any, prefix: tuple[t.Any, ...] = ()) -> list[tuple[t.Any, ...]]:
    """Every path into nested dicts and lists (the root included)."""
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(paths(item, prefix + (key,)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.extend(paths(item, prefix + (index,)))
    return out


def mutate(data: st.DataObject, value: t.Any) -> t.Any:
    """One mutation at one path: an odd value (wrong type, odd string, out-of-range number,
    another task's id, deep nesting), deletion, an extra key, a snake_case spelling (alone or
    beside the camelCase one), a list around it. Mutates ``value`` in place."""
    inner = paths(value)[1:]
    path = () if not inner or data.draw(rarely(15)) else data.draw(st.sampled_from(inner))
    kind = data.draw(st.sampled_from(MUTATIONS))
    odd = data.draw(ODD_VALUES[kind]) if kind in ODD_VALUES else None
    if not path:  # the params themselves
        return [value] if kind == "wrap" else odd if kind in ("junk", "deep") else value
    parent = value
    for step in path[:-1]:
        parent = parent[step]
    key = path[-1]
    if kind in ODD_VALUES:
        parent[key] = odd
    elif kind == "wrap":
        parent[key] = [parent[key]]
    elif kind == "delete":
        del parent[key]
    elif isinstance(parent, dict) and kind == "extra":
        parent[data.draw(strings())] = data.draw(junk())
    elif isinstance(parent, dict) and isinstance(key, str) and snake(key) != key:
        if kind == "both":
            parent[snake(key)] = data.draw(junk())
        else:
            parent[snake(key)] = parent.pop(key)
    return value


def encode(doc: t.Any, *, ascii_only: bool) -> bytes:
    """JSON text for ``doc``, with ``Deep`` placeholders spliced in as raw nesting."""
    deep: list[Deep] = []

    def default(value: t.Any) -> t.Any:
        if isinstance(value, Deep):
            deep.append(value)
            return f"__deep_{len(deep) - 1}__"
        raise TypeError(type(value))

    text = json.dumps(doc, ensure_ascii=ascii_only, default=default)
    for index, nested in enumerate(deep):
        text = text.replace(f'"__deep_{index}__"', nested.text(), 1)
    return text.encode("utf-8", "surrogatepass")


TOKENS: t.Final = st.sampled_from(
    ["alice", "alice", "alice", "alice", "bob", "bob", "alice-read", "alice-write", "alice-t2",
     None, "mallory"]
)


def header_text() -> st.SearchStrategy[str]:
    """What a test client can put in a header: Latin-1, no line breaks."""
    return st.text(
        st.characters(max_codepoint=0xFF, blacklist_characters="\r\n"), max_size=30
    )


@st.composite
def headers(draw: st.DrawFn, *, odd: bool) -> dict[str, str]:
    """Request headers; with ``odd`` every service header may be anything."""
    out: dict[str, str] = {"Content-Type": "application/json"}
    token = draw(TOKENS)
    if token is not None:
        out["Authorization"] = f"Bearer {token}"
    if not odd:
        if draw(st.booleans()):
            out["A2A-Version"] = "1.0"
        return out
    out["Content-Type"] = draw(st.one_of(
        st.sampled_from([
            "application/json", "application/a2a+json", "APPLICATION/JSON ; charset=utf-8",
            "application/json; charset=utf-16", "text/plain", "application/json-patch+json",
            "multipart/form-data; boundary=x", "", ";", "application/json\x00",
        ]),
        header_text(),
    ))
    for name, values in (
        ("A2A-Version", ["1.0", "1", "1.0.0", "1.5", " 1.0 ", "0.3", "2.0", "", "1.0.0.0", "v1"]),
        ("Origin", ["http://localhost", "http://localhost:80", "null", "http://evil.example",
                    "http://[::1", "http://localhost:abc", "https://localhost", "file://"]),
        ("A2A-Extensions", [EXTENSION, f" {EXTENSION} ,x", ",,,", "", "a" * 300]),
    ):
        choice = draw(st.one_of(st.none(), st.sampled_from(values), header_text()))
        if choice is not None:
            out[name] = choice
    if draw(st.booleans()):
        out["Authorization"] = draw(st.one_of(header_text(), st.just("Bearer")))
    return out


@st.composite
def envelopes(draw: st.DrawFn) -> tuple[dict[str, t.Any], t.Any, bool, str | None]:
    """A request object (params symbolic), the id it should echo, whether that id is
    readable, and the method named; mostly valid envelopes around mutated params."""
    method = draw(st.sampled_from(
        METHODS * 4 + ("message/send", "tasks/get", "sendMessage", "SENDMESSAGE", "", " ")
    ))
    if draw(rarely(20)):
        method = draw(st.text(max_size=10))
    strategy = PARAMS.get(method, st.dictionaries(st.text(max_size=5), junk(), max_size=2))
    params = copy.deepcopy(draw(strategy))
    if draw(rarely(10)):
        params = snake_all(params)
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
        params = mutate(draw(st.data()), params)
    doc: dict[str, t.Any] = {"jsonrpc": "2.0", "method": method}
    if not draw(rarely(20)) or params is None:
        doc["params"] = params
    rid: t.Any = draw(st.one_of(st.integers(-(2**63), 2**63), st.text(max_size=8), strings(),
                         st.none()))
    id_known = True
    odd = draw(st.sampled_from(["id"] * 28 + ["odd id", "no id"]))
    if odd == "odd id":
        rid = draw(st.one_of(st.booleans(), st.floats(), st.lists(st.integers(), max_size=2),
                             st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)))
        id_known = False
        doc["id"] = rid
    elif odd == "no id":
        id_known = False  # no id at all
    else:
        doc["id"] = rid
    if draw(rarely(30)):  # a broken envelope member
        member = draw(st.sampled_from(["jsonrpc", "method", "params"]))
        if draw(st.booleans()):
            doc.pop(member, None)
        else:
            doc[member] = draw(junk())
    if draw(rarely(20)):  # an extra member, perhaps a case variant of one
        doc[draw(st.sampled_from(["Method", "ID", "JSONRPC", "extra", "result", "error"]))] = (
            draw(junk())
        )
    expected = rid if id_known else None
    named = doc.get("method") if isinstance(doc.get("method"), str) else None
    return doc, expected, id_known and (isinstance(rid, str | int | None)), named


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
    return draw(st.one_of(
        st.binary(max_size=80),
        st.integers(0, len(valid)).map(lambda n: valid[:n]),
        st.tuples(st.integers(0, len(valid)), st.binary(min_size=1, max_size=4)).map(
            lambda p: valid[: p[0]] + p[1] + valid[p[0]:]
        ),
        st.sampled_from([
            b"", b"null", b"[]", b"[{}]", b'"x"', b"1e400", b"NaN", b"\xef\xbb\xbf{}",
            valid.decode().encode("utf-16"), b'{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}',
            b'{"jsonrpc":"2.0","id":"\\ud800","method":"GetTask"}',
            b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"\\udc00"}}',
            b"[" * 100_000 + b"]" * 100_000, b"{" * 5000, b" " * 2_000_000,
            b'{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1e400}}',
        ]),
        st.text(max_size=40).map(lambda s: s.encode("utf-8")),
    ))


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
    query = data.draw(st.sampled_from(
        ["", "", "", "?A2A-Version=1.0", "?A2A-Version=0.3", "?A2A-Version=", "?x=%00"]
    ))
    environ = None
    if data.draw(rarely(10)):  # a Content-Length that lies, or is no number
        environ = {"CONTENT_LENGTH": data.draw(st.one_of(
            st.integers(-1, len(body) + 10).map(str), st.sampled_from(["", "abc", "1e3"])
        ))}
    if memory.out_of_time("raw"):  # after every draw: hypothesis replays prefixes
        return
    memory.ensure_seeds()
    rid, readable, method = lenient_read(body)
    if environ is not None:
        readable = False  # the body read may be a cut of what was sent
    memory.send(body, hdrs, http_method=http_method, expected_id=rid, id_known=readable,
                rpc_method=method, query=query, environ=environ)
