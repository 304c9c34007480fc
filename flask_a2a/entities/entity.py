"""An entity: one resource of the host app, its marshmallow schema (the host's own marshmallow,
2, 3 or 4: :mod:`.host_schema`) and the app's routes for it.

:class:`Entity` checks its declaration once, when it is made (names, operations, routes,
arguments); :mod:`.tools` turns it into one tool per operation, :mod:`.registry` serves them.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import typing as t

from marshmallow import Schema

from ..config import ConfigError, ConfigTypeError
from ..exchange.reentry import ReentryHook
from ..protocol.model import Principal
from .operations import Argument, Operation

if t.TYPE_CHECKING:
    pass

log = logging.getLogger("flask_a2a")

#: The five operations an entity may offer, in the order descriptions list them.
OPERATIONS: t.Final = ("list", "get", "create", "update", "delete")
#: Operation -> (HTTP method, path under the entity's URL); ``{id}`` is the record id.
DEFAULT_ROUTES: t.Final[dict[str, tuple[str, str]]] = {
    "list": ("GET", ""),
    "get": ("GET", "/{id}"),
    "create": ("POST", ""),
    "update": ("PATCH", "/{id}"),
    "delete": ("DELETE", "/{id}"),
}
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
#: ``gate(principal_or_None, entity, operation) -> bool``: may this caller use this tool?
EntityGate = t.Callable[["Principal | None", "Entity", str], bool]


@dataclasses.dataclass(frozen=True, eq=False)
class Entity:
    """A resource of the host app, offered to agents as the skill ``entity.<name>``.

    :param name: the resource name (``invoices``); artifacts are named ``<name>.<operation>``.
    :param schema: the marshmallow schema (instance or class) of one record.
    :param url: where the app serves the conventional routes (default ``/api/<name>``).
    :param operations: the operations offered: names from :data:`OPERATIONS`, and
        :class:`~flask_a2a.entities.operations.Operation` objects (an operation of the app's
        own name and route, or a standard one with its route and arguments declared).
    :param routes: per-operation ``(method, path)`` overrides; ``{id}`` in a path is the id,
        any other ``{param}`` must be declared in ``arguments`` (else startup fails).
    :param namespace: groups the skill as ``entity.<namespace>.<name>``.
    :param public: listed on the public agent card (a non-public entity is served, unlisted).
    :param arguments: per-operation argument keys the app's route really takes (a hand-written
        route that ignores ``limit``, say), chosen from the keys derived from the schema, or
        :class:`~flask_a2a.entities.operations.Argument` objects (a key renamed for the route,
        ``limit`` sent as ``per_page``, or one the schema does not have); an operation left
        out takes them all, as the generated CRUD blueprint does. The description, the tool
        schema and the argument check follow it.
    :param description: the skill description's lead line, instead of the generated one.
    :param title: the skill's name on the card (default ``"<Name> records"``).
    :param reentry: ``hook(reentry)``, run on each request this entity's tools re-enter the
        app with, after the agent's (``A2A(reentry=...)``): adds the headers or WSGI environ
        keys the host's own hooks need (:class:`flask_a2a.Reentry`).
    """

    name: str
    schema: Schema | type[Schema]
    url: str | None = None
    #: Given as names and :class:`Operation` objects; once made, the names (a tuple of str).
    operations: t.Sequence[t.Any] = OPERATIONS
    routes: t.Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    namespace: str | None = None
    public: bool = True
    arguments: t.Mapping[str, t.Sequence[str | Argument]] = dataclasses.field(default_factory=dict)
    description: str | None = None
    title: str | None = None
    reentry: ReentryHook | None = dataclasses.field(default=None, repr=False)
    #: The operations declared as :class:`Operation` objects, by name (set from ``operations``).
    declared_routes: t.Mapping[str, Operation] = dataclasses.field(
        init=False, default_factory=dict, repr=False
    )

    def __post_init__(self) -> None:
        for label, value in (("name", self.name), ("namespace", self.namespace)):
            if value is not None and not _NAME.match(value):
                raise ConfigError(f"Entity {label} {value!r} must match {_NAME.pattern}")
        if self.title is not None and (not isinstance(self.title, str) or not self.title.strip()):
            raise ConfigError(f"Entity {self.name!r}: title must be a non-empty string")
        if self.reentry is not None and not callable(self.reentry):
            raise ConfigTypeError(f"Entity {self.name!r}: reentry must be a function of a Reentry")
        if isinstance(self.schema, type):
            if not issubclass(self.schema, Schema):
                raise ConfigTypeError(f"Entity {self.name!r}: schema must be a marshmallow Schema")
            object.__setattr__(self, "schema", self.schema())
        elif not isinstance(self.schema, Schema):
            raise ConfigTypeError(f"Entity {self.name!r}: schema must be a marshmallow Schema")
        if isinstance(self.operations, str):
            raise ConfigTypeError(f"Entity {self.name!r}: operations must be a sequence of names")
        own = {op.name: op for op in self.operations if isinstance(op, Operation)}
        ops = tuple(op.name if isinstance(op, Operation) else op for op in self.operations)
        unknown = [op for op in ops if op not in OPERATIONS and op not in own] + [
            op for op in [*self.routes, *self.arguments] if op not in ops or op in own
        ]
        if unknown or not ops or len(set(ops)) != len(ops):
            raise ConfigError(
                f"Entity {self.name!r}: operations must be distinct names from {OPERATIONS} "
                "or Operation objects (and routes and arguments may name only the former), "
                f"got {unknown or list(ops)}"
            )
        declared: dict[str, tuple[str | Argument, ...]] = {}
        for op, keys in self.arguments.items():
            if isinstance(keys, str) or not all(isinstance(k, (str, Argument)) for k in keys):
                raise ConfigTypeError(
                    f"Entity {self.name!r}: arguments[{op!r}] must be a sequence of key "
                    "names and Argument objects"
                )
            names = [k if isinstance(k, str) else k.name for k in keys]
            if len(set(names)) != len(names):
                raise ConfigError(f"Entity {self.name!r}: arguments[{op!r}] repeats a key")
            declared[op] = tuple(keys)
        object.__setattr__(self, "arguments", declared)
        object.__setattr__(self, "declared_routes", own)
        object.__setattr__(
            self,
            "operations",
            tuple(
                [op for op in OPERATIONS if op in ops and op not in own]
                + [op for op in ops if op in own]
            ),
        )
        object.__setattr__(self, "url", (self.url or f"/api/{self.name}").rstrip("/"))
        for op, (_method, path) in self.routes.items():
            if not path.startswith("/"):
                raise ConfigError(f"Entity {self.name!r}: route {op!r} path must start with '/'")
        object.__setattr__(self, "routes", dict(self.routes))

    @property
    def skill_id(self) -> str:
        return f"entity.{self.qualified_name}"

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}.{self.name}" if self.namespace else self.name

    @property
    def record_schema(self) -> Schema:
        return t.cast(Schema, self.schema)

    def route(self, operation: str) -> tuple[str, str]:
        """The ``(method, path template)`` the app serves ``operation`` at."""
        if operation in self.declared_routes:
            own = self.declared_routes[operation]
            return own.method, own.path
        if operation in self.routes:
            method, path = self.routes[operation]
            return method.upper(), path
        method, suffix = DEFAULT_ROUTES[operation]
        return method, f"{self.url}{suffix}"
