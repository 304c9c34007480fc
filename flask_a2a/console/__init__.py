"""The A2A console: a page served by the app itself to try, watch and debug its agent.

Off unless ``A2A_CONSOLE_PATH`` is set (docs/console.md). :func:`register` mounts it.
"""

from __future__ import annotations

from .views import AdminCheck as AdminCheck
from .views import register as register
