"""A host app on Flask-SQLAlchemy whose skill waits in the database (``pg_sleep``), for
tests/store/test_blocking_drivers.py under ``gunicorn -k gevent``.

``NAP_DATABASE_URL`` picks the database and its driver (``postgresql+psycopg2://`` or
``postgresql+psycopg://``); the task store runs on the same engine, as it does by default.
"""

from __future__ import annotations

import os
import time
import typing as t

import sqlalchemy as sa
from flask import Flask
from flask_sqlalchemy import SQLAlchemy

from flask_a2a import A2A, Principal, Skill, TaskContext

db = SQLAlchemy()


def nap(task: TaskContext) -> dict[str, t.Any]:
    """One second in the database; when it began and ended, for the caller to compare."""
    began = time.time()
    db.session.execute(sa.text("SELECT pg_sleep(1)"))
    return {"began": began, "ended": time.time(), "pid": os.getpid()}


def create_app() -> Flask:
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = os.environ["NAP_DATABASE_URL"]
    db.init_app(app)
    A2A(app, skills=[Skill(id="nap", name="Nap", description="Sleeps.", handler=nap)],
        principal=lambda: Principal(owner="alice"))  # fmt: skip
    return app
