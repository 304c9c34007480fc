"""The A2A 1.0 conformance suite (a2aproject/a2a-tck, its 1.0 line: ``run_tck.py --transport
grpc``) against the gRPC binding: ``flask a2a grpc --http`` serving tests/tck10_app.py, the card
over HTTP listing the GRPC interface the suite then speaks to.

The suite is a checkout (``$A2A_TCK_10_PATH``, else a shallow clone of its ``1.0-dev`` branch
into ``~/.cache/flask_a2a-tests``) run by its own venv (its pyproject's dependencies; cached the
same way). Skipped, saying why, when neither the checkout nor the packages can be had.

Known failures, each a place where the suite and the spec this server follows differ
(docs/grpc.md#the-conformance-suite):

- VersionNotSupported over gRPC: the suite wants ``UNIMPLEMENTED``, A2A 1.0.0's §5.4; A2A
  1.0.1 corrected it to ``FAILED_PRECONDITION``, which this server answers (as the official SDK
  1.3 does, and as this server does for UnsupportedOperation and PushNotificationNotSupported,
  which the suite's 1.0.0 table also maps to UNIMPLEMENTED but cannot trigger here).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import typing as t
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

pytest.importorskip("grpc_status", reason="the grpc extra is not installed")

from tests.live_server import HOST, LiveGrpc, _answers, free_port  # noqa: E402

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
TCK_REPO = "https://github.com/a2aproject/a2a-tck"
TCK_BRANCH = "1.0-dev"

KNOWN_FAILURES: t.Final[dict[str, str]] = {
    "tests.compatibility.grpc.test_status_codes.TestGrpcStatusCodes"
    "::test_version_not_supported_returns_unimplemented": (
        "A2A 1.0.0's UNIMPLEMENTED; 1.0.1 says FAILED_PRECONDITION (as the SDK 1.3 answers)"
    ),
}
#: The least number of tests that must pass over gRPC (the suite ran 81 at 357c4a8).
LEAST_PASSED: t.Final = 70


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flask_a2a-tests"


def _checkout() -> Path:
    given = os.environ.get("A2A_TCK_10_PATH")
    if given:
        if not (Path(given) / "tests" / "compatibility").is_dir():
            pytest.skip(f"A2A_TCK_10_PATH={given} is no a2a-tck 1.0 checkout")
        return Path(given)
    target = _cache_root() / "a2a-tck-1.0"
    if (target / "tests" / "compatibility").is_dir():
        return target
    _cache_root().mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["git", "clone", "--depth", "1", "-b", TCK_BRANCH, TCK_REPO, str(target)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        pytest.skip(
            f"a2a-tck {TCK_BRANCH} could not be cloned (set A2A_TCK_10_PATH to a "
            f"checkout): {done.stderr.strip()[-200:]}"
        )
    return target


def _dependencies(checkout: Path) -> list[str]:
    import tomllib

    project = tomllib.loads((checkout / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"])


def _venv(checkout: Path) -> Path:
    requirements = _dependencies(checkout)
    key = hashlib.sha256("\n".join(requirements + [sys.version]).encode()).hexdigest()[:12]
    venv = _cache_root() / f"a2a-tck-1.0-{key}"
    if (venv / ".complete").exists():
        return venv / "bin" / "python"
    building = Path(tempfile.mkdtemp(prefix="a2a-tck-1.0-", dir=_cache_root()))
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", str(building)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        done = subprocess.run(
            [str(building / "bin" / "python"), "-m", "pip", "install", "-q", *requirements],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            pytest.skip(
                f"the a2a-tck requirements could not be installed: {done.stderr.strip()[-300:]}"
            )
        (building / ".complete").write_text("ok")
        try:
            building.rename(venv)
        except OSError:  # another session finished first
            pass
    finally:
        if building.exists():
            shutil.rmtree(building, ignore_errors=True)
    return venv / "bin" / "python"


@pytest.fixture(scope="module")
def tck() -> tuple[Path, Path]:
    if sys.version_info < (3, 11):
        pytest.skip("the a2a-tck 1.0 suite needs Python 3.11+")
    checkout = _checkout()
    try:
        return checkout, _venv(checkout)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"no venv for a2a-tck: {exc}")


@pytest.fixture(scope="module")
def server(tck: tuple[Path, Path]) -> t.Iterator[str]:
    """tests/tck10_app.py in one process: its card over HTTP, its RPCs over gRPC."""
    grpc_port, http_port = free_port(), free_port()
    base = f"http://{HOST}:{http_port}"
    env = {
        "PYTHONPATH": str(ROOT),
        "FLASK_A2A_GRPC_URL": f"{HOST}:{grpc_port}",
        "FLASK_A2A_PUBLIC_BASE_URL": base,
    }
    live = LiveGrpc(
        "tests.tck10_app:create_app()",
        chdir=str(ROOT),
        env=env,
        port=grpc_port,
        extra=["--http", f"{HOST}:{http_port}"],
    )
    try:
        import time

        deadline = time.monotonic() + 30
        while not _answers(base + "/.well-known/agent-card.json"):
            assert time.monotonic() < deadline, live.output()
            time.sleep(0.05)  # polling a subprocess's socket: there is no event to await
        yield base
    finally:
        log = live.stop()
        assert "Traceback" not in log, log[-4000:]


def test_tck_10_over_grpc(tck: tuple[Path, Path], server: str, tmp_path: Path) -> None:
    checkout, python = tck
    junit = tmp_path / "junit.xml"
    done = subprocess.run(
        [
            str(python),
            "run_tck.py",
            "--sut-host",
            server,
            "--transport",
            "grpc",
            "--",
            f"--junitxml={junit}",
            "-p",
            "no:cacheprovider",
        ],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert junit.exists(), done.stdout[-3000:] + done.stderr[-2000:]
    failed, passed = set(), []
    for case in ElementTree.parse(junit).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            failed.add(name)
        elif case.find("skipped") is None:
            passed.append(name)
    assert failed <= set(KNOWN_FAILURES), done.stdout[-6000:]
    assert len(passed) >= LEAST_PASSED, done.stdout[-4000:]
    grpc_cases = [name for name in passed if "grpc" in name.lower()]
    assert grpc_cases, "no gRPC case ran"
