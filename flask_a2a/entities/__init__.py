"""Entity skills: the host app's own resources as deterministic skills, their tool schemas
and the CRUD blueprint.

The names of ``registry.py`` are re-exported here, so ``flask_a2a.entities`` keeps its old imports.
"""

from .operations import (
    Argument as Argument,
)
from .operations import (
    Operation as Operation,
)
from .registry import (
    DEFAULT_ROUTES as DEFAULT_ROUTES,
)
from .registry import (
    ENTITY_CALL_ENVIRON_KEY as ENTITY_CALL_ENVIRON_KEY,
)
from .registry import (
    LIST_KEYS as LIST_KEYS,
)
from .registry import (
    MAX_ANSWER_BYTES as MAX_ANSWER_BYTES,
)
from .registry import (
    MAX_DESCRIBED_FIELDS as MAX_DESCRIBED_FIELDS,
)
from .registry import (
    OPERATIONS as OPERATIONS,
)
from .registry import (
    TOOL_UNAVAILABLE as TOOL_UNAVAILABLE,
)
from .registry import (
    Answer as Answer,
)
from .registry import (
    AnswerTooLarge as AnswerTooLarge,
)
from .registry import (
    ArgumentError as ArgumentError,
)
from .registry import (
    Call as Call,
)
from .registry import (
    Entity as Entity,
)
from .registry import (
    EntityGate as EntityGate,
)
from .registry import (
    EntityRegistry as EntityRegistry,
)
from .registry import (
    Tool as Tool,
)
from .registry import (
    build_tools as build_tools,
)
from .registry import (
    describe_skill as describe_skill,
)
from .registry import (
    dispatch as dispatch,
)
from .registry import (
    refusal_text as refusal_text,
)
