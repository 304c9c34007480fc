"""A small A2A client (JSON-RPC or HTTP+JSON, SSE) for tests, scripts and agent-to-agent
calls, and the receiving end of push notifications (``parse_notification``).

The public names are ``__all__``; ``A2AClient``, ``A2AClientError`` and ``NotificationRejected``
live in ``flask_a2a`` (``A2AClient`` and ``NotificationRejected`` are here too, the same
objects, for old imports), and the other names below are private.
"""

from .a2a_client import (
    DEFAULT_SEND_TIMEOUT as DEFAULT_SEND_TIMEOUT,
)
from .a2a_client import (
    DEFAULT_STREAM_TIMEOUT as DEFAULT_STREAM_TIMEOUT,
)
from .a2a_client import (
    DEFAULT_TIMEOUT as DEFAULT_TIMEOUT,
)
from .a2a_client import (
    PROTOCOL_VERSION as PROTOCOL_VERSION,
)
from .a2a_client import (
    A2AClient as A2AClient,
)
from .a2a_client import (
    PushConfigPage as PushConfigPage,
)
from .a2a_client import (
    TaskListPage as TaskListPage,
)
from .a2a_client import (
    Timeout as Timeout,
)
from .a2a_client import (
    jsonrpc_endpoint as jsonrpc_endpoint,
)
from .bindings import (
    TRANSPORTS as TRANSPORTS,
)
from .bindings import (
    Transport as Transport,
)
from .jsonrpc import (
    JsonRpcTransport as JsonRpcTransport,
)
from .messages import (
    build_message as build_message,
)
from .messages import (
    skill_message as skill_message,
)
from .notifications import (
    NotificationRejected as NotificationRejected,
)
from .notifications import (
    parse_notification as parse_notification,
)
from .rest import (
    RestTransport as RestTransport,
)
from .sse import (
    EventStream as EventStream,
)
from .v03 import (
    legacy_endpoint as legacy_endpoint,
)

__all__ = [
    "TRANSPORTS",
    "EventStream",
    "JsonRpcTransport",
    "PushConfigPage",
    "RestTransport",
    "TaskListPage",
    "Transport",
    "build_message",
    "legacy_endpoint",
    "parse_notification",
    "skill_message",
]
