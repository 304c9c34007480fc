"""The agent card: the document, its JWS signing, served at the well-known path.

The public names are ``__all__``: card signing, imported on first use (the ``signing`` extra).
``AgentCard`` lives in ``flask_a2a``; the names of ``document.py`` below stay here for old
imports, and are private.
"""

from __future__ import annotations

import typing as t

from .. import _lazy_names
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

if t.TYPE_CHECKING:
    from .signing import CardSignatureError as CardSignatureError
    from .signing import SigningKey as SigningKey
    from .signing import canonical_payload as canonical_payload
    from .signing import jwks as jwks
    from .signing import sign_card as sign_card
    from .signing import verify_card as verify_card

#: Public name -> the submodule defining it, imported on first use (``cryptography``).
_SOURCES: t.Final[dict[str, str]] = {
    "CardSignatureError": ".signing",
    "SigningKey": ".signing",
    "canonical_payload": ".signing",
    "jwks": ".signing",
    "sign_card": ".signing",
    "verify_card": ".signing",
}

__all__ = list(_SOURCES)

if not t.TYPE_CHECKING:  # type checkers see the imports above, and flag an unknown name
    __getattr__, __dir__ = _lazy_names(globals(), _SOURCES)
