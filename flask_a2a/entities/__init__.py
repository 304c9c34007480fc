"""Entity skills: the host app's own resources as deterministic skills, their tool schemas
and the CRUD blueprint.

The public names are ``__all__``; ``Entity`` lives in ``flask_a2a``, and the marshmallow
helpers in ``flask_a2a.entities.host_schema``. The other names below stay here for old imports,
and are private.
"""

from __future__ import annotations

import importlib
import typing as t

from .dispatch import ENTITY_CALL_ENVIRON_KEY as ENTITY_CALL_ENVIRON_KEY
from .dispatch import MAX_ANSWER_BYTES as MAX_ANSWER_BYTES
from .dispatch import AnswerTooLarge as AnswerTooLarge
from .dispatch import AppDispatcher as AppDispatcher
from .dispatch import dispatch as dispatch
from .dispatch import refusal_text as refusal_text
from .entity import DEFAULT_ROUTES as DEFAULT_ROUTES
from .entity import OPERATIONS as OPERATIONS
from .entity import Entity as Entity
from .entity import EntityGate as EntityGate
from .operations import Argument as Argument
from .operations import Operation as Operation
from .registry import TOOL_UNAVAILABLE as TOOL_UNAVAILABLE
from .registry import EntityRegistry as EntityRegistry
from .tools import LIST_KEYS as LIST_KEYS
from .tools import MAX_DESCRIBED_FIELDS as MAX_DESCRIBED_FIELDS
from .tools import ArgumentError as ArgumentError
from .tools import Call as Call
from .tools import Tool as Tool
from .tools import build_tools as build_tools
from .tools import describe_skill as describe_skill

if t.TYPE_CHECKING:
    from .crud import crud_blueprint as crud_blueprint

__all__ = ["OPERATIONS", "Argument", "Operation", "crud_blueprint"]

if not t.TYPE_CHECKING:

    def __getattr__(name: str) -> t.Any:
        """``crud_blueprint`` is imported on first use: it loads SQLAlchemy."""
        if name != "crud_blueprint":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = importlib.import_module(".crud", __name__).crud_blueprint
        globals()[name] = value
        return value
