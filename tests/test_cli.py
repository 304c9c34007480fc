"""``flask a2a …``: every command through click's runner; ``call`` against a live server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing as t
from pathlib import Path

import pytest
from click.testing import Result
from flask import Flask

from examples.agent import create_app
from flask_a2a import Skill, TaskContext
from flask_a2a.cli import a2a_cli
from flask_a2a.protocol.model import TaskState
from flask_a2a.store import MemoryStore
from flask_a2a.testing import A2ATestClient
from tests import stack
from tests.conftest import Gate, echo, next_millisecond
from tests.live_server import werkzeug_server as serve

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def make_store(new_store: t.Callable[..., t.Any]) -> t.Callable[..., t.Any]:
    """The store commands run against every store backend."""
    return new_store


def run(app: Flask, *args: str, input: str | None = None) -> Result:
    return stack.cli_runner(app).invoke(a2a_cli, list(args), input=input)


def send(app: Flask, token: str, text: str = "x", skill: str = "echo") -> str:
    """Send, then let the millisecond wire clock tick: 'oldest' and 'newest' stay distinct."""
    task_id = str(A2ATestClient(app, token=token).send(text, skill=skill)["task"]["id"])
    next_millisecond()
    return task_id


def pause(task: TaskContext) -> None:
    task.require_input("more?")


PAUSE = Skill(id="pause", name="Pause", description="Asks for input.", handler=pause)
ECHO = Skill(id="echo", name="Echo", description="Echo.", handler=echo)


# ------------------------------------------------------------------ card and skills


def test_card_prints_the_served_card(app: Flask) -> None:
    result = run(app, "card")
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)
    assert card == app.test_client().get("/.well-known/agent-card.json").get_json()
    assert card["supportedInterfaces"][0]["url"].endswith("/a2a")
    assert [s["id"] for s in card["skills"]] == ["echo"]


def card_urls(result: Result) -> list[str]:
    assert result.exit_code == 0, result.output
    return [i["url"] for i in json.loads(result.stdout)["supportedInterfaces"]]


def test_card_outside_a_request_names_where_its_urls_come_from(
    make_app: t.Callable[..., Flask],
) -> None:
    app = make_app()
    bare = run(app, "card")  # nothing configured: localhost, and the operator is told
    assert card_urls(bare) == ["http://localhost/a2a", "http://localhost/a2a/rest"]
    assert "http://localhost" in bare.stderr and "--base-url" in bare.stderr
    given = run(app, "card", "--base-url", "https://agents.example.com/")
    assert card_urls(given) == [
        "https://agents.example.com/a2a",
        "https://agents.example.com/a2a/rest",
    ]
    assert given.stderr == ""
    behind = run(app, "card", "--base-url", "https://example.com/tools")  # a mounted prefix
    assert card_urls(behind)[0] == "https://example.com/tools/a2a"
    assert run(app, "card", "--base-url", "example.com").exit_code == 2

    named = make_app(config={"SERVER_NAME": "agents.example.org", "PREFERRED_URL_SCHEME": "https"})
    assert card_urls(run(named, "card"))[0] == "https://agents.example.org/a2a"
    assert run(named, "card").stderr == ""
    public = make_app(config={"A2A_PUBLIC_BASE_URL": "https://public.example.net"})
    assert card_urls(run(public, "card", "--base-url", "https://other.example"))[0] == (
        "https://public.example.net/a2a"  # the configured URL is what the card serves
    )


def test_skills_table(make_app: t.Callable[..., Flask]) -> None:
    quiet = Skill(
        id="json-only",
        name="JSON only",
        description="x",
        handler=echo,
        input_modes=("application/json",),
        output_modes=("application/json",),
        public=False,
    )
    app = make_app(skills=[ECHO, quiet])
    result = run(app, "skills")
    assert result.exit_code == 0, result.output
    header, first, second = result.output.splitlines()
    assert header.split() == ["ID", "NAME", "INPUT", "OUTPUT", "CARD"]
    assert first.split()[:2] == ["echo", "Echo"]
    assert "text/plain, application/json" in first and first.endswith("listed")
    assert second.split()[:3] == ["json-only", "JSON", "only"]
    assert second.split()[3:] == ["application/json", "application/json", "unlisted"]


def test_commands_need_the_extension() -> None:
    bare = Flask("bare")
    result = run(bare, "skills")
    assert result.exit_code == 1
    assert "A2A is not registered" in result.output


# ------------------------------------------------------------------ tasks, export, erase


def test_a_user_name_finds_nothing_and_says_owners_are_ids(
    make_app: t.Callable[..., Flask],
) -> None:
    app = make_app(principal=lambda: "7")  # the hook returns current_user.id
    send(app, "any")
    assert run(app, "tasks", "7").output.endswith("1 task(s)\n")
    named = run(app, "tasks", "susan")
    assert named.exit_code == 0
    assert named.output.startswith("no tasks for susan (owners are the ids your principal hook")
    assert "owner_lookup" in named.output
    assert not json.loads(run(app, "export-user", "susan").stdout).get("tasks")


def test_an_owner_lookup_turns_a_user_name_into_its_owner(make_app: t.Callable[..., Flask]) -> None:
    looked_up: list[tuple[str, bool]] = []

    def owner_lookup(name: str) -> int | None:
        from flask import has_app_context

        looked_up.append((name, has_app_context()))
        return {"susan": 7, "bob": 8}.get(name)

    app = make_app(principal=lambda: "7", owner_lookup=owner_lookup)
    task_id = send(app, "any")
    listed = run(app, "tasks", "susan")
    assert listed.exit_code == 0, listed.output
    assert listed.stderr == "susan is owner 7\n"
    assert task_id in listed.stdout and listed.stdout.endswith("1 task(s)\n")
    assert looked_up == [("susan", True)]
    assert "no tasks for 8" in run(app, "tasks", "bob").stdout  # bob has none
    unknown = run(app, "tasks", "carol")
    assert "no tasks for carol (the owner lookup knows no user 'carol')" in unknown.output
    assert task_id in run(app, "tasks", "7").stdout  # an owner id still works as it is
    exported = run(app, "export-user", "susan")
    assert [row["task"]["id"] for row in json.loads(exported.stdout)["tasks"]] == [task_id]
    trimmed = run(app, "trim", "susan")
    assert trimmed.exit_code == 0 and trimmed.stdout.startswith("7  tenant=-"), trimmed.output
    erased = run(app, "erase-user", "susan", "--yes")
    assert f"deleted task {task_id}" in erased.stdout and "erased 7: 1 task(s)" in erased.stdout


def test_tasks_lists_every_tier_of_one_owner(make_app: t.Callable[..., Flask]) -> None:
    app = make_app()
    mine = {send(app, token) for token in ("alice", "alice", "alice-read", "alice-t2")}
    theirs = send(app, "bob")
    result = run(app, "tasks", "alice")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["ID", "STATE", "SKILL", "UPDATED", "TENANT", "SCOPES"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:-1]}
    assert set(rows) == mine
    assert theirs not in result.output
    assert lines[-1] == "4 task(s)"
    tiers = sorted((row[3], row[4]) for row in rows.values())
    assert tiers == [("-", "session"), ("-", "session"), ("-", "tasks:read"), ("t2", "session")]
    assert all(row[:2] == ["COMPLETED", "echo"] for row in rows.values())
    assert run(app, "tasks", "carol").output.startswith("no tasks for carol (owners are the ids")


def test_export_user_prints_that_users_data(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(config={"A2A_ALLOW_PRIVATE_PUSH": True})
    task_id = send(app, "alice")
    send(app, "bob")
    made = (
        A2ATestClient(app, token="alice")
        .rpc(
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": "c1", "url": "http://127.0.0.1:9/hook"},
        )
        .result
    )
    assert made["id"] == "c1"
    result = run(app, "export-user", "alice")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [row["task"]["id"] for row in data["tasks"]] == [task_id]
    assert {row["owner"] for row in data["tasks"]} == {"alice"}
    assert [c["id"] for c in data["pushConfigs"]] == ["c1"]


def test_erase_user_asks_first_and_a_no_deletes_nothing(make_app: t.Callable[..., Flask]) -> None:
    app = make_app()
    task_id = send(app, "alice")
    result = run(app, "erase-user", "alice", input="n\n")
    assert result.exit_code == 1
    assert "Erase 1 task(s) and 0 push config(s) of alice?" in result.output
    assert "Aborted" in result.output
    store = app.extensions["a2a"].exchange.store
    assert store.get_task(task_id) is not None


def test_erase_user_deletes_only_that_user(make_app: t.Callable[..., Flask]) -> None:
    app = make_app()
    gone = [send(app, "alice"), send(app, "alice-read")]
    kept = send(app, "bob")
    result = run(app, "erase-user", "alice", input="y\n")
    assert result.exit_code == 0, result.output
    for task_id in gone:
        assert f"deleted task {task_id}" in result.output
    assert "erased alice: 2 task(s), 0 push config(s)" in result.output
    store = app.extensions["a2a"].exchange.store
    assert all(store.get_task(task_id) is None for task_id in gone)
    assert store.get_task(kept) is not None
    assert run(app, "erase-user", "alice", "--yes").output.startswith("nothing stored for alice")


def test_erase_user_cuts_a_live_run(make_app: t.Callable[..., Flask]) -> None:
    gate = Gate()
    app = make_app(skills=[Skill(id="gate", name="Gate", description="x", handler=gate.handler)])
    client = A2ATestClient(app, token="alice")
    started = client.send("x", skill="gate", configuration={"returnImmediately": True})
    assert gate.entered.wait(10)
    result = run(app, "erase-user", "alice", "--yes")
    assert result.exit_code == 0, result.output
    exchange = app.extensions["a2a"].exchange
    assert exchange.store.get_task(started["task"]["id"]) is None
    runs = exchange.live_runs()
    assert all(run.done.wait(10) for run in runs)


# ------------------------------------------------------------------ trim


def test_trim_applies_a_lowered_bound_per_tier(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any]
) -> None:
    store = new_store()
    before = make_app(store=store, config={"A2A_TERMINAL_TASK_RETENTION": -1})
    session = [send(before, "alice", str(n)) for n in range(4)]
    narrow = [send(before, "alice-read", str(n)) for n in range(2)]
    bobs = [send(before, "bob", str(n)) for n in range(3)]
    after = make_app(store=store, config={"A2A_TERMINAL_TASK_RETENTION": 2})
    result = run(after, "trim", "alice")
    assert result.exit_code == 0, result.output
    assert "alice  tenant=-  scopes=session  kept 2, deleted 2, canceled 0 paused" in result.output
    assert "alice  tenant=-  scopes=tasks:read  kept 2, deleted 0, canceled 0 paused" in (
        result.output
    )
    assert result.output.splitlines()[-1] == "trimmed 1 owner(s): 2 task(s) deleted, 0 canceled"
    left = {task_id for task_id in session + narrow + bobs if store.get_task(task_id) is not None}
    assert left == set(session[2:] + narrow + bobs)


def test_trim_cancels_paused_tasks_past_their_bound(
    make_app: t.Callable[..., Flask], new_store: t.Callable[..., t.Any]
) -> None:
    store = new_store()
    before = make_app(skills=[PAUSE], store=store, config={"A2A_PAUSED_TASK_RETENTION": -1})
    paused = [send(before, "alice", str(n), skill="pause") for n in range(3)]
    after = make_app(skills=[PAUSE], store=store, config={"A2A_PAUSED_TASK_RETENTION": 1})
    result = run(after, "trim", "alice")
    assert result.exit_code == 0, result.output
    assert "kept 3, deleted 0, canceled 2 paused" in result.output
    states = [store.get_task(task_id).task.status.state for task_id in paused]
    assert states == [TaskState.CANCELED, TaskState.CANCELED, TaskState.INPUT_REQUIRED]


def test_trim_needs_owners_unless_the_store_lists_them(make_app: t.Callable[..., Flask]) -> None:
    class Unlisting:
        """A custom store (not one that lives in this process) that cannot list its owners."""

        def __init__(self) -> None:
            self._store = MemoryStore()

        def __getattr__(self, name: str) -> t.Any:
            if name == "owners":
                raise AttributeError(name)
            return getattr(self._store, name)

    app = make_app(store=Unlisting())
    result = run(app, "trim")
    assert result.exit_code == 2
    assert "cannot list its owners" in result.output

    store = MemoryStore()  # the built-in stores list their owners
    before = make_app(store=store, config={"A2A_TERMINAL_TASK_RETENTION": -1})
    for token in ("alice", "alice", "bob", "bob"):
        send(before, token)
    after = make_app(store=store, config={"A2A_TERMINAL_TASK_RETENTION": 1})
    result = run(after, "trim")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "trimmed 2 owner(s): 2 task(s) deleted, 0 canceled"
    assert all(len(store.export_owner(owner)["tasks"]) == 1 for owner in ("alice", "bob"))


def test_trim_with_retention_off_does_nothing(make_app: t.Callable[..., Flask]) -> None:
    config = {"A2A_TERMINAL_TASK_RETENTION": -1, "A2A_PAUSED_TASK_RETENTION": -1}
    app = make_app(config=config)
    task_ids = [send(app, "alice") for _ in range(2)]
    result = run(app, "trim", "alice")
    assert result.exit_code == 0
    assert "retention is off" in result.output
    store = app.extensions["a2a"].exchange.store
    assert all(store.get_task(task_id) is not None for task_id in task_ids)


# ------------------------------------------------------------------ call (a live agent)


@pytest.fixture
def agent() -> t.Iterator[tuple[Flask, str]]:
    app = create_app({"TESTING": True, "A2A_KEEPALIVE_INTERVAL": 0.2})
    try:
        with serve(app) as base:
            yield app, base
    finally:
        app.extensions["a2a"].exchange.shutdown(5)


def test_call_prints_the_task(agent: tuple[Flask, str]) -> None:
    app, base = agent
    result = run(
        app, "call", base, "echo", "--text", "hi", "--data", '{"n": 1}', "--token", "alice-token"
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("task ") and lines[0].endswith(": COMPLETED")
    assert lines[1:] == ["  artifact echo:", "    hi", '    {"n": 1}']
    task_id = lines[0].split()[1].rstrip(":")
    assert app.extensions["a2a"].exchange.store.get_task(task_id, "alice") is not None


def test_call_streams_one_line_per_event(agent: tuple[Flask, str]) -> None:
    app, base = agent
    result = run(
        app,
        "call",
        base + "/a2a",
        "countdown",
        "--data",
        '{"steps": 2, "delay": 0.01}',
        "--stream",
        "--token",
        "alice-token",
    )
    assert result.exit_code == 0, result.output
    events = [line.split(None, 1)[1] for line in result.output.splitlines()]
    assert events[0].startswith("SUBMITTED  task ")
    assert events[1:] == [
        "WORKING",
        "artifact countdown: 2...",
        "artifact countdown (+): 1...",
        "COMPLETED  liftoff",
    ]
    assert app.extensions["a2a"].exchange.seats.count("alice") == 0


def test_call_json_output(agent: tuple[Flask, str]) -> None:
    app, base = agent
    result = run(app, "call", base, "echo", "--text", "x", "--json", "--token", "alice-token")
    assert json.loads(result.output)["status"]["state"] == "TASK_STATE_COMPLETED"
    streamed = run(
        app, "call", base, "echo", "--text", "x", "--json", "--stream", "--token", "alice-token"
    )
    kinds = [next(iter(json.loads(line))) for line in streamed.output.splitlines()]
    assert kinds[0] == "task" and kinds[-1] == "statusUpdate"


def test_call_entity_operation_and_resume(agent: tuple[Flask, str]) -> None:
    app, base = agent
    result = run(
        app,
        "call",
        base,
        "echo",
        "--operation",
        "list",
        "--arguments",
        '{"limit": 2}',
        "--token",
        "alice-token",
    )
    assert '{"skill": "echo", "operation": "list", "arguments": {"limit": 2}}' in result.output
    asked = run(app, "call", base, "greet", "--text", "hi", "--token", "alice-token")
    assert asked.exit_code == 0
    task_id = asked.output.split()[1].rstrip(":")
    done = run(
        app, "call", base, "greet", "--text", "Ada", "--task-id", task_id, "--token", "alice-token"
    )
    assert done.output.splitlines()[-1] == "    Hello, Ada!"


def test_call_refusals_exit_non_zero(agent: tuple[Flask, str]) -> None:
    app, base = agent
    exchange = app.extensions["a2a"].exchange
    anonymous = run(app, "call", base, "echo", "--text", "hi")
    assert anonymous.exit_code == 1
    assert "UnauthenticatedError (-31401)" in anonymous.output
    rejected = run(app, "call", base, "nope", "--token", "alice-token")
    assert rejected.exit_code == 1
    assert ": REJECTED" in rejected.output and 'unknown skill "nope"' in rejected.output
    bad = run(app, "call", base, "echo", "--data", "{bad", "--token", "alice-token")
    assert bad.exit_code == 2 and "--data" in bad.output
    not_object = run(
        app,
        "call",
        base,
        "echo",
        "--operation",
        "get",
        "--arguments",
        "[1]",
        "--token",
        "alice-token",
    )
    assert not_object.exit_code == 2
    assert len(exchange.store.export_owner("alice")["tasks"]) == 1  # only the rejected one
    missing = run(app, "call", base + "/nowhere/", "echo", "--token", "alice-token")
    assert missing.exit_code == 1


def test_entry_point_registers_the_group() -> None:
    env = {**os.environ, "FLASK_APP": "examples/agent.py"}
    done = subprocess.run(
        [sys.executable, "-m", "flask", "a2a", "skills"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()[1:]] == [
        "echo",
        "countdown",
        "greet",
    ]


@pytest.mark.parametrize(
    "command",
    [
        ["tasks", "alice"],
        ["export-user", "alice"],
        ["erase-user", "alice", "--yes"],
        ["trim"],
    ],  # fmt: skip
)
def test_commands_refuse_a_store_that_lives_in_the_server(command: list[str]) -> None:
    """The example agent keeps tasks in the memory store, in its server's process: in the
    command's own process that store is empty, and "no tasks" or "nothing stored" would tell
    an operator answering an erasure request that it is done."""
    done = subprocess.run(
        [sys.executable, "-m", "flask", "a2a", *command],
        cwd=ROOT,
        env={**os.environ, "FLASK_APP": "examples/agent.py"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout
    assert done.stdout == ""
    refusal = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    expected = (
        f"Error: flask a2a {command[0]}: the memory store keeps tasks inside the server process "
        "that made them, and this command runs in a process of its own, which holds none of "
        "them; to manage tasks from the command line, use a SQL store (A2A_DATABASE_URL, or "
        "Flask-SQLAlchemy on the app)"
    )
    assert refusal == [expected]


# ------------------------------------------------------------------ the exchange's log lines

#: A host app that configures logging at different moments (argv[1] says which).
LOGGING_HOST = """
import logging, sys
from flask import Flask
from flask_a2a import A2A, Principal, Skill
from tests.conftest import echo

if sys.argv[1] == "before":
    logging.basicConfig(level=logging.INFO, format="HOST %(message)s")
app = Flask("logging_host")
A2A(app, skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
    principal=lambda: Principal(owner="alice"))
log = logging.getLogger("flask_a2a")
log.info("flask_a2a: first info")
log.warning("flask_a2a: first warning")
if sys.argv[1] == "after":
    logging.basicConfig(format="HOST %(message)s")  # the root at WARNING, as by default
    log.info("flask_a2a: second info")
    log.warning("flask_a2a: second warning")
    logging.getLogger().setLevel(logging.INFO)
    log.info("flask_a2a: third info")
"""


def host_logs(when: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", LOGGING_HOST, when], cwd=ROOT, capture_output=True, text=True,
        timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [line.split("] ", 1)[-1] for line in done.stderr.splitlines()]


def test_log_lines_show_once_whenever_the_host_configures_logging() -> None:
    # Nothing configured: INFO shows too (Python alone drops it), on stderr, once.
    assert host_logs("never") == ["INFO flask_a2a: first info", "WARNING flask_a2a: first warning"]
    # Configured before init_app: the host's handler alone, at the host's level.
    assert host_logs("before") == ["HOST flask_a2a: first info", "HOST flask_a2a: first warning"]
    # Configured after: from then on the host's handler alone (never twice), at its level.
    assert host_logs("after") == [
        "INFO flask_a2a: first info", "WARNING flask_a2a: first warning",
        "HOST flask_a2a: second warning", "HOST flask_a2a: third info",
    ]  # fmt: skip


@pytest.mark.live
def test_the_store_line_shows_under_flask_run_and_gunicorns_default_logging() -> None:
    from tests.live_server import LiveGunicorn, free_port

    port = free_port()
    flask_run = subprocess.Popen(
        [sys.executable, "-m", "flask", "run", "--port", str(port)],  # FLASK_APP: any Flask
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "FLASK_APP": "examples/agent.py"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        client = A2AClientForLogs(f"http://127.0.0.1:{port}")
        assert client.list_tasks() == 200  # the first call chooses the store
    finally:
        flask_run.terminate()
        _, err = flask_run.communicate(timeout=15)
    assert err.count("flask_a2a: task store: MemoryStore") == 1, err

    server = LiveGunicorn("examples.agent:create_app()", chdir=str(ROOT),
                          env={"PYTHONPATH": str(ROOT)})  # fmt: skip
    log = server.stop()
    assert log.count("flask_a2a: task store: MemoryStore") == 1, log  # chosen at the boot


class A2AClientForLogs:
    """One ListTasks over a socket, once the server answers (it is starting)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def list_tasks(self) -> int:
        import time

        import requests

        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        deadline = time.monotonic() + 30
        while True:
            try:
                return requests.post(
                    self.url + "/a2a",
                    json=body,
                    timeout=10,
                    headers={"Authorization": "Bearer alice-token"},
                ).status_code
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)  # a subprocess's socket: there is no event to await


def test_the_refusal_names_a_memory_store_the_host_passed(make_app: t.Callable[..., Flask]) -> None:
    app = make_app(store=MemoryStore())  # holds nothing: as in a command's own process
    result = run(app, "tasks", "alice")
    assert result.exit_code == 1
    assert result.output.strip().endswith(
        "to manage tasks from the command line, you passed store=MemoryStore() to A2A: leave "
        "store= out to use A2A_DATABASE_URL or the app's Flask-SQLAlchemy database"
    )
