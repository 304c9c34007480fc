"""The exchange's endpoints and a CSRF check: exempted from Flask-WTF's, listed for one of the
app's own.

The exchange is no form endpoint: its Origin gate (a cross-site browser POST is refused before
the body is read) and its JSON content type are its CSRF defence, and A2A clients carry no CSRF
token. Flask-WTF's ``CSRFProtect`` is told so (in either registration order); a check the app
wrote itself skips the names ``A2A.endpoints()`` gives (:func:`endpoints_of`).
"""

from __future__ import annotations

import typing as t

from flask import Flask, current_app

from .views import exchange_view, rest_view

if t.TYPE_CHECKING:
    from .state import A2AState


def endpoints_of(app: Flask, blueprint: str, *, console: bool) -> tuple[str, ...]:
    """The endpoints of an agent's blueprint (and of the console, the first agent's)."""
    from .console.views import BLUEPRINT as CONSOLE

    mine = {blueprint, CONSOLE} if console else {blueprint}
    return tuple(
        sorted({r.endpoint for r in app.url_map.iter_rules() if r.endpoint.split(".")[0] in mine})
    )


def exempt_from_csrf(app: Flask) -> bool:
    """Exempt the exchange's views from Flask-WTF's ``CSRFProtect`` when the app has one;
    the app's own routes stay checked."""
    exempt = getattr(app.extensions.get("csrf"), "exempt", None)
    if exempt is None:
        return False
    exempt(exchange_view)
    exempt(rest_view)
    return True


def exempt_from_csrf_hook() -> None:
    """Registered by ``init_app``, so it runs before the check of a ``CSRFProtect`` set up
    later (before-request hooks run in registration order). It runs once: an app's hooks and
    extensions are set up before its first request (Flask refuses a hook added later), so it
    then takes itself out of the app's hooks and no request after pays for the call."""
    app = t.cast(Flask, current_app._get_current_object())  # type: ignore[attr-defined]
    state = t.cast("A2AState", app.extensions["a2a"])
    if not state.csrf_exempted:
        state.csrf_exempted = exempt_from_csrf(app)
    hooks = app.before_request_funcs.get(None)
    if hooks and exempt_from_csrf_hook in hooks:  # a new list: Flask may be iterating this one
        app.before_request_funcs[None] = [h for h in hooks if h is not exempt_from_csrf_hook]
