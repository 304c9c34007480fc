"""The package's layering, checked on the import graph (docs/architecture.md gives the map).

Each module's imports are read with ``ast`` (no import runs for the check itself). Imports under
``if t.TYPE_CHECKING:`` are exempt from the layering: they only name types for mypy and run
nothing; they count for cycles (a module pair that names each other for types is a circle a
reader must hold in mind all the same). Imports inside a function count for the layering (they
run), not for cycles (they run after every module has loaded).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "flask_a2a"

#: Lowest first. A module imports only its own layer and the layers below; ``config`` (plain
#: settings, imports nothing of the package) may be imported from anywhere.
LAYERS: dict[str, int] = {
    "protocol": 0,
    "ops": 1,
    "store": 2,
    "exchange": 3,
    "bindings": 4,
    "push": 5,
    "card": 5,
    "entities": 5,
    "fleet": 5,
    "client": 5,
}
TOP = 6  # extension, cli, config, gunicorn, testing and the package's __init__
LEAVES = {"flask_a2a.config"}
#: Packages that belong to the top layer itself (the browser console, beside the extension).
TOP_PACKAGES = {"console"}
#: Layers that must run without Flask or Werkzeug (a server built by hand can use them).
NO_FLASK = {"protocol", "exchange", "bindings"}


def module_name(path: pathlib.Path) -> str:
    parts = ["flask_a2a", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def imports(name: str, typing_too: bool = False) -> list[tuple[str, bool]]:
    """``(imported module, at module level)`` for each runtime import of module ``name`` (and,
    with ``typing_too``, each import under ``if t.TYPE_CHECKING:``)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, bool]] = []

    def walk(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and is_type_checking(child.test) and not typing_too:
                for other in child.orelse:
                    walk_one(other, top)
                continue
            walk_one(child, top)

    def walk_one(node: ast.AST, top: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend((alias.name, top) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            submodules = [f"{target}.{alias.name}" for alias in node.names]
            if all(sub in MODULES for sub in submodules):  # ``from . import wire``: modules
                found.extend((sub, top) for sub in submodules)
            else:
                found.append((target, top))
        inner = top and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        walk(node, inner)

    walk(ast.parse(path.read_text()), True)
    return found


def layer(name: str) -> tuple[str, int]:
    parts = name.split(".")
    if len(parts) > 1 and parts[1] in TOP_PACKAGES:
        return "top", TOP
    if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS):
        return parts[1], LAYERS.get(parts[1], TOP)
    return "top", TOP


def package_imports(name: str, module_level_only: bool = False) -> set[str]:
    return {
        target
        for target, top in imports(name)
        if target.startswith("flask_a2a") and target in MODULES and (top or not module_level_only)
    }


#: Modules that need an extra the core runs without (the extra needs a newer Python or pydantic
#: than some environments the suite runs in), and the module that tells it is installed.
NEEDS_EXTRA: dict[str, str] = {
    "flask_a2a.bindings.grpc_binding": "grpc_status",
    "flask_a2a.bindings.grpc_messages": "grpc_status",
    "flask_a2a.client.grpc_transport": "grpc_status",
    "flask_a2a.grpc_server": "grpc_status",
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_imports(name: str) -> None:
    needs = NEEDS_EXTRA.get(name)
    if needs is not None and importlib.util.find_spec(needs) is None:
        pytest.skip(f"{name} needs the grpc extra (pip install 'flask-a2a[grpc]', Python 3.10+)")
    importlib.import_module(name)


def test_the_core_imports_without_the_grpc_extra() -> None:
    """No module outside :data:`NEEDS_EXTRA` imports grpc, its status helpers or the SDK at
    module level: the core (and ``flask a2a``) runs without the extra."""
    extra = {"grpc", "grpc_status", "a2a", "google"}
    wrong = sorted(
        (name, target)
        for name in MODULES
        if name not in NEEDS_EXTRA
        for target, top in imports(name)
        if top and target.split(".")[0] in extra
    )
    assert wrong == []


@pytest.mark.parametrize("name", sorted(set(MODULES) - LEAVES))
def test_a_module_imports_only_its_own_layer_and_below(name: str) -> None:
    own, rank = layer(name)
    wrong = sorted(
        target
        for target in package_imports(name) - LEAVES
        if layer(target)[1] > rank
        or (layer(target)[1] == rank and layer(target)[0] != own and rank != LAYERS["push"])
        if target != "flask_a2a"  # the package itself (its __version__)
    )
    assert wrong == [], f"{name} ({own}) imports from above its layer: {wrong}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if layer(n)[0] in NO_FLASK))
def test_protocol_exchange_and_bindings_import_no_flask(name: str) -> None:
    flask = sorted(
        target for target, _ in imports(name) if target.split(".")[0] in ("flask", "werkzeug")
    )
    assert flask == [], f"{name} imports {flask}"


def test_nothing_below_the_top_imports_the_extension_or_the_cli() -> None:
    top = {
        "flask_a2a.extension",
        "flask_a2a.views",
        "flask_a2a.cli",
        "flask_a2a.testing",
        "flask_a2a.gunicorn",
    }
    wrong = sorted(
        (name, target)
        for name in MODULES
        if layer(name)[1] < TOP
        for target in package_imports(name) & top
    )
    assert wrong == []


def architecture_tables() -> dict[str, set[str]]:
    """Each package's modules as docs/architecture.md lists them: ``{"store": {"sql", ...},
    "": {top-level modules}}``, read from the tables under each ``flask_a2a/<package>/``
    heading."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    tables: dict[str, set[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        heading = re.match(r"^(?:### |\*\*).*`flask_a2a/(\w*)/?`", line)
        if heading:
            current = heading.group(1)
            tables.setdefault(current, set())
        elif line.startswith("## "):
            current = None
        elif current is not None:
            row = re.match(r"^\| `(\w+)` \|", line)
            if row:
                tables[current].add(row.group(1))
    return tables


def test_the_architecture_page_lists_every_module_once_and_nothing_else() -> None:
    """No module the page does not list (no leftover old paths), and no listed module that is
    not there: each package's table names exactly its modules."""
    tables = architecture_tables()
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert set(tables) - {""} == packages
    for name, listed in tables.items():
        folder = PACKAGE / name if name else PACKAGE
        present = {p.stem for p in folder.glob("*.py")} - ({"__init__"} if name else set())
        assert present == listed, f"flask_a2a/{name}: the page lists {sorted(listed)}"


def test_no_import_cycles_at_module_level() -> None:
    graph = {name: package_imports(name, module_level_only=True) - {name} for name in MODULES}
    done: set[str] = set()
    cycles: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            cycles.append([*path[path.index(name) :], name])
            return
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    assert cycles == []


def cycles_in(graph: dict[str, set[str]]) -> list[list[str]]:
    done: set[str] = set()
    found: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            found.append([*path[path.index(name) :], name])
            return
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    return found


def test_no_import_cycles_type_checking_imports_included() -> None:
    """The modules form a tree of dependencies, in every layer (the top's included) and across
    them: none names, even for a type only (``if t.TYPE_CHECKING:``), a module that names it
    back. Pass the piece in, describe it with a Protocol, or move the type below both (the
    agent's state is ``state.A2AState``, below ``agents``, ``extension`` and ``views``)."""

    def named(name: str) -> set[str]:
        return {
            target
            for target, top in imports(name, typing_too=True)
            if top and target in MODULES and target != name
        }

    assert cycles_in({name: named(name) for name in MODULES}) == []


#: A module holds one concern, and one concern rarely needs more than ~500 lines. The modules
#: allowed past it, each with why it stays whole (docs/architecture.md names what they hold).
LONG_MODULE_LINES = 520
LONG_MODULES: dict[str, str] = {}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_long_unless_it_says_why(name: str) -> None:
    lines = len(MODULES[name].read_text().splitlines())
    if name in LONG_MODULES:
        assert lines > LONG_MODULE_LINES, f"{name} is {lines} lines now: drop it from LONG_MODULES"
    else:
        assert lines <= LONG_MODULE_LINES, (
            f"{name} is {lines} lines: split it along a concern, or say in LONG_MODULES why "
            "it must stay whole"
        )


# -- nothing patches another module's object ---------------------------------------------------

#: Assignments to an attribute of an object the module did not make, each with why it stays:
#: ``(module, the object assigned to)``. An exchange (and its runs) is built once from its
#: constructor's arguments: nothing here may name it.
FOREIGN_ASSIGNMENTS: dict[tuple[str, str], str] = {
    **{
        (f"flask_a2a.exchange.{module}", target): (
            "a run's state record (run_state.Run): the run path's modules change it under "
            "run.lock, which is what it is for"
        )
        for module, target in (
            ("run_life", "run"),
            ("tasks", "run"),
            ("tasks", "self._run"),
            ("replicas", "run"),
        )
    },
    ("flask_a2a.exchange.run_leases", "store"): (
        "the chosen store's lease terms, set once when leases start (store/leases.py reads them)"
    ),
    ("flask_a2a.exchange.streams", "child"): "a greenlet's parent: gevent's own way to re-home it",
    ("flask_a2a.auth", "g"): "Flask's request globals, the key Flask-HTTPAuth itself sets",
    ("flask_a2a.csrf", "state"): "the app's A2AState flag, set once the CSRF exemption is done",
    ("flask_a2a.extension", "registry"): "the app's agent registry: its one role guard is set",
    ("flask_a2a.entities.crud", "response"): "a Flask response's status, as a view sets it",
    ("flask_a2a.bindings.grpc_messages", "target"): "a protobuf message filled in place",
    ("flask_a2a.push.ssrf", "session"): "the requests Session being cloned, before first use",
    ("flask_a2a.push.ssrf", "exc"): "urllib3's exception carries its connection, as urllib3 does",
    ("flask_a2a.push.ssrf", "self.poolmanager"): "requests' pool manager, told our pool classes",
    ("flask_a2a.push.jwks", "self.poolmanager"): "requests' pool manager, told our pool classes",
    ("flask_a2a.push.jwks", "manager"): "requests' pool manager, told our pool classes",
    ("flask_a2a.store.processes", "setting"): "a gunicorn server hook chained in, as its docs say",
    ("flask_a2a.store.sql_waits", "dbapi_connection"): "PyMySQL's socket timeouts, per checkout",
    ("flask_a2a.store.sql_waits", "connection"): "a PyMySQL connection just opened: its waits",
}


def _made_here(scope: ast.AST) -> set[str]:
    """What ``scope`` (a function, or the module's own statements) binds to a new object: a
    class called (``run = Run(...)``, ``self._timer = threading.Timer(...)``)."""
    made: set[str] = set()
    nodes = ast.walk(scope) if not isinstance(scope, ast.Module) else iter(scope.body)
    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            called = ast.unparse(node.value.func).rpartition(".")[2]
            if called[:1].isupper():
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                made.update(ast.unparse(target) for target in targets)
    return made


def _own_attributes(tree: ast.Module) -> set[str]:
    """The attributes the module's own classes declare (class body, ``self.x = ...``)."""
    names: set[str] = set()
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.Assign):
                names.update(tg.id for tg in node.targets if isinstance(tg, ast.Name))
                if any(isinstance(tg, ast.Name) and tg.id == "__slots__" for tg in node.targets):
                    if isinstance(node.value, (ast.Tuple, ast.List)):
                        names.update(
                            str(e.value) for e in node.value.elts if isinstance(e, ast.Constant)
                        )
        for each in ast.walk(cls):
            if isinstance(each, (ast.Assign, ast.AnnAssign)):
                for tg in each.targets if isinstance(each, ast.Assign) else [each.target]:
                    if isinstance(tg, ast.Attribute) and ast.unparse(tg.value) == "self":
                        names.add(tg.attr)
    return names


def foreign_assignments(name: str) -> list[tuple[int, str]]:
    """``(line, object)`` of each assignment in module ``name`` to an attribute of an object it
    neither is (``self``, ``cls``) nor made in the same function, of a class not its own."""
    tree = ast.parse(MODULES[name].read_text())
    own = _own_attributes(tree)
    found: list[tuple[int, str]] = []

    def visit(scope: ast.AST, made: set[str]) -> None:
        for node in ast.iter_child_nodes(scope):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node, made | _made_here(node))
                continue
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for each in target.elts if isinstance(target, ast.Tuple) else [target]:
                        if not isinstance(each, ast.Attribute):
                            continue
                        owner = ast.unparse(each.value)
                        if owner in ("self", "cls") or owner in made or each.attr in own:
                            continue
                        found.append((node.lineno, owner))
            visit(node, made)

    visit(tree, _made_here(tree))
    return found


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_assigns_to_another_modules_object(name: str) -> None:
    """The exchange is built once from its constructor's arguments (docs/architecture.md, "How
    the exchange and a run are built"): no module finishes it, or any object it did not make,
    by setting its attributes afterwards, but for the allow-listed cases."""
    foreign = [
        f"line {line}: {owner}.<attr> = ..."
        for line, owner in foreign_assignments(name)
        if (name, owner) not in FOREIGN_ASSIGNMENTS
    ]
    assert not foreign, f"{name} assigns to objects it did not make: {foreign}"


def test_every_allowed_foreign_assignment_is_still_there() -> None:
    """The allow-list holds only what is still needed."""
    seen = {(name, owner) for name in MODULES for _, owner in foreign_assignments(name)}
    assert set(FOREIGN_ASSIGNMENTS) <= seen, set(FOREIGN_ASSIGNMENTS) - seen
