"""The A2A conformance suite (a2aproject/a2a-tck) for the live tests that run it: one of its
lines checked out and given a venv of its own, both cached under ``~/.cache/flask_a2a-tests``
(``$XDG_CACHE_HOME`` when set), or the test skipped, saying why.

A line is a :class:`Suite`: its branch, where a checkout of it may be given
(``$A2A_TCK_03_PATH``, ``$A2A_TCK_10_PATH``), and what its venv installs. The venv is keyed by
what it installs and the Python version, and built aside then renamed into place, so a
half-built one is never used and two sessions building at once both end with a whole one
(:func:`cached_venv`, which the a2a-sdk 0.3 client's live test uses for its venv too).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import typing as t
from pathlib import Path

import pytest

TCK_REPO: t.Final = "https://github.com/a2aproject/a2a-tck"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flask_a2a-tests"


@dataclasses.dataclass(frozen=True)
class Suite:
    """One line of the suite and how to install it."""

    #: Its branch, shallow-cloned into the cache as ``folder``.
    branch: str
    folder: str
    #: The variable naming a checkout to use instead of the cache's.
    path_variable: str
    #: A directory every checkout of this line has (``tests/mandatory``).
    marker: str
    #: What the suite is called in a skip reason (``a2a-tck``, ``a2a-tck 1.0``).
    label: str
    #: The venv's name in the cache, before its key.
    venv: str
    #: The checkout -> (what the venv's key is made of, the arguments to ``pip install``).
    install: t.Callable[[Path], tuple[bytes, list[str]]]

    def checkout(self) -> Path:
        given = os.environ.get(self.path_variable)
        if given:
            if not (Path(given) / self.marker).is_dir():
                pytest.skip(f"{self.path_variable}={given} is no {self.label} checkout")
            return Path(given)
        target = cache_root() / self.folder
        if (target / self.marker).is_dir():
            return target
        cache_root().mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["git", "clone", "--depth", "1", "-b", self.branch, TCK_REPO, str(target)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            pytest.skip(
                f"a2a-tck {self.branch} could not be cloned (set {self.path_variable} to a "
                f"checkout): {done.stderr.strip()[-200:]}"
            )
        return target

    def python(self, checkout: Path) -> Path:
        """The venv's python, built once per install and Python version."""
        key_material, packages = self.install(checkout)
        return cached_venv(self.venv, key_material, packages, "the a2a-tck requirements")

    def prepared(self) -> tuple[Path, Path]:
        """``(checkout, its venv's python)``, or the test skipped, saying why."""
        checkout = self.checkout()
        try:
            return checkout, self.python(checkout)
        except (OSError, subprocess.SubprocessError) as exc:
            pytest.skip(f"no venv for a2a-tck: {exc}")


def cached_venv(name: str, key_material: bytes, packages: list[str], what: str) -> Path:
    """The python of a venv with ``packages``, cached as ``<name>-<key of key_material>``:
    built aside, then renamed into place, so a half-built one is never used and two sessions
    building at once both end with a whole one (a venv's scripts hold its path; the tests run
    its python by absolute path only). ``what`` names the packages in a skip reason."""
    key = hashlib.sha256(key_material).hexdigest()[:12]
    venv = cache_root() / f"{name}-{key}"
    if (venv / ".complete").exists():
        return venv / "bin" / "python"
    cache_root().mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=cache_root()))
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", str(building)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        done = subprocess.run(
            [str(building / "bin" / "python"), "-m", "pip", "install", "-q", *packages],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            pytest.skip(f"{what} could not be installed: {done.stderr.strip()[-300:]}")
        (building / ".complete").write_text("ok")
        try:
            building.rename(venv)
        except OSError:  # another session finished first
            pass
    finally:
        if building.exists():
            shutil.rmtree(building, ignore_errors=True)
    return venv / "bin" / "python"
