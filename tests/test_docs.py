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
        pytest.skip("the README's sample is the quickstart's, run there")
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
        if isinstance(default, bool):
            expected = str(default)
        if default is None:
            expected = "None"
        assert shown == expected, f"{key}: docs say {shown}, default is {expected}"
