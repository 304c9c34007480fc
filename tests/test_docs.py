"""Every code sample in docs/ and the README runs.

``python`` blocks of one page run in order in one namespace (a page reads as one program);
``sh`` blocks that are curl calls run against the example agent on a live local server, and
must answer without a JSON-RPC error. Other shell blocks (installs, server starts) are shown,
not run. docs/configuration.md must list every ``A2A_*`` key with its default.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import typing as t
from pathlib import Path

import pytest

from flask_a2a.config import DEFAULTS

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
    monkeypatch.chdir(ROOT)
    namespace: dict[str, t.Any] = {"__name__": f"docs_{page.stem}"}
    for sample in samples:
        exec(compile(sample, str(page), "exec"), namespace)  # noqa: S102


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
            db.session.add_all([invoice(owner_id=7, amount_cents=1200),
                                invoice(owner_id=7, amount_cents=34),
                                invoice(owner_id=8, amount_cents=99999)])
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
