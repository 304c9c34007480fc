"""Several agents in one app (issue 25, item 7): each its own path, card, skills, entities and
settings; the store, the run pool, the bus and the metrics shared; every task visible to its
own agent only (the wrong agent gets -32001 from every method that names a task)."""

from __future__ import annotations

import json
import typing as t
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy as sa
from flask import Flask, request, url_for
from marshmallow import Schema, fields
from prometheus_client.parser import text_string_to_metric_families

from flask_a2a import A2A, ConfigError, Entity, Part, Principal, Skill, TaskContext
from flask_a2a.agents import agents
from flask_a2a.cli import a2a_cli
from flask_a2a.exchange.bus import Bus, BusHooks
from flask_a2a.store.sql import SQLStore
from flask_a2a.testing import A2ATestClient
from tests import stack

from .conftest import Gate, token_principal, wait_for
from .redis_support import REDIS_URL, redis_prefix  # noqa: F401


def echo(task: TaskContext) -> None:
    task.artifact([Part(text=f"{task.skill.id}:{task.principal.tenant}")], name="echo")


def ask(task: TaskContext) -> None:
    task.require_input("more?")


def skills(prefix: str) -> list[Skill]:
    return [
        Skill(id=f"{prefix}-echo", name="Echo", description="Echo.", handler=echo),
        Skill(id=f"{prefix}-ask", name="Ask", description="Asks.", handler=ask),
    ]


class Pair(t.NamedTuple):
    app: Flask
    support: A2A
    billing: A2A
    a: A2ATestClient  # support, the default agent
    b: A2ATestClient  # billing, under /billing


def pair(app: Flask, **billing: t.Any) -> Pair:
    app.config["TESTING"] = True
    support = A2A(app, skills=skills("support"), principal=token_principal)
    billing_agent = A2A(
        app,
        name="billing",
        url_prefix="/billing",
        skills=skills("billing"),
        principal=token_principal,
        **billing,
    )
    return Pair(
        app,
        support,
        billing_agent,
        A2ATestClient(app, token="alice"),
        A2ATestClient(app, token="alice", agent="billing"),
    )


@pytest.fixture
def two() -> t.Iterator[Pair]:
    made = pair(Flask("two"), config={"A2A_MAX_CONCURRENT_RUNS_PER_OWNER": 1})
    yield made
    for agent in (made.support, made.billing):
        agent.shutdown(5, app=made.app)


def test_a_second_instance_was_refused_and_now_needs_only_a_name() -> None:
    app = Flask("refused")
    A2A(app, skills=skills("a"), principal=token_principal)
    with pytest.raises(ConfigError, match="give a second agent its own name="):
        A2A(app, skills=skills("b"), principal=token_principal, url_prefix="/b")
    second = A2A(app, name="b", url_prefix="/b", skills=skills("b"), principal=token_principal)
    with pytest.raises(ConfigError, match="already registered on this app as the agent 'b'"):
        second.init_app(app)
    assert list(agents(app).states) == ["default", "b"]
    assert app.extensions["a2a"] is agents(app).get("default")  # the first, as before


def test_each_agent_has_its_path_card_and_skills(two: Pair) -> None:
    client = two.app.test_client()
    root = client.get("/.well-known/agent-card.json").get_json()
    assert [s["id"] for s in root["skills"]] == ["support-echo", "support-ask"]
    assert root["supportedInterfaces"][0]["url"] == "http://localhost/a2a"
    card = client.get("/billing/.well-known/agent-card.json").get_json()
    assert [s["id"] for s in card["skills"]] == ["billing-echo", "billing-ask"]
    assert [i["url"] for i in card["supportedInterfaces"]] == [
        "http://localhost/billing/a2a",
        "http://localhost/billing/a2a/rest",
    ]
    assert two.b.send("hi", skill="billing-echo")["task"]["artifacts"][0]["parts"] == [
        {"text": "billing-echo:None"}  # the handler sees the caller's own tenant
    ]
    # An agent's skills are its own: support has no billing skill.
    assert two.a.send("hi", skill="billing-echo")["task"]["status"]["state"] == (
        "TASK_STATE_REJECTED"
    )
    with two.app.test_request_context():  # one blueprint per agent, as Flask users expect
        assert url_for("a2a_billing.exchange") == "/billing/a2a"
        assert url_for("a2a.exchange") == "/a2a"
    rest = A2ATestClient(two.app, token="alice", agent="billing", binding="rest")
    assert rest.rest_path == "/billing/a2a/rest"
    assert rest.send("hi", skill="billing-echo")["task"]["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )


def test_settings_are_per_agent_and_the_rest_is_shared(two: Pair) -> None:
    support = two.support.exchange(two.app)
    billing = two.billing.exchange(two.app)
    assert support.settings.max_concurrent_runs_per_owner == 16
    assert billing.settings.max_concurrent_runs_per_owner == 1  # config= of billing alone
    assert two.support.store(two.app) is two.billing.store(two.app)
    assert support.runner is billing.runner and support.bus is billing.bus


METHODS: t.Final = (
    "GetTask", "CancelTask", "SubscribeToTask", "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
)  # fmt: skip


def params(method: str, task_id: str) -> dict[str, t.Any]:
    if method == "CreateTaskPushNotificationConfig":
        return {"taskId": task_id, "id": "c1", "url": "https://hooks.example.com/a2a"}
    if method in ("GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"):
        return {"taskId": task_id, "id": "c1"}
    if method == "ListTaskPushNotificationConfigs":
        return {"taskId": task_id}
    return {"id": task_id}


def error_of(client: A2ATestClient, method: str, task_id: str) -> dict[str, t.Any]:
    if method == "SubscribeToTask":
        _, events = client.stream(method, params(method, task_id))
        assert len(events) == 1, events
        return t.cast(dict[str, t.Any], events[0]["error"])
    return client.rpc(method, params(method, task_id)).error


@pytest.mark.parametrize("method", METHODS)
def test_the_wrong_agent_gets_task_not_found(two: Pair, method: str) -> None:
    for owner, other, skill in ((two.a, two.b, "support-ask"), (two.b, two.a, "billing-ask")):
        task = owner.send("hi", skill=skill)["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        owner.rpc(
            "CreateTaskPushNotificationConfig",
            params("CreateTaskPushNotificationConfig", task["id"]),
        )
        error = error_of(other, method, task["id"])
        assert error["code"] == -32001 and error["message"] == "Task not found", (method, error)
        # ... and the task is untouched: its own agent still sees it paused, config in place.
        mine = owner.rpc("GetTask", {"id": task["id"]}).result
        assert mine["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        configs = owner.rpc("ListTaskPushNotificationConfigs", {"taskId": task["id"]}).result
        assert [c["id"] for c in configs["configs"]] == ["c1"]


def test_the_wrong_agent_cannot_list_or_resume_the_task(two: Pair) -> None:
    task = two.a.send("hi", skill="support-ask")["task"]
    mine = two.b.send("hi", skill="billing-echo")["task"]
    page = two.b.rpc("ListTasks", {}).result
    assert [t["id"] for t in page["tasks"]] == [mine["id"]] and page["totalSize"] == 1
    resume = {"message": A2ATestClient.message("x", skill="billing-ask", task_id=task["id"])}
    assert two.b.rpc("SendMessage", resume).error["code"] == -32001
    assert {t["id"] for t in two.a.rpc("ListTasks", {}).result["tasks"]} == {task["id"]}


def test_tasks_of_a_named_agent_are_stored_under_its_tenant(tmp_path: Path) -> None:
    store = SQLStore(sa.create_engine(f"sqlite:///{tmp_path / 'agents.db'}"))
    app = Flask("stored")

    def in_tenant() -> Principal | None:
        found = token_principal()
        tenant = request.headers.get("X-Tenant")
        return None if found is None else Principal(found.owner, tenant=tenant)

    A2A(app, skills=skills("support"), principal=in_tenant, store=store)
    A2A(app, name="billing", url_prefix="/billing", skills=skills("billing"), principal=in_tenant)
    plain = A2ATestClient(app, token="alice").send("hi", skill="support-echo")["task"]
    billed = A2ATestClient(app, token="alice", agent="billing")
    acme = billed.rpc(
        "SendMessage",
        {"message": A2ATestClient.message("hi", skill="billing-echo")},
        headers={"X-Tenant": "acme"},
    ).result["task"]
    assert acme["artifacts"][0]["parts"] == [{"text": "billing-echo:acme"}]  # the caller's own
    with app.app_context():
        plain_record, acme_record = store.get_task(plain["id"]), store.get_task(acme["id"])
        assert plain_record is not None and acme_record is not None
        assert plain_record.tenant is None  # the default agent: as before
        assert acme_record.tenant == "@billing/acme"
    # The default agent refuses a tenant that could read another agent's tasks: the tenant
    # came with the request, so it is the caller's fault, named (-32602 / 400), not -32603.
    rule = "principal.tenant: must not start with '@' while several agents share the store"
    forged = A2ATestClient(app, token="alice").rpc(
        "ListTasks", {}, headers={"X-Tenant": "@billing/acme"}
    )
    assert forged.error["code"] == -32602 and rule in forged.error["message"]
    assert "tasks" not in json.dumps(forged.json)
    over_rest = app.test_client().get(
        "/a2a/rest/tasks", headers={"Authorization": "Bearer alice", "X-Tenant": "@billing"}
    )
    assert over_rest.status_code == 400 and rule in over_rest.get_json()["error"]["message"]
    sent = A2ATestClient(app, token="alice").rpc(
        "SendMessage",
        {"message": A2ATestClient.message("hi", skill="support-echo")},
        headers={"X-Tenant": "@x"},
    )
    assert sent.error["code"] == -32602 and rule in sent.error["message"]
    with app.app_context():
        assert len(A2A().export_user_data("alice", app=app)["tasks"]) == 2  # nothing written


def test_one_agent_app_stores_what_it_always_did(make_app: t.Callable[..., Flask]) -> None:
    app = make_app()
    task = A2ATestClient(app, token="alice").send("hi", skill="echo")["task"]
    [record] = A2A().export_user_data("alice", app=app)["tasks"]
    assert record["task"]["id"] == task["id"] and record["tenant"] is None
    assert list(agents(app).states) == ["default"]


def test_the_well_known_card_is_one_agents_or_none() -> None:
    none = Flask("none")
    A2A(none, name="a", url_prefix="/a", skills=skills("a"), principal=token_principal)
    A2A(none, name="b", url_prefix="/b", skills=skills("b"), principal=token_principal)
    assert none.test_client().get("/.well-known/agent-card.json").status_code == 404
    assert none.test_client().get("/b/.well-known/agent-card.json").status_code == 200
    chosen = Flask("chosen")
    A2A(chosen, name="a", url_prefix="/a", skills=skills("a"), principal=token_principal)
    A2A(
        chosen,
        name="b",
        url_prefix="/b",
        skills=skills("b"),
        principal=token_principal,
        well_known_card=True,
    )
    card = chosen.test_client().get("/.well-known/agent-card.json").get_json()
    assert card["supportedInterfaces"][0]["url"] == "http://localhost/b/a2a"
    with pytest.raises(ConfigError, match="already serves the card"):
        A2A(
            chosen,
            name="c",
            url_prefix="/c",
            skills=skills("c"),
            principal=token_principal,
            well_known_card=True,
        )
    clash = Flask("clash")
    A2A(clash, skills=skills("a"), principal=token_principal)
    with pytest.raises(ConfigError, match="already serves the card"):
        A2A(
            clash,
            name="b",
            skills=skills("b"),
            principal=token_principal,
            config={"A2A_PATH": "/b"},
        )


class Invoice(Schema):
    id = fields.String(dump_only=True)
    total = fields.String(required=True)


def test_each_agent_has_its_own_entities() -> None:
    app = Flask("entities")
    app.add_url_rule("/api/invoices", "invoices", lambda: {"data": [{"id": "1"}]})
    A2A(app, skills=skills("support"), principal=token_principal)
    A2A(
        app,
        name="billing",
        url_prefix="/billing",
        principal=token_principal,
        entities=[Entity("invoices", schema=Invoice, operations=("list",))],
    )
    assert [s.id for s in A2A().skills(app)] == ["support-echo", "support-ask"]
    billing = agents(app).get("billing")
    assert list(billing.exchange.skills) == ["entity.invoices"]
    task = A2ATestClient(app, token="alice", agent="billing").send(
        data={"skill": "entity.invoices", "operation": "list"}
    )["task"]
    assert task["artifacts"][0]["parts"] == [{"data": {"data": [{"id": "1"}]}}]


def test_metrics_are_labelled_by_agent() -> None:
    app = Flask("metered")
    pair(app, config={"A2A_METRICS_PATH": "/metrics"})

    def started() -> dict[tuple[str, str], float]:
        text = app.test_client().get("/billing/metrics").get_data(as_text=True)
        return {
            (s.labels["agent"], s.labels["skill"]): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "a2a_runs_started_total"
        }

    before = started()
    A2ATestClient(app, token="alice").send("hi", skill="support-echo")
    A2ATestClient(app, token="alice", agent="billing").send("hi", skill="billing-echo")
    after = started()
    for key in (("default", "support-echo"), ("billing", "billing-echo")):
        assert after[key] - before.get(key, 0.0) == 1, key


def test_the_agent_role_serves_every_agents_routes() -> None:
    app = Flask("role")
    app.config["A2A_ROLE"] = "agent"
    app.add_url_rule("/admin", "admin", lambda: "secret")
    pair(app)
    client = app.test_client()
    assert client.get("/admin").status_code == 404
    for path in (
        "/.well-known/agent-card.json",
        "/billing/.well-known/agent-card.json",
        "/healthz",
        "/billing/healthz",
    ):
        assert client.get(path).status_code == 200, path
    assert (
        A2ATestClient(app, token="alice", agent="billing").send("hi", skill="billing-echo")["task"][
            "status"
        ]["state"]
        == "TASK_STATE_COMPLETED"
    )


def test_erasing_a_user_reaches_every_agent(two: Pair) -> None:
    two.a.send("hi", skill="support-echo")
    two.b.send("hi", skill="billing-echo")
    exported = two.billing.export_user_data("alice", app=two.app)
    assert len(exported["tasks"]) == 2  # the user's data, whichever agent holds it
    assert two.billing.erase_user_data("alice", app=two.app) == 2
    assert two.a.rpc("ListTasks", {}).result["totalSize"] == 0


def test_the_cli_selects_an_agent(two: Pair) -> None:
    two.b.send("hi", skill="billing-echo")
    two.a.send("hi", skill="support-echo")
    runner = stack.cli_runner(two.app)
    skills_of = runner.invoke(a2a_cli, ["--agent", "billing", "skills"])
    assert skills_of.exit_code == 0, skills_of.output
    assert "billing-echo" in skills_of.output and "support-echo" not in skills_of.output
    tasks = runner.invoke(a2a_cli, ["--agent", "billing", "tasks", "alice"])
    assert "billing-echo" in tasks.output and "support-echo" not in tasks.output
    card = runner.invoke(a2a_cli, ["--agent", "billing", "card"])
    assert json.loads(card.stdout)["skills"][0]["id"] == "billing-echo"
    first = runner.invoke(a2a_cli, ["skills"])
    assert "support-echo" in first.output and "choose with flask a2a --agent NAME" in (first.stderr)
    unknown = runner.invoke(a2a_cli, ["--agent", "nope", "skills"])
    assert unknown.exit_code != 0 and "agents: default, billing" in unknown.output


class SharedBus(Bus):
    """A bus shared by replicas, as the exchange sees one: it keeps its hooks, counts closes."""

    def __init__(self) -> None:
        super().__init__()
        self.hooks: BusHooks | None = None
        self.closed = 0

    def bind(self, hooks: BusHooks) -> None:
        self.hooks = hooks

    def close(self) -> None:
        self.closed += 1


def test_a_shared_bus_asks_every_agent_and_closes_with_the_last(gate: Gate) -> None:
    bus = SharedBus()
    app = Flask("bus")
    support = A2A(
        app,
        principal=token_principal,
        bus=bus,
        skills=[Skill(id="wait", name="Wait", description="Waits.", handler=gate.handler)],
    )
    billing = A2A(
        app,
        name="billing",
        url_prefix="/billing",
        principal=token_principal,
        skills=skills("billing"),
    )  # bound the bus last
    client = A2ATestClient(app, token="alice")
    task = client.rpc(
        "SendMessage",
        {
            "message": A2ATestClient.message("hi", skill="wait"),
            "configuration": {"returnImmediately": True},
        },
    ).result["task"]
    assert gate.entered.wait(10)
    assert bus.hooks is not None and bus.hooks.running(task["id"])  # support's run, seen
    # Another replica settled it: support checks its run, though billing bound the bus last.
    checked: list[str] = []
    support.exchange(app).replicas = t.cast(
        t.Any, SimpleNamespace(check_now=lambda run: checked.append(run.task_id))
    )
    bus.hooks.settled_elsewhere(task["id"], 99)
    assert wait_for(lambda: checked == [task["id"]])
    gate.release.set()
    assert support.shutdown(5, app=app) and bus.closed == 0  # billing still uses it
    assert billing.shutdown(5, app=app) and bus.closed == 1


def test_fleet_limits_count_each_agent_apart(redis_prefix: str, gate: Gate) -> None:  # noqa: F811
    """With A2A_FLEET_LIMITS, each agent's per-owner cap counts its own runs: alice's run on
    support does not take billing's only slot."""
    app = Flask("fleet")
    app.config.update(
        A2A_REDIS_URL=REDIS_URL,
        A2A_REDIS_PREFIX=redis_prefix,
        A2A_FLEET_LIMITS=True,
        A2A_MAX_CONCURRENT_RUNS_PER_OWNER=1,
    )
    wait = [Skill(id="wait", name="Wait", description="Waits.", handler=gate.handler)]
    support = A2A(app, principal=token_principal, skills=wait)
    billing = A2A(
        app,
        name="billing",
        url_prefix="/billing",
        principal=token_principal,
        skills=skills("billing"),
    )
    try:
        held = A2ATestClient(app, token="alice").rpc(
            "SendMessage",
            {
                "message": A2ATestClient.message("hi", skill="wait"),
                "configuration": {"returnImmediately": True},
            },
        )
        assert held.result["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        assert gate.entered.wait(10)
        second = A2ATestClient(app, token="alice").rpc(
            "SendMessage", {"message": A2ATestClient.message("hi", skill="wait")}
        )
        assert second.error["code"] == -32004  # support's cap: one run of alice's
        billed = A2ATestClient(app, token="alice", agent="billing").send(
            "hi", skill="billing-echo"
        )["task"]
        assert billed["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        gate.release.set()
        support.shutdown(5, app=app)
        billing.shutdown(5, app=app)


def test_the_host_hooks_see_the_callers_own_tenant() -> None:
    seen: list[str | None] = []

    def in_acme() -> Principal | None:
        found = token_principal()
        return None if found is None else Principal(found.owner, tenant="acme")

    def extended(principal: Principal) -> dict[str, t.Any]:
        seen.append(principal.tenant)
        return {"name": "Billing, extended"}

    app = Flask("hooks")
    A2A(app, skills=skills("support"), principal=in_acme)
    A2A(
        app,
        name="billing",
        url_prefix="/billing",
        skills=skills("billing"),
        principal=in_acme,
        extended_card=extended,
    )
    billing = A2ATestClient(app, token="alice", agent="billing")
    assert billing.rpc("GetExtendedAgentCard", {}).result == {"name": "Billing, extended"}
    task = billing.send("hi", skill="billing-echo")["task"]
    assert task["artifacts"][0]["parts"] == [{"text": "billing-echo:acme"}]
    assert seen == ["acme"]


def test_each_agents_rest_prefix_answers_its_own_json_for_an_unrouted_path(two: Pair) -> None:
    """A path werkzeug cannot route under an agent's REST prefix is that agent's JSON 404 or 405
    (the prefixed agent's too), never the host's HTML page."""
    client = two.app.test_client()
    for prefix in ("", "/billing"):
        missing = client.get(f"{prefix}/a2a/rest/")
        assert missing.status_code == 404 and missing.json is not None
        assert missing.json["error"]["status"] == "NOT_FOUND"
        wrong_verb = client.open(f"{prefix}/a2a/rest/tasks", method="TRACE")
        assert wrong_verb.status_code == 405 and wrong_verb.json is not None
        assert wrong_verb.json["error"]["status"] == "METHOD_NOT_ALLOWED"
    assert client.get("/elsewhere/").mimetype == "text/html"  # the host's own pages stay
