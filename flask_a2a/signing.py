"""Deprecated: moved to :mod:`flask_a2a.card.signing`; this path is removed in the next release.

Import from ``flask_a2a.card.signing`` (or the public names from ``flask_a2a``).
"""

from .card.signing import *  # noqa: F403
from .card.signing import (  # noqa: F401
    ALGORITHMS as ALGORITHMS,
)
from .card.signing import (
    CardSignatureError as CardSignatureError,
)
from .card.signing import (
    PrivateKey as PrivateKey,
)
from .card.signing import (
    PublicKey as PublicKey,
)
from .card.signing import (
    SigningKey as SigningKey,
)
from .card.signing import (
    b64url as b64url,
)
from .card.signing import (
    b64url_decode as b64url_decode,
)
from .card.signing import (
    canonical_payload as canonical_payload,
)
from .card.signing import (
    jwks as jwks,
)
from .card.signing import (
    public_jwk as public_jwk,
)
from .card.signing import (
    sign_card as sign_card,
)
from .card.signing import (
    thumbprint as thumbprint,
)
from .card.signing import (
    verify_card as verify_card,
)
