"""The runner-parametrized suites again, in a gevent-patched process (the GeventRunner cases).

gevent must patch before anything imports ``threading`` or ``ssl``, so the patched session is
its own interpreter: this test starts it and asserts it ran the gevent cases and passed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flask_a2a.exchange.runner import gevent_patched

ROOT = Path(__file__).resolve().parents[2]


def runner_modules() -> list[str]:
    """Modules whose tests build apps on the parametrized runner (``make_app``/``runner_kind``)."""
    return sorted(
        str(path.relative_to(ROOT))
        for path in ROOT.joinpath("tests").rglob("test_*.py")
        if path.name != Path(__file__).name
        and any(word in path.read_text() for word in ("make_app", "runner_kind", "make_runner"))
    )


BOOT = (
    "from gevent import monkey; monkey.patch_all()\n"
    "import sys, pytest\n"
    "sys.exit(pytest.main(sys.argv[1:]))\n"
)


@pytest.mark.skipif(gevent_patched(), reason="already the patched session")
def test_runner_suites_pass_under_gevent() -> None:
    modules = runner_modules()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            BOOT,
            "-q",
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
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed is not None and int(passed.group(1)) > 0, tail
