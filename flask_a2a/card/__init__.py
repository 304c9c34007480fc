"""The agent card: the document, its JWS signing, served at the well-known path.

The names of ``document.py`` are re-exported here, so ``flask_a2a.card`` keeps its old imports.
"""

from .document import (
    AGENT_CARD_PATH as AGENT_CARD_PATH,
)
from .document import (
    AGENT_ROLE_ENDPOINTS as AGENT_ROLE_ENDPOINTS,
)
from .document import (
    HEALTH_PATH as HEALTH_PATH,
)
from .document import (
    PROTECTED_RESOURCE_PATH as PROTECTED_RESOURCE_PATH,
)
from .document import (
    PROTOCOL_VERSION as PROTOCOL_VERSION,
)
from .document import (
    AgentCard as AgentCard,
)
from .document import (
    CardPublisher as CardPublisher,
)
from .document import (
    build_card as build_card,
)
from .document import (
    check_card_config as check_card_config,
)
from .document import (
    encode_card as encode_card,
)
from .document import (
    etag_of as etag_of,
)
from .document import (
    skill_entry as skill_entry,
)
