"""The extension objects, made without an app: ``create_app`` binds them with ``init_app``.

Models, views and skills import what they need from here, never from the package's
``__init__`` (which imports them all to build the app: that would be a cycle). The ``A2A``
object is not here: it is built from the skills, which import the models, which import
``db`` from this module, so it lives in ``agent.py``.
"""

from __future__ import annotations

from flask_httpauth import HTTPTokenAuth
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy

db = SQLAlchemy()
migrate = Migrate()
token_auth = HTTPTokenAuth()
