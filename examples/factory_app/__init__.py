"""A Flask app in the application-factory layout, with A2A mounted in ``create_app``.

::

    examples/factory_app/
        __init__.py     create_app(): config, then init_app of every extension, blueprints
        extensions.py   db, migrate, token_auth: made without an app
        models.py       User, Invoice (import db from extensions); Flask-HTTPAuth's verify_token
        api.py          the app's own token API (a blueprint)
        skills.py       the hand-written skills (the app's session and models)
        agent.py        a2a = A2A(skills=..., entities=..., principal=...)

Run it: ``flask --app examples.factory_app run``; ``flask --app examples.factory_app a2a
skills``. tests/test_docs.py drives it.
"""

from __future__ import annotations

import typing as t

from flask import Flask

from flask_a2a import from_prefixed_env
from flask_a2a.store import migrations as a2a_migrations

from .extensions import db, migrate


def create_app(config: t.Mapping[str, t.Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.from_mapping(SECRET_KEY="change-me", SQLALCHEMY_DATABASE_URI="sqlite://")
    from_prefixed_env(app.config)
    app.config.update(config or {})
    db.init_app(app)
    migrate.init_app(app, db, include_name=a2a_migrations.include_name())

    # Views, models and skills import the extensions, never this module.
    from .agent import a2a
    from .api import api

    app.register_blueprint(api)
    a2a.init_app(app)  # after the blueprint: the entity's routes are there to check
    return app
