"""The A2A 1.0 conformance suite (a2aproject/a2a-tck, its 1.0 line: ``run_tck.py --transport
grpc``) against the gRPC binding: ``flask a2a grpc --http`` serving tests/tck10_app.py, the card
over HTTP listing the GRPC interface the suite then speaks to.

The suite is a checkout (``$A2A_TCK_10_PATH``, else a shallow clone of its ``1.0-dev`` branch
into ``~/.cache/flask_a2a-tests``) run by its own venv (its pyproject's dependencies; cached the
same way: ``tests/tck_support.py``). Skipped, saying why, when neither the checkout nor the
packages can be had.

Known failures, each a place where the suite and the spec this server follows differ
(docs/grpc.md#the-conformance-suite):

- VersionNotSupported over gRPC: the suite wants ``UNIMPLEMENTED``, A2A 1.0.0's §5.4; A2A
  1.0.1 corrected it to ``FAILED_PRECONDITION``, which this server answers (as the official SDK
  1.3 does, and as this server does for UnsupportedOperation and PushNotificationNotSupported,
  which the suite's 1.0.0 table also maps to UNIMPLEMENTED but cannot trigger here).
"""

from __future__ import annotations

import subprocess
import sys
import typing as t
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

pytest.importorskip("grpc_status", reason="the grpc extra is not installed")

from tests.live_server import HOST, LiveGrpc, free_port, wait_http  # noqa: E402
from tests.tck_support import Suite  # noqa: E402

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]

KNOWN_FAILURES: t.Final[dict[str, str]] = {
    "tests.compatibility.grpc.test_status_codes.TestGrpcStatusCodes"
    "::test_version_not_supported_returns_unimplemented": (
        "A2A 1.0.0's UNIMPLEMENTED; 1.0.1 says FAILED_PRECONDITION (as the SDK 1.3 answers)"
    ),
}
#: The least number of tests that must pass over gRPC (the suite ran 81 at 357c4a8).
LEAST_PASSED: t.Final = 70


def _install(checkout: Path) -> tuple[bytes, list[str]]:
    """Its pyproject's dependencies; keyed by them."""
    import tomllib

    requirements = list(
        tomllib.loads((checkout / "pyproject.toml").read_text())["project"]["dependencies"]
    )
    return "\n".join(requirements + [sys.version]).encode(), requirements


SUITE: t.Final = Suite(
    branch="1.0-dev",
    folder="a2a-tck-1.0",
    path_variable="A2A_TCK_10_PATH",
    marker="tests/compatibility",
    label="a2a-tck 1.0",
    venv="a2a-tck-1.0",
    install=_install,
)


@pytest.fixture(scope="module")
def tck() -> tuple[Path, Path]:
    if sys.version_info < (3, 11):
        pytest.skip("the a2a-tck 1.0 suite needs Python 3.11+")
    return SUITE.prepared()


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
        assert wait_http(base + "/.well-known/agent-card.json", proc=live.proc), live.output()
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
