"""The oldest release of each library flask_a2a works with, checked once at ``init_app``.

pip refuses a version below these when it installs the package, but a host can still end up
with one (``pip install --no-deps``, a later downgrade, a vendored copy): then the first sign
would be a ``TypeError`` deep in a request. Checking at ``init_app`` turns it into one
:class:`~flask_a2a.config.ConfigError` that names the package, the version found and the one
needed. The floors are setup.cfg's, which ``tests/test_versions.py`` keeps equal to this table.
"""

from __future__ import annotations

import re
import typing as t
from importlib import metadata

#: The distributions the core needs, by the name pip knows them: the oldest release CI proves.
REQUIRED: t.Final[dict[str, str]] = {
    "Flask": "2.0.3",
    "Werkzeug": "2.0.3",
    "marshmallow": "2.20.2",
    "requests": "2.25.1",
    "SQLAlchemy": "1.4.24",
}

#: The optional ones, checked only when installed (each behind an extra).
OPTIONAL: t.Final[dict[str, str]] = {
    "gevent": "21.1.2",
    "gunicorn": "20.1.0",
    "redis": "4.1.2",
    "rq": "1.16",
    "cryptography": "3.4.8",
    "PyMySQL": "1.0.2",
}

_RELEASE = re.compile(r"\d+(?:\.\d+)*")


def release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string (``"2.0.3rc1"`` -> ``(2, 0, 3)``)."""
    found = _RELEASE.match(version)
    return tuple(int(part) for part in found.group().split(".")) if found else ()


def installed(name: str) -> str | None:
    """The installed version of distribution ``name``, or None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def too_old() -> list[str]:
    """One line per installed library older than its floor (empty when all are recent enough)."""
    lines = []
    for table, required in ((REQUIRED, True), (OPTIONAL, False)):
        for name, floor in table.items():
            found = installed(name)
            if found is None:
                if required:
                    lines.append(f"flask_a2a needs {name}>={floor}, which is not installed")
            elif release(found) < release(floor):
                need = f"{name}>={floor}"
                lines.append(f"flask_a2a needs {need} (found {found}): pip install '{need}'")
    return lines


def check_versions() -> None:
    """Raise ConfigError naming each library below its floor; cached after the first pass."""
    global _checked
    if _checked:
        return
    lines = too_old()
    if lines:
        from .config import ConfigError

        raise ConfigError("; ".join(lines))
    _checked = True


_checked = False
