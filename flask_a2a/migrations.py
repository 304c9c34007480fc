"""Deprecated: moved to :mod:`flask_a2a.store.migrations`; this path is removed in the next release.

Import from ``flask_a2a.store.migrations`` (or the public names from ``flask_a2a``).
"""

from .store.migrations import *  # noqa: F403
from .store.migrations import (  # noqa: F401
    IncludeName as IncludeName,
)
from .store.migrations import (
    create_tables as create_tables,
)
from .store.migrations import (
    drop_tables as drop_tables,
)
from .store.migrations import (
    include_name as include_name,
)
from .store.migrations import (
    table_names as table_names,
)
