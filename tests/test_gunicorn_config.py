"""The documented ``gunicorn.conf.py`` loads in gunicorn's master without Flask, requests or ssl,
so gevent workers patch a clean process (no "MonkeyPatchWarning ... ssl")."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import requests

import flask_a2a
from tests.live_server import LiveGunicorn

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "storage-and-scaling.md"


def documented_conf() -> str:
    """The ``gunicorn.conf.py`` block of docs/storage-and-scaling.md, as written there."""
    found = re.search(r"^`gunicorn\.conf\.py`:\n\n```\w*\n(.*?)^```", DOC.read_text(), re.S | re.M)
    assert found, f"no gunicorn.conf.py block in {DOC}"
    return found.group(1)


def test_importing_the_gunicorn_hooks_loads_nothing_heavy() -> None:
    probe = (
        "import json, sys; import flask_a2a.gunicorn; "
        "print(json.dumps(sorted(m for m in ('ssl', 'flask', 'requests', 'werkzeug', "
        "'sqlalchemy', 'marshmallow', 'gevent', 'flask_a2a.extension') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True)  # fmt: skip
    assert json.loads(out.stdout) == []
    # A bare ``import flask_a2a`` still reaches its submodules as attributes, as before.
    probe = "import flask_a2a; print(flask_a2a.store.MemoryStore.__name__)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True)  # fmt: skip
    assert out.stdout.strip() == "MemoryStore"


def test_the_package_still_offers_its_names() -> None:
    from flask_a2a import A2A, ConfigError, TaskState

    assert A2A.__module__ == "flask_a2a.extension"
    assert issubclass(ConfigError, ValueError) and TaskState.COMPLETED
    assert set(flask_a2a.__all__) <= set(dir(flask_a2a))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        flask_a2a.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_version_is_the_installed_metadata_version() -> None:
    assert flask_a2a.__version__ == importlib.metadata.version("flask-a2a")


@pytest.mark.live
def test_documented_conf_under_gevent_prints_no_monkey_patch_warning(tmp_path: Path) -> None:
    conf = tmp_path / "gunicorn.conf.py"
    conf.write_text(documented_conf())
    # One worker shows the warning as surely as four (it is printed per worker); SQLite keeps
    # the app on a store that any worker count accepts.
    env = {"FLASK_A2A_DATABASE_URL": f"sqlite:///{tmp_path / 'tasks.db'}"}
    server = LiveGunicorn("examples.agent:create_app()", chdir=str(ROOT), env=env,
                          extra=["-c", str(conf)])  # fmt: skip
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}],
            "metadata": {"skill": "echo"}}}}  # fmt: skip
        answer = requests.post(server.url + "/a2a", json=body, timeout=30,
                               headers={"Authorization": "Bearer alice-token"})  # fmt: skip
        assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        log = server.stop()
    assert "Booting worker" in log
    assert "MonkeyPatchWarning" not in log, log[-3000:]
