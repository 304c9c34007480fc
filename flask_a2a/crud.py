"""Deprecated: moved to :mod:`flask_a2a.entities.crud`; this path is removed in the next release.

Import from ``flask_a2a.entities.crud`` (or the public names from ``flask_a2a``).
"""

from .entities.crud import *  # noqa: F403
from .entities.crud import (  # noqa: F401
    OwnerHook as OwnerHook,
)
from .entities.crud import (
    crud_blueprint as crud_blueprint,
)
