"""Deprecated: moved to :mod:`flask_a2a.ops.health`; this path is removed in the next release.

Import from ``flask_a2a.ops.health`` (or the public names from ``flask_a2a``).
"""

from .ops.health import *  # noqa: F403
from .ops.health import (  # noqa: F401
    OK as OK,
)
from .ops.health import (
    PROBE_TASK_ID as PROBE_TASK_ID,
)
from .ops.health import (
    TIMEOUT as TIMEOUT,
)
from .ops.health import (
    check as check,
)
from .ops.health import (
    probe as probe,
)
from .ops.health import (
    report as report,
)
