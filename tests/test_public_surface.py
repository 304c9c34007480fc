"""The public surface: each public name has one home, and docs and examples use only the homes.

A home is the top package or one of the subpackages or modules docs/api.md lists under "Where
names live"; its public names are its ``__all__``. Every other module path is private. The docs
(but docs/architecture.md, the map of the private modules for changing the code), the README
and examples/ are read as a user reads them: each ``import`` in a code block (with ``ast`` in a
``python`` block or an example, line by line in another block) and each dotted path
``flask_a2a.x.y`` in the text must name a home and, after it, one of its public names. The tests
themselves may import private paths.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import itertools
import re
import typing as t
from pathlib import Path

import pytest

import flask_a2a

ROOT = Path(__file__).resolve().parent.parent
API_PAGE = ROOT / "docs" / "api.md"
#: Pages that name private modules on purpose: the map of the code, for changing it.
MAPS = {ROOT / "docs" / "architecture.md"}
PAGES = sorted({*ROOT.joinpath("docs").rglob("*.md"), ROOT / "README.md"} - MAPS)
EXAMPLES = sorted(ROOT.joinpath("examples").rglob("*.py"))
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
DOTTED = re.compile(r"(?<![\w.])flask_a2a(?:\.[A-Za-z_]\w*)+")
FROM_LINE = re.compile(r"^\s*from\s+(flask_a2a[\w.]*)\s+import\s+\(?([\w\s,]+)", re.M)
IMPORT_LINE = re.compile(r"^\s*import\s+(flask_a2a[\w.]*)", re.M)
#: Dotted strings in the docs that are not import paths.
NOT_PATHS: dict[str, str] = {
    "flask_a2a.entity_call": "the environ key a re-entered request carries",
    "flask_a2a.config.ConfigError": "how a traceback prints the error (its defining module)",
}
#: Names in two homes until the work that makes them one object lands; each entry must still be
#: two different objects (so it is removed, and the name given one home, once that is done).
TWO_CLASSES_FOR_NOW: dict[str, str] = {}


def homes_table() -> dict[str, set[str]]:
    """docs/api.md's "Where names live" table: each home and the names its row shows."""
    text = API_PAGE.read_text()
    section = text.split("## Where names live", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        row = re.match(r"^\| `(flask_a2a[\w.]*)` \|(.*)\|\s*$", line)
        if row:
            rows[row.group(1)] = set(re.findall(r"`(\w+)`", row.group(2)))
    return rows


HOMES_SHOWN = homes_table()


#: Homes that import an optional extra (gRPC: Python 3.10+ and pydantic 2, not beside old pins).
NEEDS_EXTRA: t.Final = {"flask_a2a.grpc_server": "grpc_status"}


def importable(home: str) -> bool:
    return home not in NEEDS_EXTRA or importlib.util.find_spec(NEEDS_EXTRA[home]) is not None


def public_names(home: str) -> set[str]:
    """A home's ``__all__``: imported, or read from its source where its extra is missing."""
    if importable(home):
        return set(importlib.import_module(home).__all__)
    spec = importlib.util.find_spec(home)
    assert spec is not None and spec.origin is not None, home
    tree = ast.parse(Path(spec.origin).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{home} has no literal __all__")


def imported(home: str) -> t.Any:
    if not importable(home):
        pytest.skip(f"{home} needs its extra ({NEEDS_EXTRA[home]} is not installed)")
    return importlib.import_module(home)


HOMES: dict[str, set[str]] = {home: public_names(home) for home in HOMES_SHOWN}


def test_the_architecture_page_names_the_same_homes() -> None:
    """docs/architecture.md's rule names each home (``store``, ``store/migrations``, ...)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    rule = text.split("**A module is private unless it is a public home.**", 1)[1]
    rule = rule.split("\n- ", 1)[0].split("\n## ", 1)[0]
    named = set(re.findall(r"`([\w/]+)`", rule)) - {"__init__", "__all__"}
    assert "flask_a2a" in HOMES and len(HOMES) > 10
    assert named == {home[len("flask_a2a.") :].replace(".", "/") for home in HOMES} - {""}


@pytest.mark.parametrize("home", sorted(HOMES_SHOWN))
def test_each_home_exports_what_the_api_page_says(home: str) -> None:
    """The table row is the home's ``__all__``; the top's row leaves out only the errors (the
    "Errors" section lists them)."""
    shown, exported = HOMES_SHOWN[home], HOMES[home]
    assert shown - exported == set(), f"{home}: the table shows names it does not export"
    left_out = sorted(exported - shown)
    if home == "flask_a2a":
        left_out = [
            name
            for name in left_out
            if not (isinstance(value := getattr(flask_a2a, name), type))
            or not issubclass(value, BaseException)
        ]
    assert left_out == [], f"{home} exports names the table does not show"


@pytest.mark.parametrize("home", sorted(HOMES))
def test_every_public_name_resolves(home: str) -> None:
    module = imported(home)
    missing = []
    for name in sorted(HOMES[home]):
        try:
            getattr(module, name)
        except AttributeError:
            missing.append(name)
        except ModuleNotFoundError as exc:  # a lazy name of an extra that is not installed
            assert exc.name is not None and exc.name.split(".")[0] in (
                "grpc",
                "grpc_status",
                "a2a",
            ), exc
    assert missing == []


def test_each_public_name_has_one_home() -> None:
    seen: dict[str, list[str]] = {}
    for home, names in HOMES.items():
        for name in names:
            seen.setdefault(name, []).append(home)
    twice = {name: homes for name, homes in seen.items() if len(homes) > 1}
    assert set(twice) == set(TWO_CLASSES_FOR_NOW), twice
    for name, homes in twice.items():
        objects = [getattr(importlib.import_module(home), name) for home in homes]
        assert all(a is not b for a, b in itertools.combinations(objects, 2)), (
            f"{name} is one object now: give it one home ({homes}), drop it from "
            "TWO_CLASSES_FOR_NOW"
        )


def test_a_top_level_name_kept_in_a_subpackage_is_the_same_object() -> None:
    """``flask_a2a.store.MemoryStore`` still imports (old code), but is ``flask_a2a``'s."""
    kept = 0
    for home in sorted(set(HOMES) - {"flask_a2a"}):
        if not importable(home):
            continue
        module = importlib.import_module(home)
        for name in sorted(HOMES["flask_a2a"] & set(vars(module))):
            assert getattr(module, name) is getattr(flask_a2a, name), f"{home}.{name}"
            kept += 1
    assert kept >= 5  # Store and MemoryStore, AgentCard, A2AClient, Entity at least


def home_of(name: str) -> list[str]:
    return sorted(home for home, names in HOMES.items() if name in names)


def dotted_refusal(path: str) -> str | None:
    """Why ``path`` (``flask_a2a.a.b.Name.attr``) is not a home and a public name of it."""
    if path in NOT_PATHS:
        return None
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        home = ".".join(parts[:end])
        if home in HOMES:
            rest = parts[end:]
            if not rest or rest[0] in HOMES[home]:
                return None
            where = home_of(parts[-1]) or "none: a private path"
            return f"{rest[0]} is not public in {home}; its home: {where}"
    return "not a home"  # pragma: no cover - flask_a2a itself is one


def import_refusal(module: str, names: t.Iterable[str | None]) -> str | None:
    if module not in HOMES:
        found = sorted({home for name in names if name for home in home_of(name)})
        return f"{module} is private; import from {found or 'a home'}"
    wrong = sorted(
        name
        for name in names
        if name and name not in HOMES[module] and f"{module}.{name}" not in HOMES
    )
    return (
        f"{wrong} not public in {module}; homes: {[home_of(n) for n in wrong]}" if wrong else None
    )


def code_refusals(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] == "flask_a2a":
                why = import_refusal(node.module, [alias.name for alias in node.names])
                found += [f"from {node.module} import …: {why}"] if why else []
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "flask_a2a" and alias.name not in HOMES:
                    found.append(f"import {alias.name}: private")
    return found


def line_refusals(block: str) -> list[str]:
    """The imports of a block that is not ``python`` (a ``gunicorn.conf.py`` shown as text)."""
    found = []
    for module, names in FROM_LINE.findall(block):
        why = import_refusal(module, [n.strip() for n in names.split(",") if n.strip()])
        found += [f"from {module} import …: {why}"] if why else []
    return found + [f"import {m}: private" for m in IMPORT_LINE.findall(block) if m not in HOMES]


def dotted_refusals(text: str) -> list[str]:
    return [f"{path}: {why}" for path in DOTTED.findall(text) if (why := dotted_refusal(path))]


def page_refusals(page: Path) -> list[str]:
    text = page.read_text()
    found = []
    for language, body in FENCE.findall(text):
        found += code_refusals(body) if language == "python" else line_refusals(body)
    return found + dotted_refusals(text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_name_only_public_homes(page: Path) -> None:
    found = page_refusals(page)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_import_only_public_homes(example: Path) -> None:
    source = example.read_text()
    found = code_refusals(source) + dotted_refusals(source)
    assert not found, "\n".join(found)


def test_the_checks_catch_a_deep_path() -> None:
    """What the checks above refuse, on text written the way the docs were."""
    assert code_refusals("from flask_a2a.store.sql_waits import bound_waits\n")
    assert code_refusals("from flask_a2a.protocol.model import Principal\n")
    assert code_refusals("import flask_a2a.exchange.calls\n")
    assert code_refusals("from flask_a2a.store import MemoryStore\n")  # the top's
    assert not code_refusals("from flask_a2a.store import SQLStore, migrations\n")
    assert dotted_refusals("bus=`flask_a2a.fleet.redis_bus.RedisBus(url)`")
    assert dotted_refusals("`flask_a2a.store.MemoryStore`")  # its home is the top
    assert not dotted_refusals("`flask_a2a.fleet.RedisBus(url)`, `flask_a2a.card.SigningKey.jwk`")
    assert line_refusals("from flask_a2a.card.signing import SigningKey  # noqa")
    assert not line_refusals("from flask_a2a.gunicorn import child_exit, worker_exit  # noqa")
