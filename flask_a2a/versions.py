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
    "grpcio": "1.60",
    "grpcio-status": "1.60",
    "a2a-sdk": "1.3",
}

#: Optional ones checked when their feature starts (``check_versions("grpc")``), not at
#: ``init_app``: an app serving no gRPC may hold an older grpcio, or the SDK's 0.3 line, for
#: reasons of its own. The ``grpc`` extra needs Python 3.10+ and pydantic 2 (the SDK's).
ON_USE: t.Final[dict[str, tuple[str, ...]]] = {"grpc": ("grpcio", "grpcio-status", "a2a-sdk")}

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


def too_old(extra: str | None = None) -> list[str]:
    """One line per installed library older than its floor (empty when all are recent enough);
    with ``extra``, one per library of that extra (:data:`ON_USE`) missing or too old."""
    lines = []
    tables: tuple[tuple[dict[str, str], bool], ...]
    if extra is None:
        later = {name for names in ON_USE.values() for name in names}
        optional = {name: floor for name, floor in OPTIONAL.items() if name not in later}
        tables = ((REQUIRED, True), (optional, False))
    else:
        tables = (({name: OPTIONAL[name] for name in ON_USE[extra]}, True),)
    for table, required in tables:
        for name, floor in table.items():
            found = installed(name)
            if found is None:
                if required:
                    lines.append(f"flask_a2a needs {name}>={floor}, which is not installed")
            elif release(found) < release(floor):
                need = f"{name}>={floor}"
                lines.append(f"flask_a2a needs {need} (found {found}): pip install '{need}'")
    return lines


def check_versions(extra: str | None = None) -> None:
    """Raise ConfigError naming each library below its floor (with ``extra``: each of that
    extra's, missing or below); the core's check is cached after the first pass."""
    global _checked
    if _checked and extra is None:
        return
    lines = too_old(extra)
    if lines:
        from .config import ConfigError

        raise ConfigError("; ".join(lines))
    if extra is None:
        _checked = True


_checked = False
