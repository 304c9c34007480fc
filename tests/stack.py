"""The releases of the stack under test, for the few cases an old release cannot run.

Each skip names the release and what it lacks; the rest of the suite runs on every release
setup.cfg admits (.ci/matrix: floors, CTFd's pins, newest).
"""

from __future__ import annotations

import typing as t

from click.testing import Result
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


class _BothStreams(Result):
    """click 8.2's result on an older click: ``output`` is what the terminal showed (stdout,
    then stderr here), ``stdout`` and ``stderr`` apart."""

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class _ApartRunner(FlaskCliRunner):
    def invoke(self, *args: t.Any, **kwargs: t.Any) -> Result:
        result = super().invoke(*args, **kwargs)
        result.__class__ = _BothStreams
        return result


def cli_runner(app: Flask) -> FlaskCliRunner:
    """Flask's CLI runner as click 8.2 has it on every click: stdout and stderr apart, and
    both in ``output`` (before 8.2 they were mixed into stdout unless asked)."""
    if CLICK >= (8, 2):
        return app.test_cli_runner()
    return _ApartRunner(app, mix_stderr=False)
