"""A host app that registers ``A2A`` before Flask-SQLAlchemy (tests/store/test_store_choice.py
runs it under ``gunicorn -w 2``): the workers must still share the app's database.

``LATE_DATABASE_URL`` is the app's ``SQLALCHEMY_DATABASE_URI``.
"""

from __future__ import annotations

import os

from flask import Flask
from flask_sqlalchemy import SQLAlchemy

from examples.agent import SKILLS, principal
from flask_a2a import A2A

db = SQLAlchemy()


def create_app() -> Flask:
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = os.environ["LATE_DATABASE_URL"]
    A2A(app, skills=SKILLS, principal=principal)
    db.init_app(app)
    return app
