"""The hypothesis strategies of the fuzz test (tests/protocol/test_fuzz.py): near-valid requests for
every method, odd values, envelopes and headers. Seeded rows are named symbolically (:class:`Ref`)
and resolved to their current ids when a request is sent."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import re
import sys
import typing as t

from hypothesis import strategies as st

from flask_a2a.protocol.model import TaskState

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


@dataclasses.dataclass(frozen=True)
class Ref:
    """A seeded row, named symbolically: resolved to its current id when the request is sent."""

    owner: str  # "caller" (the owner the request authenticates as) or "other"
    kind: str  # "done" | "ask" | "rejected" (a task) or "config" (its push config id)


# --------------------------------------------------------------------------- strategies

#: Strings that have broken servers before: empty, NUL, bidi and other format characters,
#: C0/C1 controls, astral code points, lengths at and past every store limit.
ODD_STRINGS: t.Final = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\u202egnp.exe",
    "\u2066x\u2069",
    "\u200b",
    "\ufeff",
    "\x7f",
    "\x85",
    "\x9b[31m",
    "\t\r\n",
    "\U0001f600",
    "\U0010ffff",
    "\ud7ff",
    "null",
    "0",
    "-1",
    "ROLE_USER",
    "TASK_STATE_COMPLETED",
    "../../etc/passwd",
    "<script>",
    "%00",
    "\\u0000",
    "\ud800",
    "a" * 128,
    "a" * 129,
    "a" * 255,
    "a" * 256,
    "é" * 300,
    "\U0001d518" * 200,
    "a" * 70000,
]


def strings() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(ODD_STRINGS),
        st.text(max_size=12),
        st.text(st.characters(codec="utf-8"), max_size=40),
        st.text(st.characters(min_codepoint=0, max_codepoint=0x9F), max_size=8),
    )


def numbers() -> st.SearchStrategy[t.Any]:
    return st.one_of(
        st.integers(-5, 200),
        st.sampled_from(
            [
                2**31 - 1,
                2**31,
                -(2**31),
                -(2**31) - 1,
                2**53 + 1,
                2**64,
                10**30,
                -0.0,
                0.5,
                1.0,
                1e308,
                -1e308,
                5e-324,
            ]
        ),
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
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-(2**40), 2**40),
            st.floats(allow_nan=False, allow_infinity=False),
            texts(),
            st.builds(Deep, st.integers(-90, -60), st.booleans()),
        ),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(texts(), inner, max_size=3)
        ),
        max_leaves=5,
    )


def parts() -> st.SearchStrategy[t.Any]:
    part = st.one_of(
        obj(text=texts()),
        obj(
            text=texts(),
            mediaType=maybe(st.just("text/plain")),
            filename=maybe(texts()),
            metadata=maybe(st.dictionaries(texts(), json_values(), max_size=2)),
        ),
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
            [
                "https://hooks.example.com/a",
                "http://hooks.example.com:8080/b?x=1",
                "https://unknown.invalid/",
                "http://inside.example.com/",
                "http://127.0.0.1/x",
                "http://0x7f.1/",
                "http://[::ffff:10.0.0.1]/",
                "http://[fe80::1%25eth0]/",
                "http://93.184.215.14:99999/",
                "http://user:pw@hooks.example.com/",
                "http://" + "a" * 64 + ".com/",
                "http://a..b/",
                "http://\u00e9x.example/",
                "ftp://hooks.example.com/",
                "http:///x",
                "http://[::1/",
            ]
        ),
        id=maybe(st.one_of(config_ids(), st.text(min_size=1, max_size=8))),
        taskId=maybe(task_ids()),
        token=maybe(st.sampled_from(["tok", "a b", "x" * 40])),
        authentication=maybe(
            obj(scheme=st.sampled_from(["Bearer", "Basic"]), credentials=maybe(st.just("c2VjcmV0")))
        ),
    )


def page_tokens() -> st.SearchStrategy[str]:
    """Tokens shaped like ours (base64 of ``[timestamp, task id]``) around odd members."""
    stamps = st.one_of(
        st.sampled_from(
            [
                "2026-01-01T00:00:00.000Z",
                "0001-01-01T00:00:00Z",
                "0001-01-01T00:00:00+01:00",
                "9999-12-31T23:59:59.999Z",
            ]
        ),
        scalars(),
    )
    members = st.one_of(st.tuples(stamps, st.one_of(task_ids(), scalars())).map(list), junk())
    return members.map(
        lambda m: (
            base64.urlsafe_b64encode(json.dumps(m, default=lambda r: "0" * 32).encode())
            .decode()
            .rstrip("=")
        )
    )


def send_params() -> st.SearchStrategy[t.Any]:
    return obj(
        message=messages(),
        configuration=maybe(
            obj(
                returnImmediately=maybe(st.booleans()),
                historyLength=maybe(st.integers(0, 5)),
                acceptedOutputModes=maybe(st.just(["text/plain"])),
                taskPushNotificationConfig=maybe(
                    push_configs().map(lambda c: {k: v for k, v in c.items() if k != "taskId"})
                ),
            )
        ),
        metadata=maybe(st.dictionaries(texts(), json_values(), max_size=2)),
        tenant=maybe(st.sampled_from(["", "t2"])),
    )


PARAMS: t.Final[dict[str, st.SearchStrategy[t.Any]]] = {
    "SendMessage": send_params(),
    "SendStreamingMessage": send_params(),
    "GetTask": obj(id=task_ids(), historyLength=maybe(st.integers(0, 5))),
    "ListTasks": obj(
        contextId=maybe(st.text(min_size=1, max_size=8)),
        status=maybe(st.one_of(st.sampled_from([s.value for s in TaskState]), st.integers(0, 8))),
        pageSize=maybe(st.integers(1, 100)),
        pageToken=maybe(page_tokens()),
        historyLength=maybe(st.integers(0, 5)),
        statusTimestampAfter=maybe(
            st.sampled_from(
                [
                    "2026-01-02T03:04:05Z",
                    "2020-01-01T00:00:00.123456789+05:30",
                    "0001-01-01T00:00:00Z",
                    "9999-12-31T23:59:59.999Z",
                ]
            )
        ),
        includeArtifacts=maybe(st.booleans()),
    ),
    "CancelTask": obj(id=task_ids(), metadata=maybe(st.dictionaries(texts(), json_values()))),
    "SubscribeToTask": obj(id=task_ids()),
    "CreateTaskPushNotificationConfig": push_configs(),
    "GetTaskPushNotificationConfig": obj(taskId=task_ids(), id=config_ids()),
    "ListTaskPushNotificationConfigs": obj(
        taskId=task_ids(),
        pageSize=maybe(st.integers(0, 100)),
        pageToken=maybe(st.sampled_from(["0", "1", "8"])),
    ),
    "DeleteTaskPushNotificationConfig": obj(taskId=task_ids(), id=config_ids()),
    "GetExtendedAgentCard": obj(tenant=maybe(st.just(""))),
}

# --------------------------------------------------------------------------- A2A v0.3
# The v0.3 shapes (docs/protocol-versions.md): JSON-RPC's kind-tagged objects, and the
# HTTP+JSON routes' ProtoJSON. Mutated like the v1.0 ones: an array or an object where a role
# or a state name goes is among what :func:`mutate` puts anywhere.

V03_ROLES: t.Final = ["user", "user", "agent", "ROLE_USER", ["user"], {"role": "user"}]


def v03_parts() -> st.SearchStrategy[t.Any]:
    part = st.one_of(
        obj(
            kind=st.just("text"),
            text=texts(),
            metadata=maybe(st.dictionaries(texts(), json_values(), max_size=2)),
        ),
        obj(kind=st.just("data"), data=st.dictionaries(texts(), json_values(), max_size=2)),
        obj(
            kind=st.just("file"),
            file=obj(
                bytes=st.sampled_from(["aGk=", "aGk", "-_8"]),
                mimeType=maybe(st.sampled_from(["text/plain", "text/html"])),
                name=maybe(texts()),
            ),
        ),
        obj(
            kind=st.just("file"),
            file=obj(uri=st.just("https://example.com/f"), mimeType=maybe(st.just("image/png"))),
        ),
    )
    return st.lists(part, min_size=1, max_size=3)


def v03_messages() -> st.SearchStrategy[t.Any]:
    return obj(
        kind=maybe(st.just("message")),
        messageId=st.one_of(st.just("m-1"), st.text(min_size=1, max_size=8)),
        role=st.sampled_from(V03_ROLES),
        parts=v03_parts(),
        metadata=maybe(obj(skill=st.sampled_from(["echo", "echo", "ask", "nope"]))),
        taskId=maybe(task_ids()),
        contextId=maybe(st.text(min_size=1, max_size=8)),
        extensions=maybe(st.lists(st.just(EXTENSION), max_size=1)),
        referenceTaskIds=maybe(st.lists(task_ids(), max_size=2)),
    )


def v03_push_configs() -> st.SearchStrategy[t.Any]:
    """A v0.3 PushNotificationConfig: ``{id, url, token, authentication: {schemes}}``."""
    return push_configs().map(
        lambda c: {
            **{k: v for k, v in c.items() if k not in ("taskId", "authentication")},
            **(
                {"authentication": {"schemes": [c["authentication"]["scheme"]]}}
                if "authentication" in c
                else {}
            ),
        }
    )


def v03_send_params() -> st.SearchStrategy[t.Any]:
    return obj(
        message=v03_messages(),
        configuration=maybe(
            obj(
                blocking=maybe(st.booleans()),
                historyLength=maybe(st.integers(0, 5)),
                acceptedOutputModes=maybe(st.just(["text/plain"])),
                pushNotificationConfig=maybe(v03_push_configs()),
            )
        ),
        metadata=maybe(st.dictionaries(texts(), json_values(), max_size=2)),
    )


#: The v0.3 JSON-RPC methods and their near-valid params.
V03_PARAMS: t.Final[dict[str, st.SearchStrategy[t.Any]]] = {
    "message/send": v03_send_params(),
    "message/stream": v03_send_params(),
    "tasks/get": obj(id=task_ids(), historyLength=maybe(st.integers(0, 5))),
    "tasks/cancel": obj(id=task_ids(), metadata=maybe(st.dictionaries(texts(), json_values()))),
    "tasks/resubscribe": obj(id=task_ids()),
    "tasks/pushNotificationConfig/set": obj(
        taskId=task_ids(), pushNotificationConfig=v03_push_configs()
    ),
    "tasks/pushNotificationConfig/get": obj(
        id=task_ids(), pushNotificationConfigId=maybe(st.one_of(config_ids(), st.just("default")))
    ),
    "tasks/pushNotificationConfig/list": obj(id=task_ids()),
    "tasks/pushNotificationConfig/delete": obj(
        id=task_ids(), pushNotificationConfigId=config_ids()
    ),
    "agent/getAuthenticatedExtendedCard": obj(),
}
#: Names beside v0.3's own: v1.0's, near misses, empty.
V03_OTHER_NAMES: t.Final = ("SendMessage", "GetTask", "message/ssend", "tasks/list", "", " ")


#: Roles a ProtoJSON reader refuses: v0.3's JSON-RPC spelling, a bool (``true == 1`` in
#: Python), a float, an unknown number, and what does not even hash.
V03_REST_ODD_ROLES: t.Final = ["user", True, 1.0, 3, ["ROLE_USER"], {"role": "ROLE_USER"}]


def v03_rest_messages() -> st.SearchStrategy[t.Any]:
    """A v0.3 proto Message: ``content`` parts, enum roles (names or numbers)."""
    part = st.one_of(
        obj(text=texts()),
        obj(data=obj(data=st.dictionaries(texts(), json_values(), max_size=2))),
        obj(
            file=obj(
                fileWithBytes=st.sampled_from(["aGk=", "aGk", "-_8", ""]),
                mimeType=maybe(st.sampled_from(["text/plain", "text/html"])),
                name=maybe(texts()),
            )
        ),
        obj(file=obj(fileWithUri=st.sampled_from(["https://example.com/f", ""]))),
    )
    return obj(
        messageId=st.one_of(st.just("m-1"), st.text(min_size=1, max_size=8)),
        role=st.one_of(
            st.sampled_from(["ROLE_USER", "ROLE_USER", "ROLE_AGENT", 1, 2]),
            st.sampled_from(["ROLE_USER", "ROLE_USER", "ROLE_AGENT", 1, 2]),
            st.sampled_from(V03_REST_ODD_ROLES),
        ),
        content=st.lists(part, min_size=1, max_size=3),
        metadata=maybe(obj(skill=st.sampled_from(["echo", "echo", "ask", "nope"]))),
        taskId=maybe(task_ids()),
        contextId=maybe(st.text(min_size=1, max_size=8)),
        extensions=maybe(st.lists(st.just(EXTENSION), max_size=1)),
    )


def v03_rest_send_bodies() -> st.SearchStrategy[t.Any]:
    return obj(
        message=v03_rest_messages(),
        configuration=maybe(
            obj(
                blocking=maybe(st.booleans()),
                historyLength=maybe(st.integers(0, 5)),
                acceptedOutputModes=maybe(st.just(["text/plain"])),
                pushNotification=maybe(v03_push_configs()),
            )
        ),
        metadata=maybe(st.dictionaries(texts(), json_values(), max_size=2)),
    )


class RestCall(t.NamedTuple):
    """One v0.3 HTTP+JSON request, symbolic: its path below ``v1/`` as segments, each a
    literal string or a list ``[id, suffix...]`` whose id (a :class:`Ref`, or an odd string)
    is quoted once resolved; its query; its JSON body (None: none)."""

    verb: str
    segments: list[t.Any]
    query: dict[str, t.Any]
    body: t.Any


def _segment(ref: st.SearchStrategy[t.Any]) -> st.SearchStrategy[t.Any]:
    """A task or config id in a path: a seeded one, or an odd string."""
    return st.one_of(ref, ref, ref, strings().filter(lambda x: x not in ("", ".", "..")))


@st.composite
def v03_rest_calls(draw: st.DrawFn) -> RestCall:
    """A near-valid request to a v0.3 route, its body mutated; now and then the wrong verb."""
    task = draw(_segment(task_ids()))
    config = draw(_segment(st.one_of(config_ids(), st.sampled_from(["default", "None"]))))
    configs = ["tasks", [task], "pushNotificationConfigs"]
    create = obj(
        parent=maybe(st.just("tasks/x")),
        configId=maybe(st.one_of(config_ids(), texts())),
        config=obj(name=maybe(texts()), pushNotificationConfig=v03_push_configs()),
    )
    routes: list[tuple[str, list[t.Any], st.SearchStrategy[t.Any] | None]] = [
        ("POST", ["message:send"], v03_rest_send_bodies()),
        ("POST", ["message:send"], v03_rest_send_bodies()),
        ("POST", ["message:stream"], v03_rest_send_bodies()),
        ("GET", ["tasks", [task]], None),
        ("POST", ["tasks", [task, ":cancel"]], maybe(obj(metadata=maybe(junk())))),
        ("GET", ["tasks", [task, ":subscribe"]], None),
        ("POST", configs, create),
        ("GET", configs, None),
        ("GET", [*configs, [config]], None),
        ("DELETE", [*configs, [config]], None),
        ("GET", ["card"], None),
    ]
    verb, segments, body_strategy = draw(st.sampled_from(routes))
    if draw(rarely(15)):
        verb = draw(st.sampled_from(["GET", "POST", "DELETE", "PUT"]))
    query: dict[str, t.Any] = {}
    if verb == "GET" and draw(rarely(4)):
        query["historyLength"] = draw(st.one_of(st.integers(-2, 5), strings()))
    body = None if body_strategy is None else draw(body_strategy)
    if body is MISSING:  # a route whose body is optional, sent without one
        body = None
    if body is not None:
        body = copy.deepcopy(body)
        if draw(rarely(10)):
            body = snake_all(body)
        for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
            body = mutate(draw(st.data()), body)
    return RestCall(verb, segments, query, body)


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
    [
        "alice",
        "alice",
        "alice",
        "alice",
        "bob",
        "bob",
        "alice-read",
        "alice-write",
        "alice-t2",
        None,
        "mallory",
    ]
)


def header_text() -> st.SearchStrategy[str]:
    """What a test client can put in a header: Latin-1, no line breaks."""
    return st.text(st.characters(max_codepoint=0xFF, blacklist_characters="\r\n"), max_size=30)


@st.composite
def headers(draw: st.DrawFn, *, odd: bool, version: str = "1.0") -> dict[str, str]:
    """Request headers (``A2A-Version``: ``version``, or none); with ``odd`` every service
    header may be anything."""
    out: dict[str, str] = {"Content-Type": "application/json"}
    token = draw(TOKENS)
    if token is not None:
        out["Authorization"] = f"Bearer {token}"
    if not odd:
        if draw(st.booleans()):
            out["A2A-Version"] = version
        return out
    out["Content-Type"] = draw(
        st.one_of(
            st.sampled_from(
                [
                    "application/json",
                    "application/a2a+json",
                    "APPLICATION/JSON ; charset=utf-8",
                    "application/json; charset=utf-16",
                    "text/plain",
                    "application/json-patch+json",
                    "multipart/form-data; boundary=x",
                    "",
                    ";",
                    "application/json\x00",
                ]
            ),
            header_text(),
        )
    )
    for name, values in (
        ("A2A-Version", ["1.0", "1", "1.0.0", "1.5", " 1.0 ", "0.3", "2.0", "", "1.0.0.0", "v1"]),
        (
            "Origin",
            [
                "http://localhost",
                "http://localhost:80",
                "null",
                "http://evil.example",
                "http://[::1",
                "http://localhost:abc",
                "https://localhost",
                "file://",
            ],
        ),
        ("A2A-Extensions", [EXTENSION, f" {EXTENSION} ,x", ",,,", "", "a" * 300]),
    ):
        choice = draw(st.one_of(st.none(), st.sampled_from(values), header_text()))
        if choice is not None:
            out[name] = choice
    if draw(st.booleans()):
        out["Authorization"] = draw(st.one_of(header_text(), st.just("Bearer")))
    return out


#: Method names beside a version's own: the other version's, near misses, empty.
OTHER_NAMES: t.Final = ("message/send", "tasks/get", "sendMessage", "SENDMESSAGE", "", " ")


@st.composite
def envelopes(
    draw: st.DrawFn, version: str = "1.0"
) -> tuple[dict[str, t.Any], t.Any, bool, str | None]:
    """A request object (params symbolic), the id it should echo, whether that id is
    readable, and the method named; mostly valid envelopes around mutated params of one of
    ``version``'s methods (:data:`PARAMS`, or :data:`V03_PARAMS` for ``"0.3"``)."""
    table, others = (V03_PARAMS, V03_OTHER_NAMES) if version == "0.3" else (PARAMS, OTHER_NAMES)
    method = draw(st.sampled_from(tuple(table) * 4 + others))
    if draw(rarely(20)):
        method = draw(st.text(max_size=10))
    strategy = table.get(method, st.dictionaries(st.text(max_size=5), junk(), max_size=2))
    params = copy.deepcopy(draw(strategy))
    if draw(rarely(10)):
        params = snake_all(params)
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
        params = mutate(draw(st.data()), params)
    doc: dict[str, t.Any] = {"jsonrpc": "2.0", "method": method}
    if not draw(rarely(20)) or params is None:
        doc["params"] = params
    rid: t.Any = draw(
        st.one_of(st.integers(-(2**63), 2**63), st.text(max_size=8), strings(), st.none())
    )
    id_known = True
    odd = draw(st.sampled_from(["id"] * 28 + ["odd id", "no id"]))
    if odd == "odd id":
        rid = draw(
            st.one_of(
                st.booleans(),
                st.floats(),
                st.lists(st.integers(), max_size=2),
                st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
            )
        )
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
        doc[draw(st.sampled_from(["Method", "ID", "JSONRPC", "extra", "result", "error"]))] = draw(
            junk()
        )
    expected = rid if id_known else None
    named = doc.get("method") if isinstance(doc.get("method"), str) else None
    return doc, expected, id_known and (isinstance(rid, (str, int, type(None)))), named
