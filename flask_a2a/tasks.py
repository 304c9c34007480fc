"""Deprecated: moved to :mod:`flask_a2a.exchange.tasks`; this path is removed in the next release.

Import from ``flask_a2a.exchange.tasks`` (or the public names from ``flask_a2a``).
"""

from .exchange.tasks import *  # noqa: F403
from .exchange.tasks import (  # noqa: F401
    CREDENTIAL_HEADERS as CREDENTIAL_HEADERS,
)
from .exchange.tasks import (
    INBOX_LIMIT as INBOX_LIMIT,
)
from .exchange.tasks import (
    Run as Run,
)
from .exchange.tasks import (
    TaskContext as TaskContext,
)
from .exchange.tasks import (
    TaskMutations as TaskMutations,
)
from .exchange.tasks import (
    TaskUpdater as TaskUpdater,
)
from .exchange.tasks import (
    TaskWriter as TaskWriter,
)
from .exchange.tasks import (
    artifact_parts as artifact_parts,
)
from .exchange.tasks import (
    credential_headers as credential_headers,
)
from .exchange.tasks import (
    is_final as is_final,
)
from .exchange.tasks import (
    returned_parts as returned_parts,
)
from .exchange.tasks import (
    scrub as scrub,
)
from .exchange.tasks import (
    scrub_exception as scrub_exception,
)
from .exchange.tasks import (
    storing as storing,
)
