"""What every store can hold: the longest ids and keys, and no NUL characters.

The SQL store sizes its columns from these numbers, and the exchange refuses a longer value (or
one holding a NUL, which PostgreSQL refuses in any text it is given) where params and the
principal are read, with -32602 naming the field. So the memory store answers exactly as the SQL
store does, and no request reaches a store with a value it would fail on.

Strings inside a task's JSON body (message text, metadata, artifact ids) are not limited here:
the body is a text column holding JSON, where a NUL is the escape ``\\u0000``.
"""

from __future__ import annotations

import logging
import typing as t

from .errors import InvalidParamsError

if t.TYPE_CHECKING:
    from .model import Principal

log = logging.getLogger("flask_a2a")

#: A task id (ours are 32 hex characters; a caller's lookups are refused past this).
MAX_TASK_ID: t.Final = 128
#: A context id, a push-config id, an owner, a tenant.
MAX_KEY: t.Final = 255


def unstorable(value: str, limit: int) -> str | None:
    """Why no store can hold ``value`` in a field of ``limit`` characters, or None."""
    if len(value) > limit:
        return f"is longer than {limit} characters"
    if "\x00" in value:
        return "must not contain NUL characters"
    return None


def refusal(field: str, reason: str) -> InvalidParamsError:
    return InvalidParamsError(
        f"Invalid parameters: {field}: {reason}", field_violations=[(field, reason)]
    )


def check_principal(principal: Principal) -> None:
    """Refuse a caller whose owner or tenant no store can hold (-32602 naming it).

    The value comes from the host's principal hook, usually from the caller's credential (a
    token's subject), so the request is refused like a bad param, never with -32603; the log
    says which hook value it was, for the host to fix.
    """
    for field, value in (("principal.owner", principal.owner),
                         ("principal.tenant", principal.tenant)):  # fmt: skip
        if value is None:
            continue
        reason = unstorable(value, MAX_KEY)
        if reason is not None:
            log.warning("a2a: the principal hook returned a %s that %s; refused", field, reason)
            raise refusal(field, reason)
