"""Serve the Agent2Agent (A2A) v1.0 protocol from an existing Flask app.

The public names load on first use (PEP 562), so importing a submodule such as
``flask_a2a.gunicorn`` in gunicorn's master loads neither Flask nor requests nor ssl before
gevent monkey-patches the workers.
"""

from __future__ import annotations

import importlib
import importlib.util
import typing as t

#: The one place the version is written (setup.cfg reads it: ``attr: flask_a2a.__version__``).
__version__ = "0.1.0"

if t.TYPE_CHECKING:
    from .agent_extensions import AgentExtension as AgentExtension
    from .card import AgentCard as AgentCard
    from .client import A2AClient as A2AClient
    from .client import A2AClientError as A2AClientError
    from .config import ConfigError as ConfigError
    from .entities import Entity as Entity
    from .errors import A2AError as A2AError
    from .errors import ContentTypeNotSupportedError as ContentTypeNotSupportedError
    from .errors import ExtendedAgentCardNotConfiguredError as ExtendedAgentCardNotConfiguredError
    from .errors import ExtensionSupportRequiredError as ExtensionSupportRequiredError
    from .errors import ForbiddenOriginError as ForbiddenOriginError
    from .errors import InternalError as InternalError
    from .errors import InvalidAgentResponseError as InvalidAgentResponseError
    from .errors import InvalidParamsError as InvalidParamsError
    from .errors import InvalidRequestError as InvalidRequestError
    from .errors import JSONParseError as JSONParseError
    from .errors import MalformedBodyError as MalformedBodyError
    from .errors import MethodNotAllowedError as MethodNotAllowedError
    from .errors import MethodNotFoundError as MethodNotFoundError
    from .errors import PayloadTooLargeError as PayloadTooLargeError
    from .errors import PushNotificationNotSupportedError as PushNotificationNotSupportedError
    from .errors import StreamSeatsExhaustedError as StreamSeatsExhaustedError
    from .errors import TaskCanceled as TaskCanceled
    from .errors import TaskInterrupted as TaskInterrupted
    from .errors import TaskNotCancelableError as TaskNotCancelableError
    from .errors import TaskNotFoundError as TaskNotFoundError
    from .errors import TaskSettled as TaskSettled
    from .errors import TaskTimedOut as TaskTimedOut
    from .errors import TaskVisibleError as TaskVisibleError
    from .errors import UnauthenticatedError as UnauthenticatedError
    from .errors import UnsupportedOperationError as UnsupportedOperationError
    from .errors import VersionNotSupportedError as VersionNotSupportedError
    from .extension import A2A as A2A
    from .model import Artifact as Artifact
    from .model import Message as Message
    from .model import Part as Part
    from .model import Principal as Principal
    from .model import Role as Role
    from .model import Task as Task
    from .model import TaskState as TaskState
    from .router import Skill as Skill
    from .runner import GeventRunner as GeventRunner
    from .runner import ThreadRunner as ThreadRunner
    from .store import MemoryStore as MemoryStore
    from .store import Store as Store
    from .tasks import TaskContext as TaskContext
    from .tasks import TaskUpdater as TaskUpdater

#: Public name -> the submodule defining it.
_SOURCES: t.Final[dict[str, str]] = {
    "AgentExtension": "agent_extensions",
    "AgentCard": "card",
    "A2AClient": "client",
    "A2AClientError": "client",
    "ConfigError": "config",
    "Entity": "entities",
    "A2AError": "errors",
    "ContentTypeNotSupportedError": "errors",
    "ExtendedAgentCardNotConfiguredError": "errors",
    "ExtensionSupportRequiredError": "errors",
    "ForbiddenOriginError": "errors",
    "InternalError": "errors",
    "InvalidAgentResponseError": "errors",
    "InvalidParamsError": "errors",
    "InvalidRequestError": "errors",
    "JSONParseError": "errors",
    "MalformedBodyError": "errors",
    "MethodNotAllowedError": "errors",
    "MethodNotFoundError": "errors",
    "PayloadTooLargeError": "errors",
    "PushNotificationNotSupportedError": "errors",
    "StreamSeatsExhaustedError": "errors",
    "TaskCanceled": "errors",
    "TaskInterrupted": "errors",
    "TaskNotCancelableError": "errors",
    "TaskNotFoundError": "errors",
    "TaskSettled": "errors",
    "TaskTimedOut": "errors",
    "TaskVisibleError": "errors",
    "UnauthenticatedError": "errors",
    "UnsupportedOperationError": "errors",
    "VersionNotSupportedError": "errors",
    "A2A": "extension",
    "Artifact": "model",
    "Message": "model",
    "Part": "model",
    "Principal": "model",
    "Role": "model",
    "Task": "model",
    "TaskState": "model",
    "Skill": "router",
    "GeventRunner": "runner",
    "ThreadRunner": "runner",
    "MemoryStore": "store",
    "Store": "store",
    "TaskContext": "tasks",
    "TaskUpdater": "tasks",
}

__all__ = [*_SOURCES, "__version__"]


if not t.TYPE_CHECKING:  # type checkers see the imports above, and flag an unknown name

    def __getattr__(name: str) -> t.Any:
        """Import the submodule that defines ``name`` the first time it is asked for (or the
        submodule ``name`` itself: ``flask_a2a.store`` after a bare ``import flask_a2a``)."""
        if name in _SOURCES:
            value = getattr(importlib.import_module(f".{_SOURCES[name]}", __name__), name)
        elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
            value = importlib.import_module(f".{name}", __name__)
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
