"""The releases of the stack under test, for the few cases an old release cannot run.

Each skip names the release and what it lacks; the rest of the suite runs on every release
setup.cfg admits (.ci/matrix: floors, CTFd's pins, newest).
"""

from __future__ import annotations

import typing as t

from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from flask_a2a.versions import installed, release

FLASK: t.Final = release(installed("Flask") or "0")
WERKZEUG: t.Final = release(installed("Werkzeug") or "0")


def set_cookie(client: FlaskClient, key: str, value: str) -> None:
    """A cookie in the test client's jar: Werkzeug 2.3 dropped the leading server name."""
    if WERKZEUG >= (2, 3):
        client.set_cookie(key, value)
    else:
        client.set_cookie("localhost", key, value)  # type: ignore[call-arg]


CLICK: t.Final = release(installed("click") or "0")


def cli_runner(app: Flask) -> FlaskCliRunner:
    """Flask's CLI runner with stdout and stderr apart, on every click (8.2 keeps them apart
    and dropped the flag; before it they were mixed unless asked)."""
    if CLICK >= (8, 2):
        return app.test_cli_runner()
    return app.test_cli_runner(mix_stderr=False)
