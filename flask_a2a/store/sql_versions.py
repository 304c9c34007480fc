"""What SQLAlchemy 1.4 and 2.x (and Flask-SQLAlchemy 2.5 and 3.x) spell differently, in one place.

The store is written for SQLAlchemy 2.x; these few names let the same code run on 1.4 (the pins
of older host apps, such as CTFd's 1.4.54 with Flask-SQLAlchemy 2.5.1). Nothing else in the
library asks which version it has.
"""

from __future__ import annotations

import re
import typing as t

import sqlalchemy as sa

from ..config import ConfigError

#: The installed SQLAlchemy, as it names itself and as (major, minor, patch).
FOUND: t.Final = sa.__version__
VERSION: t.Final = tuple(int(part) for part in re.findall(r"\d+", FOUND)[:3])
#: The oldest SQLAlchemy the SQL store runs on (setup.cfg's floor).
OLDEST: t.Final = (1, 4, 24)
#: SQLAlchemy 2.0 and later: psycopg 3 has a dialect, ``with_variant`` takes several names.
IS_2: t.Final = VERSION >= (2, 0)


def require(url: str | None = None) -> None:
    """Refuse what this SQLAlchemy cannot run, as a :class:`ConfigError` that ``init_app``
    raises: a release older than :data:`OLDEST`, or a psycopg 3 URL before 2.0 (which has no
    dialect for it). Called before the store builds or takes an engine, so the host reads one
    line naming the fix instead of a TypeError at the first call."""
    if VERSION < OLDEST:
        needed = ".".join(map(str, OLDEST))
        raise ConfigError(
            f"the SQL store needs SQLAlchemy {needed} or newer (found {FOUND}): pip install "
            f"'SQLAlchemy>={needed}'; without it, leave A2A_DATABASE_URL unset and "
            "Flask-SQLAlchemy off the app for the memory store"
        )
    driver = url.split("://", 1)[0] if url else ""
    if not IS_2 and driver in ("postgresql+psycopg", "postgresql+psycopg_async"):
        raise ConfigError(
            f"{driver} needs SQLAlchemy 2.0 (found {FOUND}); on SQLAlchemy 1.4 use "
            "postgresql+psycopg2:// (pip install psycopg2-binary)"
        )


#: SQLite's ``UPDATE``/``DELETE ... RETURNING`` compiles (SQLAlchemy 2.0 and later).
SQLITE_RETURNING: t.Final = IS_2

T = t.TypeVar("T", bound="sa.types.TypeEngine[t.Any]")


def variant(base: T, special: sa.types.TypeEngine[t.Any], *dialects: str) -> T:
    """``base``, but ``special`` on each of ``dialects`` (1.4 takes one dialect per call)."""
    for name in dialects:
        base = base.with_variant(special, name)
    return base


def unvaried(type_: sa.types.TypeEngine[t.Any]) -> sa.types.TypeEngine[t.Any]:
    """The type ``with_variant`` was called on: 1.4 wraps it in a ``Variant`` (as its
    ``impl``), 2.x returns a copy of the type itself."""
    return type_ if IS_2 else getattr(type_, "impl", type_)


def reset_to_autocommit(engine: sa.engine.Engine) -> None:
    """A connection of an AUTOCOMMIT engine that a transaction switched to READ COMMITTED goes
    back to AUTOCOMMIT when returned to the pool, as on 2.x; 1.4 resets it to the server's
    default level instead, so the next one-statement call would never commit."""
    if IS_2:
        return
    dialect = engine.dialect

    def reset(dbapi_connection: t.Any) -> None:
        dialect.set_isolation_level(dbapi_connection, "AUTOCOMMIT")

    setattr(dialect, "reset_isolation_level", reset)  # noqa: B010 - an instance's own


def flask_sqlalchemy_engine(app: t.Any, extension: t.Any) -> t.Any:
    """The engine of the app's Flask-SQLAlchemy, given ``app.extensions["sqlalchemy"]``: the
    ``SQLAlchemy`` object on 3.x, a state holding it as ``db`` on 2.5."""
    from flask_sqlalchemy import SQLAlchemy

    db = extension if isinstance(extension, SQLAlchemy) else extension.db
    with app.app_context():  # both find the app's engine through current_app
        return db.engine
