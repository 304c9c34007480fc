"""Every SQLAlchemy engine a test touched gives its pooled connections back after the test.

Tests build engines of their own (a host's engine, a second replica's) and apps they never shut
down; their idle pooled connections would close at some later garbage collection, and Python
3.13's sqlite3 warns there of an unclosed database, failing whichever test is running then.
``Engine.dispose()`` closes the idle ones and leaves the engine usable (a new pool on next use),
so disposing after each test is safe for engines a module or session fixture shares.
"""

from __future__ import annotations

import typing as t
import weakref

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

_USED: weakref.WeakSet[Engine] = weakref.WeakSet()


@event.listens_for(Engine, "engine_connect")
def _remember(connection: Connection, *args: t.Any) -> None:  # 1.4 passes a branch flag
    _USED.add(connection.engine)


@pytest.fixture(autouse=True)
def _engines_give_back_their_connections() -> t.Iterator[None]:
    yield
    for engine in list(_USED):
        engine.dispose()
    _USED.clear()
