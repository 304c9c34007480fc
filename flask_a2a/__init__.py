"""Serve the Agent2Agent (A2A) v1.0 protocol from an existing Flask app.

The public names load on first use (PEP 562), so importing a submodule such as
``flask_a2a.gunicorn`` in gunicorn's master loads neither Flask nor requests nor ssl before
gevent monkey-patches the workers. Every home loads its names so, with :func:`_lazy_names`,
written here rather than in a module of its own, which ``import flask_a2a`` would have to find
and load too.

This package is the home of the names most apps use; the few others have one home each, the
``__all__`` of a subpackage or module that docs/api.md lists ("Where names live"). Every other
module path is private and may change (``tests/test_public_surface.py`` holds docs and examples
to the homes).
"""

from __future__ import annotations

import importlib
import importlib.util
import typing as t

#: The one place the version is written (setup.cfg reads it: ``attr: flask_a2a.__version__``).
__version__ = "0.1.0"

if t.TYPE_CHECKING:
    from .card.document import AgentCard as AgentCard
    from .client.a2a_client import A2AClient as A2AClient
    from .client.a2a_client import A2AClientError as A2AClientError
    from .client.notifications import NotificationRejected as NotificationRejected
    from .config import ConfigError as ConfigError
    from .entities.entity import Entity as Entity
    from .exchange.reentry import AppAnswer as AppAnswer
    from .exchange.reentry import Reentry as Reentry
    from .exchange.router import Skill as Skill
    from .exchange.runner import GeventRunner as GeventRunner
    from .exchange.runner import ThreadRunner as ThreadRunner
    from .exchange.tasks import TaskContext as TaskContext
    from .exchange.tasks import TaskUpdater as TaskUpdater
    from .extension import A2A as A2A
    from .flask_compat import from_prefixed_env as from_prefixed_env
    from .protocol.errors import A2AError as A2AError
    from .protocol.errors import ContentTypeNotSupportedError as ContentTypeNotSupportedError
    from .protocol.errors import (
        ExtendedAgentCardNotConfiguredError as ExtendedAgentCardNotConfiguredError,
    )
    from .protocol.errors import ExtensionSupportRequiredError as ExtensionSupportRequiredError
    from .protocol.errors import ForbiddenError as ForbiddenError
    from .protocol.errors import ForbiddenOriginError as ForbiddenOriginError
    from .protocol.errors import InternalError as InternalError
    from .protocol.errors import InvalidAgentResponseError as InvalidAgentResponseError
    from .protocol.errors import InvalidParamsError as InvalidParamsError
    from .protocol.errors import InvalidRequestError as InvalidRequestError
    from .protocol.errors import JSONParseError as JSONParseError
    from .protocol.errors import MalformedBodyError as MalformedBodyError
    from .protocol.errors import MethodNotAllowedError as MethodNotAllowedError
    from .protocol.errors import MethodNotFoundError as MethodNotFoundError
    from .protocol.errors import NotFoundError as NotFoundError
    from .protocol.errors import PayloadTooLargeError as PayloadTooLargeError
    from .protocol.errors import (
        PushNotificationNotSupportedError as PushNotificationNotSupportedError,
    )
    from .protocol.errors import RateLimitedError as RateLimitedError
    from .protocol.errors import StreamSeatsExhaustedError as StreamSeatsExhaustedError
    from .protocol.errors import TaskCanceled as TaskCanceled
    from .protocol.errors import TaskInterrupted as TaskInterrupted
    from .protocol.errors import TaskNotCancelableError as TaskNotCancelableError
    from .protocol.errors import TaskNotFoundError as TaskNotFoundError
    from .protocol.errors import TaskSettled as TaskSettled
    from .protocol.errors import TaskTimedOut as TaskTimedOut
    from .protocol.errors import TaskVisibleError as TaskVisibleError
    from .protocol.errors import UnauthenticatedError as UnauthenticatedError
    from .protocol.errors import UnsupportedOperationError as UnsupportedOperationError
    from .protocol.errors import VersionNotSupportedError as VersionNotSupportedError
    from .protocol.extensions import AgentExtension as AgentExtension
    from .protocol.model import Artifact as Artifact
    from .protocol.model import AuthenticationInfo as AuthenticationInfo
    from .protocol.model import Message as Message
    from .protocol.model import Part as Part
    from .protocol.model import Principal as Principal
    from .protocol.model import PushConfig as PushConfig
    from .protocol.model import Role as Role
    from .protocol.model import Task as Task
    from .protocol.model import TaskArtifactUpdateEvent as TaskArtifactUpdateEvent
    from .protocol.model import TaskState as TaskState
    from .protocol.model import TaskStatus as TaskStatus
    from .protocol.model import TaskStatusUpdateEvent as TaskStatusUpdateEvent
    from .store.base import Store as Store
    from .store.memory import MemoryStore as MemoryStore

#: Public name -> the submodule defining it.
_SOURCES: t.Final[dict[str, str]] = {
    "AgentExtension": ".protocol.extensions",
    "AgentCard": ".card.document",
    "A2AClient": ".client.a2a_client",
    "A2AClientError": ".client.a2a_client",
    "NotificationRejected": ".client.notifications",
    "ConfigError": ".config",
    "Entity": ".entities.entity",
    "A2AError": ".protocol.errors",
    "ContentTypeNotSupportedError": ".protocol.errors",
    "ExtendedAgentCardNotConfiguredError": ".protocol.errors",
    "ExtensionSupportRequiredError": ".protocol.errors",
    "ForbiddenOriginError": ".protocol.errors",
    "RateLimitedError": ".protocol.errors",
    "NotFoundError": ".protocol.errors",
    "ForbiddenError": ".protocol.errors",
    "InternalError": ".protocol.errors",
    "InvalidAgentResponseError": ".protocol.errors",
    "InvalidParamsError": ".protocol.errors",
    "InvalidRequestError": ".protocol.errors",
    "JSONParseError": ".protocol.errors",
    "MalformedBodyError": ".protocol.errors",
    "MethodNotAllowedError": ".protocol.errors",
    "MethodNotFoundError": ".protocol.errors",
    "PayloadTooLargeError": ".protocol.errors",
    "PushNotificationNotSupportedError": ".protocol.errors",
    "StreamSeatsExhaustedError": ".protocol.errors",
    "TaskCanceled": ".protocol.errors",
    "TaskInterrupted": ".protocol.errors",
    "TaskNotCancelableError": ".protocol.errors",
    "TaskNotFoundError": ".protocol.errors",
    "TaskSettled": ".protocol.errors",
    "TaskTimedOut": ".protocol.errors",
    "TaskVisibleError": ".protocol.errors",
    "UnauthenticatedError": ".protocol.errors",
    "UnsupportedOperationError": ".protocol.errors",
    "VersionNotSupportedError": ".protocol.errors",
    "A2A": ".extension",
    "from_prefixed_env": ".flask_compat",
    "Artifact": ".protocol.model",
    "AuthenticationInfo": ".protocol.model",
    "Message": ".protocol.model",
    "Part": ".protocol.model",
    "Principal": ".protocol.model",
    "PushConfig": ".protocol.model",
    "Role": ".protocol.model",
    "Task": ".protocol.model",
    "TaskArtifactUpdateEvent": ".protocol.model",
    "TaskState": ".protocol.model",
    "TaskStatus": ".protocol.model",
    "TaskStatusUpdateEvent": ".protocol.model",
    "Skill": ".exchange.router",
    "AppAnswer": ".exchange.reentry",
    "Reentry": ".exchange.reentry",
    "GeventRunner": ".exchange.runner",
    "ThreadRunner": ".exchange.runner",
    "MemoryStore": ".store.memory",
    "Store": ".store.base",
    "TaskContext": ".exchange.tasks",
    "TaskUpdater": ".exchange.tasks",
}

__all__ = [*_SOURCES, "__version__"]


def _lazy_names(
    namespace: dict[str, t.Any],
    sources: t.Mapping[str, str],
    *,
    submodules: bool = False,
) -> tuple[t.Callable[[str], t.Any], t.Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of the home whose ``globals()`` is
    ``namespace``: this package's and each subpackage home's (``from .. import _lazy_names``).

    ``sources`` maps a public name to the module defining it, written as after ``from`` in the
    home's ``__init__`` (``".card.document"``, ``"..exchange.calls"``), or ``"module:name"``
    where its name there differs (``".jsonrpc:handle"``). A name is imported the first time it
    is asked for, then kept in ``namespace`` (later lookups never come back here). With
    ``submodules``, another public name that is a submodule is imported as one
    (``flask_a2a.store`` after a bare ``import flask_a2a``).
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> t.Any:
        if name in sources:
            module, _, attribute = sources[name].partition(":")
            value = getattr(importlib.import_module(module, package), attribute or name)
        elif (
            submodules
            and not name.startswith("_")
            and importlib.util.find_spec(f"{package}.{name}")
        ):
            value = importlib.import_module(f".{name}", package)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *sources})

    return __getattr__, __dir__


if not t.TYPE_CHECKING:  # type checkers see the imports above, and flag an unknown name
    __getattr__, __dir__ = _lazy_names(globals(), _SOURCES, submodules=True)
