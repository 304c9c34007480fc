"""Task stores: the :class:`Store` protocol and its built-in implementations."""

from .base import ListQuery as ListQuery
from .base import RetentionTrimmer as RetentionTrimmer
from .base import StaleTaskError as StaleTaskError
from .base import Store as Store
from .base import TaskPage as TaskPage
from .base import TaskRecord as TaskRecord
from .memory import MemoryStore as MemoryStore
