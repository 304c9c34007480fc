"""Deprecated: moved to :mod:`flask_a2a.ops.telemetry`; this path is removed in the next release.

Import from ``flask_a2a.ops.telemetry`` (or the public names from ``flask_a2a``).
"""

from .ops.telemetry import *  # noqa: F403
from .ops.telemetry import (  # noqa: F401
    AVAILABLE as AVAILABLE,
)
from .ops.telemetry import (
    NO_SPAN as NO_SPAN,
)
from .ops.telemetry import (
    TRACER_NAME as TRACER_NAME,
)
from .ops.telemetry import (
    SpanLike as SpanLike,
)
from .ops.telemetry import (
    annotate as annotate,
)
from .ops.telemetry import (
    capture as capture,
)
from .ops.telemetry import (
    exchange_span as exchange_span,
)
from .ops.telemetry import (
    note_error as note_error,
)
from .ops.telemetry import (
    note_result as note_result,
)
from .ops.telemetry import (
    note_state as note_state,
)
from .ops.telemetry import (
    push_span as push_span,
)
from .ops.telemetry import (
    recording as recording,
)
from .ops.telemetry import (
    run_span as run_span,
)
from .ops.telemetry import (
    store_span as store_span,
)
