"""Old pins: the floors setup.cfg states, the refusal at ``init_app``, a host CLI that survives us.

A legacy app's ``flask`` command loads our ``flask.commands`` entry point for every command it
runs; these tests run the real ``flask`` in a subprocess beside a host app whose own command
must work even when flask_a2a cannot import.
"""

from __future__ import annotations

import configparser
import importlib.util
import os
import subprocess
import sys
import typing as t
from pathlib import Path

import pytest
from flask import Flask

from flask_a2a import A2A, ConfigError, Principal, Skill, versions
from tests.conftest import echo

ROOT = Path(__file__).resolve().parent.parent

HOST_APP = """
import click
from flask import Flask

app = Flask("legacy_host")

@app.cli.command("hello")
def hello():
    click.echo("hello from the host")
"""

#: A marshmallow that fails the way marshmallow 2 failed the library's old import.
BROKEN_MARSHMALLOW = (
    "raise ImportError(\"cannot import name 'RAISE' from 'marshmallow' (shadowed by the test)\")\n"
)


def flask_command(tmp_path: Path, *args: str, broken: bool) -> subprocess.CompletedProcess[str]:
    """``python -m flask ARGS`` beside the host app; ``broken`` shadows marshmallow."""
    (tmp_path / "host.py").write_text(HOST_APP)
    paths = [str(tmp_path)]
    if broken:
        shadow = tmp_path / "shadow" / "marshmallow"
        shadow.mkdir(parents=True, exist_ok=True)
        (shadow / "__init__.py").write_text(BROKEN_MARSHMALLOW)
        paths.insert(0, str(shadow.parent))
    env = {**os.environ, "FLASK_APP": "host.py", "PYTHONPATH": os.pathsep.join(paths)}
    env["PYTHONWARNINGS"] = "ignore:pkg_resources is deprecated:UserWarning"  # Flask 2.0's own
    return subprocess.run(
        [sys.executable, "-m", "flask", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _flask_loads_plugins() -> bool:
    """Flask 2.1+ reads entry points with importlib.metadata; 2.0 only through pkg_resources."""
    if versions.release(versions.installed("Flask") or "0") >= (2, 1):
        return True
    return importlib.util.find_spec("pkg_resources") is not None


plugins = pytest.mark.skipif(
    not _flask_loads_plugins(),
    reason="this Flask (< 2.1) loads plugin commands only through pkg_resources, which this "
    "setuptools no longer ships: there is no entry point of ours to break the host's CLI",
)


@plugins
def test_a_library_that_cannot_import_leaves_the_hosts_commands_alone(tmp_path: Path) -> None:
    host = flask_command(tmp_path, "hello", broken=True)
    assert host.returncode == 0, host.stderr
    assert host.stdout.strip() == "hello from the host"
    assert "Traceback" not in host.stderr
    listing = flask_command(tmp_path, "--help", broken=True)
    assert listing.returncode == 0, listing.stderr
    assert "a2a" in listing.stdout and "Traceback" not in listing.stderr


@plugins
def test_flask_a2a_says_in_one_line_what_is_missing(tmp_path: Path) -> None:
    done = flask_command(tmp_path, "a2a", "skills", broken=True)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "flask a2a cannot load flask_a2a: ImportError" in lines[0]
    assert "cannot import name 'RAISE' from 'marshmallow'" in lines[0]


@plugins
def test_flask_a2a_runs_when_the_library_loads(tmp_path: Path) -> None:
    done = flask_command(tmp_path, "a2a", "--help", broken=False)
    assert done.returncode == 0, done.stderr
    assert "--agent NAME" in done.stdout and "erase-user" in done.stdout


AGENT_APP = (
    HOST_APP
    + """
from flask_a2a import A2A, Principal, Skill
from tests.conftest import echo

A2A(app, skills=[Skill(id="echo", name="Echo", description="Echo.", handler=echo)],
    principal=lambda: Principal(owner="alice"))
"""
)


def test_an_app_with_the_extension_has_flask_a2a_on_any_flask(tmp_path: Path) -> None:
    """init_app adds the group to app.cli: no entry point needed (Flask 2.0 without one)."""
    (tmp_path / "agent_host.py").write_text(AGENT_APP)
    env = {
        **os.environ,
        "FLASK_APP": "agent_host.py",
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "flask", "a2a", "skills"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].split()[0] == "echo"


def install_requires() -> dict[str, str]:
    """setup.cfg's ``install_requires`` and extras as {distribution: floor}."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    lines = parser["options"]["install_requires"].split("\n")
    for extra in parser["options.extras_require"].values():
        lines += extra.split("\n")
    floors = {}
    for line in lines:
        name, sep, floor = line.partition(">=")
        if sep:
            floors[name.split("[")[0].strip()] = floor.split(",")[0].strip()
    return floors


def test_the_table_is_setup_cfgs() -> None:
    floors = install_requires()
    for name, floor in {**versions.REQUIRED, **versions.OPTIONAL}.items():
        assert floors[name] == floor, name
    core = configparser.ConfigParser()
    core.read(ROOT / "setup.cfg")
    required = [
        line.split(">=")[0] for line in core["options"]["install_requires"].split("\n") if line
    ]
    assert sorted(required) == sorted(versions.REQUIRED)


def test_the_sql_stores_floor_is_the_tables() -> None:
    from flask_a2a.store import sql_versions

    assert sql_versions.OLDEST == versions.release(versions.REQUIRED["SQLAlchemy"])


def test_the_installed_libraries_meet_the_floors() -> None:
    assert versions.too_old() == []


@pytest.mark.parametrize(
    ("text", "numbers"),
    [("2.0.3", (2, 0, 3)), ("1.4.54", (1, 4, 54)), ("3.0.0rc1", (3, 0, 0)), ("26.9", (26, 9))],
)
def test_release_reads_the_numbers(text: str, numbers: tuple[int, ...]) -> None:
    assert versions.release(text) == numbers


def test_an_old_library_fails_init_app_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    found = {"SQLAlchemy": "1.3.24", "redis": "3.5.3"}
    real = versions.installed
    monkeypatch.setattr(versions, "installed", lambda name: found.get(name) or real(name))
    monkeypatch.setattr(versions, "_checked", False)
    app = Flask("old_pins")
    with pytest.raises(ConfigError) as refused:
        A2A(app, skills=[skill()], principal=lambda: Principal(owner="alice"))
    text = str(refused.value)
    assert "flask_a2a needs SQLAlchemy>=1.4.24 (found 1.3.24)" in text
    assert "flask_a2a needs redis>=4.1.2 (found 3.5.3)" in text
    assert "TypeError" not in text
    assert "a2a" not in app.blueprints  # nothing mounted


def skill() -> Skill:
    return Skill(id="echo", name="Echo", description="Echo.", handler=echo)


def test_a_missing_optional_library_is_not_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    real: t.Callable[[str], str | None] = versions.installed
    monkeypatch.setattr(versions, "installed", lambda name: None if name == "rq" else real(name))
    assert versions.too_old() == []


@pytest.mark.parametrize("page", ["README.md", "docs/existing-app.md"])
def test_the_compatibility_tables_say_setup_cfgs_floors(page: str) -> None:
    text = (ROOT / page).read_text()
    head = "| library | oldest (Python 3.9) |"
    assert head in text
    rows = text.split(head, 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    oldest = {row.split("|")[1].strip(): row.split("|")[2].strip() for row in rows}
    floors = install_requires()
    assert oldest.pop("Python") == "3.9"
    assert oldest == {name: floors[name] for name in oldest}
    assert set(versions.REQUIRED) <= set(oldest)
    classifiers = configparser.ConfigParser()
    classifiers.read(ROOT / "setup.cfg")
    assert classifiers["options"]["python_requires"] == ">=3.9"
