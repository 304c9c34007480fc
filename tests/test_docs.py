"""Every code sample in docs/ and the README runs.

``python`` blocks of one page run in order in one namespace (a page reads as one program);
``sh`` blocks that are curl calls run against the example agent on a live local server, and
must answer without a JSON-RPC error. Other shell blocks (installs, server starts) are shown,
not run. docs/configuration.md must list every ``A2A_*`` key with its default.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import typing as t
from pathlib import Path

import pytest

from flask_a2a import wiring
from flask_a2a.config import DEFAULTS
from tests import stack

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([*ROOT.joinpath("docs").rglob("*.md"), ROOT / "README.md"])
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)


def blocks(page: Path, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(page.read_text()) if lang == language]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_samples_run(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    samples = blocks(page, "python")
    if not samples:
        pytest.skip("no python samples on this page")
    if page.name == "README.md":
        pytest.skip("the README's sample needs the host's auth: test_readme_sample_* runs it")
    if page.name == "grpc.md":
        pytest.importorskip("grpc_status", reason="the grpc extra is not installed")
    if page.name == "official-sdk.md":  # Python 3.10+ and pydantic 2: not beside old pins
        pytest.importorskip("a2a.client", reason="the official SDK (requirements-interop.txt)")
    monkeypatch.chdir(ROOT)
    namespace: dict[str, t.Any] = {"__name__": f"docs_{page.stem}"}
    before = set(wiring.live_exchanges())
    try:
        for sample in samples:
            exec(compile(sample, str(page), "exec"), namespace)  # noqa: S102
    finally:  # a sample's agents end with it (their engines' connections closed, not collected)
        for exchange in set(wiring.live_exchanges()) - before:
            exchange.shutdown(5)


def curl_samples() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        for sample in blocks(page, "sh"):
            command = sample.replace("\\\n", " ").strip()
            if command.startswith("curl "):
                out.append((str(page.relative_to(ROOT)), command))
    return out


@pytest.fixture(scope="module")
def example_server() -> t.Iterator[str]:
    from examples.agent import create_app
    from tests.live_server import werkzeug_server as serve

    with serve(create_app()) as base_url:
        yield base_url


@pytest.mark.parametrize("where,command", curl_samples())
def test_curl_samples_answer(where: str, command: str, example_server: str) -> None:
    argv = shlex.split(command.replace("http://127.0.0.1:5000", example_server))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    payloads = [line[6:] for line in done.stdout.splitlines() if line.startswith("data: ")]
    for payload in payloads or [done.stdout]:
        answer = json.loads(payload)
        assert "error" not in answer, (where, answer)


def test_configuration_page_lists_every_key_with_its_default() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    for key, default in DEFAULTS.items():
        row = next((line for line in page.splitlines() if line.startswith(f"| `{key}` |")), None)
        assert row is not None, f"{key} is not documented"
        shown = row.split("|")[2].strip().strip("`")
        expected = json.dumps(default) if not isinstance(default, tuple) else "()"
        if isinstance(default, tuple) and default:
            expected = json.dumps(list(default))
        if isinstance(default, bool):
            expected = str(default)
        if default is None:
            expected = "None"
        assert shown == expected, f"{key}: docs say {shown}, default is {expected}"


def test_readme_sample_sums_only_the_callers_invoices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's app, as written, with the one thing it leaves to the host (its auth)."""
    from types import SimpleNamespace

    from flask_a2a.testing import A2ATestClient

    monkeypatch.chdir(tmp_path)  # its sqlite:///invoices.db lands in tmp_path/instance
    users = {"Bearer t7": SimpleNamespace(id=7), "Bearer t8": SimpleNamespace(id=8)}
    namespace: dict[str, t.Any] = {"__name__": "docs_README", "load_user_from_token": users.get}
    (sample,) = blocks(ROOT / "README.md", "python")
    exec(compile(sample, "README.md", "exec"), namespace)  # noqa: S102
    app, db, invoice, a2a = (namespace[k] for k in ("app", "db", "Invoice", "a2a"))
    try:
        with app.app_context():
            db.create_all()
            db.session.add_all(
                [
                    invoice(owner_id=7, amount_cents=1200),
                    invoice(owner_id=7, amount_cents=34),
                    invoice(owner_id=8, amount_cents=99999),
                ]
            )
            db.session.commit()
        client = A2ATestClient(app)
        for token, total in (("t7", 1234), ("t8", 99999)):
            task = client.send("this quarter", skill="summarize-invoices", token=token)["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
            assert task["artifacts"][0]["parts"] == [{"data": {"total_cents": total}}]
        assert client.rpc("ListTasks", {}, token="t8").result["totalSize"] == 1
        assert client.rpc("ListTasks", {}, token="nobody").status == 401
    finally:
        a2a.shutdown(5)
        with app.app_context():
            db.engine.dispose()


def test_several_agents_example_serves_three_agents_apart() -> None:
    """examples/several_agents.py: three agents, three cards, one store; each sees its own."""
    from examples.several_agents import billing, create_app, search_agent, support
    from flask_a2a.testing import A2ATestClient

    app = create_app()
    try:
        client = app.test_client()
        names = {
            path: client.get(path + "/.well-known/agent-card.json").get_json()["name"]
            for path in ("", "/billing", "/search")
        }
        assert names == {"": "Support", "/billing": "Billing", "/search": "Search"}
        alice = A2ATestClient(app, token="alice-token", agent="billing")
        task = alice.send("how much?", skill="invoice-total")["task"]
        assert task["artifacts"][0]["parts"] == [{"data": {"invoices": 2, "total": "155.50"}}]
        found = A2ATestClient(app, token="alice-token", agent="search").send(
            "invoices", skill="search-help"
        )["task"]
        assert found["artifacts"][0]["parts"] == [{"data": {"articles": ["Exporting invoices"]}}]
        # Support (the default agent) does not see billing's task.
        helpdesk = A2ATestClient(app, token="alice-token")
        assert helpdesk.rpc("GetTask", {"id": task["id"]}).error["code"] == -32001
        assert support.store(app) is billing.store(app) is search_agent.store(app)
    finally:
        for agent in (support, billing, search_agent):
            agent.shutdown(5, app=app)


def test_the_factory_app_serves_its_agent(tmp_path: Path) -> None:
    """examples/factory_app: the A2A object in its own module, init_app in create_app; its
    skill reads the app's models, its entity re-enters the app's token API, users are apart."""
    import decimal

    from examples.factory_app import create_app
    from examples.factory_app.agent import a2a
    from examples.factory_app.extensions import db
    from examples.factory_app.models import Invoice, User
    from flask_a2a.cli import a2a_cli
    from flask_a2a.testing import A2ATestClient

    app = create_app(
        {"TESTING": True, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'factory.db'}"}
    )
    twice = create_app({"TESTING": True})  # the factory builds as many apps as asked
    try:
        with app.app_context():
            db.create_all()
            db.session.add_all(
                [
                    User(id=1, username="susan", token="susan-token"),
                    User(id=2, username="bob", token="bob-token"),
                ]
            )
            db.session.add_all(
                [
                    Invoice(owner_id=1, total=decimal.Decimal("120.00")),
                    Invoice(owner_id=1, total=decimal.Decimal("80.50")),
                    Invoice(owner_id=2, total=decimal.Decimal("9.99")),
                ]
            )
            db.session.commit()
        susan = A2ATestClient(app, token="susan-token")
        task = susan.send(skill="invoice-total")["task"]
        assert task["artifacts"][0]["parts"] == [{"data": {"total": "200.50"}}]
        listed = susan.send(
            data={"skill": "entity.invoices", "operation": "list", "arguments": {"page": 1}}
        )["task"]
        assert listed["status"]["state"] == "TASK_STATE_COMPLETED", listed["status"]
        rows = listed["artifacts"][0]["parts"][0]["data"]
        rows = rows["data"] if isinstance(rows, dict) else rows
        assert sorted(r["total"] for r in rows) == ["120.00", "80.50"]  # Susan's only
        bob = A2ATestClient(app, token="bob-token")
        assert bob.rpc("GetTask", {"id": task["id"]}).code == -32001
        assert A2ATestClient(app, token="nope").rpc("ListTasks", {}).status == 401
        assert a2a.skills(app) and [s.id for s in a2a.skills(twice)] == [
            s.id for s in a2a.skills(app)
        ]
        found = stack.cli_runner(app).invoke(a2a_cli, ["tasks", "susan"])
        assert "susan is owner 1" in found.output and "2 task(s)" in found.output
    finally:
        a2a.shutdown(app=app)
        a2a.shutdown(app=twice)
        with app.app_context():
            db.engine.dispose()

    done = subprocess.run(  # the flask CLI finds create_app in the package
        [sys.executable, "-m", "flask", "a2a", "skills"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "FLASK_APP": "examples.factory_app"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()[1:]] == [
        "invoice-total",
        "entity.invoices",
    ]


SIGNATURE = re.compile(r"^((?:flask_a2a\.)?[\w.]*[A-Z]\w*)\((.*?)\)\s*$", re.S | re.M)


def documented_signatures() -> list[tuple[str, list[str]]]:
    """``Name(a, b=1, *, c=None)`` entries of docs/api.md's text blocks: name, parameter names."""
    found = []
    for block in blocks(ROOT / "docs" / "api.md", "text"):
        for entry in re.split(r"\n(?=\S)", block):
            match = SIGNATURE.match(entry.strip())
            if match is None:
                continue
            params, depth, current = [], 0, ""
            for char in match.group(2) + ",":
                if char in "([{":
                    depth += 1
                elif char in ")]}":
                    depth -= 1
                if char == "," and depth == 0:
                    name = current.strip().split("=", 1)[0].strip()
                    if name and name != "*":
                        params.append(name)
                    current = ""
                else:
                    current += char
            found.append((match.group(1), params))
    return found


@pytest.mark.parametrize("name,params", documented_signatures(), ids=lambda v: str(v)[:40])
def test_api_signatures_are_the_codes_own(name: str, params: list[str]) -> None:
    """Each signature docs/api.md shows has the code's parameters, in the code's order."""
    import importlib
    import inspect

    module, _, attr = name.rpartition(".")
    target = getattr(importlib.import_module(module or "flask_a2a"), attr)
    signature = inspect.signature(target)
    assert params == [p for p in signature.parameters if p != "self"], name
