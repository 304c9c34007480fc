"""The runner-parametrized suites' gevent cases, in gevent-patched processes (GeventRunner).

gevent must patch before anything imports ``threading`` or ``ssl``, so the patched session is
its own interpreter: this test starts it, in shards, and asserts each ran gevent cases and
passed. A patched session runs only the gevent cases (``runner_kind`` gevent, or marked
``gevent_session``) and the plain one deselects them (``tests/conftest.py``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flask_a2a.exchange.runner import gevent_patched

ROOT = Path(__file__).resolve().parents[2]


def runner_modules() -> list[str]:
    """Modules whose tests build apps on the parametrized runner (``make_app``/``runner_kind``)
    or are marked to run only here (``gevent_session``); tests/grpc only with its extra (named
    on the command line, a directory its conftest skips is an error, not a skip)."""
    grpc = importlib.util.find_spec("grpc_status") is not None
    return sorted(
        str(path.relative_to(ROOT))
        for path in ROOT.joinpath("tests").rglob("test_*.py")
        if path.name != Path(__file__).name
        and (grpc or path.parent.name != "grpc")
        and any(
            word in path.read_text()
            for word in ("make_app", "runner_kind", "make_runner", "gevent_session")
        )
    )


BOOT = (
    "from gevent import monkey; monkey.patch_all()\n"
    "import sys, pytest\n"
    "sys.exit(pytest.main(sys.argv[1:]))\n"
)


#: The patched session runs as this many subprocesses, each every SHARDS-th gevent case, so
#: that parallel workers (pytest-xdist) share them.
SHARDS = 4


@pytest.mark.early  # the longest tests of the run: each worker starts on one
@pytest.mark.timeout(620)  # the subprocess's own bound (600 s) is the one that should fire
@pytest.mark.skipif(gevent_patched(), reason="already the patched session")
@pytest.mark.parametrize("shard", range(SHARDS))
def test_runner_suites_pass_under_gevent(shard: int) -> None:
    modules = runner_modules()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            BOOT,
            "-q",
            "-n",
            "0",  # in this process: a pytest-xdist worker would not be patched
            "-p",
            "no:cacheprovider",
            "-p",
            "no:anyio",
            "-W",
            "ignore::gevent.monkey.MonkeyPatchWarning",
            "-m",
            "not live and not interop",
            *modules,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **os.environ,
            "PYTHONDONTWRITEBYTECODE": "1",
            "A2A_TEST_GEVENT_SHARD": f"{shard}/{SHARDS}",
            # its own databases (``tests/conftest.py``: ``worker_url``)
            "A2A_TEST_WORKER": f"gevent{shard}",
        },
    )
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed is not None and int(passed.group(1)) > 0, tail
