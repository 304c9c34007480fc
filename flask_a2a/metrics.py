"""Deprecated: moved to :mod:`flask_a2a.ops.metrics`; this path is removed in the next release.

Import from ``flask_a2a.ops.metrics`` (or the public names from ``flask_a2a``).
"""

from .ops.metrics import *  # noqa: F403
from .ops.metrics import (  # noqa: F401
    NOOP as NOOP,
)
from .ops.metrics import (
    RUN_BUCKETS as RUN_BUCKETS,
)
from .ops.metrics import (
    STORE_BUCKETS as STORE_BUCKETS,
)
from .ops.metrics import (
    PrometheusRecorder as PrometheusRecorder,
)
from .ops.metrics import (
    Recorder as Recorder,
)
from .ops.metrics import (
    exposition as exposition,
)
from .ops.metrics import (
    metrics_view as metrics_view,
)
from .ops.metrics import (
    recorder as recorder,
)
from .ops.metrics import (
    state_label as state_label,
)
