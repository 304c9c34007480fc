"""Principal hooks for the auth libraries Flask apps use: ``A2A(principal=...)``.

The exchange's views are not the app's views, so a decorator the app puts on its own views
(Flask-HTTPAuth's ``login_required``, Flask-JWT-Extended's ``jwt_required``) never runs for
them: ``token_auth.current_user()`` is None in a hook that only reads it. Each helper here
returns a hook that does what the library's decorator does, inside the exchange's request,
and hands back the caller's owner (or None: 401 / -31401). The libraries are imported when a
hook runs, so none of them is a dependency. Flask-Login needs no decorator (its
``current_user`` loads itself), and a token check in the app's ``before_request`` already ran:
docs/existing-app.md, "Who is calling".
"""

from __future__ import annotations

import typing as t

from flask import g

if t.TYPE_CHECKING:
    from .protocol.model import Principal

#: Public (docs/api.md, "Where names live"); the rest of this module is private.
__all__ = ["flask_login_principal", "httpauth_principal", "jwt_principal", "user_id"]

#: What a hook returns: a Principal, an owner id (str or int), or None (refused).
Found = t.Union["Principal", str, int, None]
PrincipalHook = t.Callable[[], Found]


def user_id(user: t.Any) -> Found:
    """A user's owner id: an id or name as it is, else ``user.get_id()`` (Flask-Login's
    ``UserMixin``), else ``user.id``."""
    if user is None or isinstance(user, (str, int)):
        return t.cast(Found, user)
    get_id = getattr(user, "get_id", None)
    return t.cast(Found, get_id() if callable(get_id) else user.id)


def flask_login_principal(owner: t.Callable[[t.Any], Found] = user_id) -> PrincipalHook:
    """Flask-Login: the logged-in user (session cookie or ``request_loader``), else None."""

    def principal() -> Found:
        from flask_login import current_user

        return owner(current_user) if current_user.is_authenticated else None

    return principal


def httpauth_principal(auth: t.Any, owner: t.Callable[[t.Any], Found] = user_id) -> PrincipalHook:
    """Flask-HTTPAuth (``HTTPTokenAuth``, ``HTTPBasicAuth``; not ``MultiAuth``): runs the
    checks of ``auth.login_required`` (``get_auth``, then your ``verify_token`` /
    ``verify_password`` callback) and, as it does, sets ``auth.current_user()`` for the rest of
    the request. A user the callback refuses (None or False) is refused here."""

    def principal() -> Found:
        credentials = auth.get_auth()
        user = auth.authenticate(credentials, auth.get_auth_password(credentials))
        if user is None or user is False:
            return None
        if user is True:  # a callback that says yes without a user: the user name is the user
            user = credentials.username if credentials else None
        g.flask_httpauth_user = user
        return owner(user)

    return principal


def jwt_principal(owner: t.Callable[[t.Any], Found] = user_id) -> PrincipalHook:
    """Flask-JWT-Extended: ``verify_jwt_in_request(optional=True)``, then the token's identity
    (``get_jwt_identity()``, the ``sub`` claim). No token, or one that does not verify (expired,
    bad signature, revoked), is None: the caller gets 401, not your app's JWT error page."""

    def principal() -> Found:
        from flask_jwt_extended import get_jwt_identity, verify_jwt_in_request
        from flask_jwt_extended.exceptions import JWTExtendedException
        from jwt.exceptions import PyJWTError

        try:
            if verify_jwt_in_request(optional=True) is None:
                return None
        except (JWTExtendedException, PyJWTError):
            return None
        return owner(get_jwt_identity())

    return principal
