"""Deprecated: moved to :mod:`flask_a2a.protocol.model`; this path is removed in the next release.

Import from ``flask_a2a.protocol.model`` (or the public names from ``flask_a2a``).
"""

from .protocol.model import *  # noqa: F403
from .protocol.model import (
    INTERRUPTED_STATES as INTERRUPTED_STATES,
)
from .protocol.model import (
    ROLE_NUMBERS as ROLE_NUMBERS,
)
from .protocol.model import (
    TASK_STATE_NUMBERS as TASK_STATE_NUMBERS,
)
from .protocol.model import (
    TERMINAL_STATES as TERMINAL_STATES,
)
from .protocol.model import (
    UNSET as UNSET,
)
from .protocol.model import (  # noqa: F401
    Artifact as Artifact,
)
from .protocol.model import (
    AuthenticationInfo as AuthenticationInfo,
)
from .protocol.model import (
    Message as Message,
)
from .protocol.model import (
    Part as Part,
)
from .protocol.model import (
    Principal as Principal,
)
from .protocol.model import (
    PushConfig as PushConfig,
)
from .protocol.model import (
    Role as Role,
)
from .protocol.model import (
    StreamEvent as StreamEvent,
)
from .protocol.model import (
    Task as Task,
)
from .protocol.model import (
    TaskArtifactUpdateEvent as TaskArtifactUpdateEvent,
)
from .protocol.model import (
    TaskState as TaskState,
)
from .protocol.model import (
    TaskStatus as TaskStatus,
)
from .protocol.model import (
    TaskStatusUpdateEvent as TaskStatusUpdateEvent,
)
from .protocol.model import (
    Tier as Tier,
)
from .protocol.model import (
    new_id as new_id,
)
from .protocol.model import (
    utcnow as utcnow,
)
