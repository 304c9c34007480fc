"""The entity skills an app serves: one skill per :class:`~.entity.Entity`, gated per caller.

Each entity becomes one tool per operation (:mod:`.tools`) in an :class:`EntityRegistry`; the
skill description, the card's skill entry and the tool listing are all generated from the
registry, so they cannot drift apart. Running a skill routes its operation, asks the gate,
checks the arguments and re-enters the app as the caller (:mod:`.dispatch`).
"""

from __future__ import annotations

import json
import logging
import typing as t

from ..config import ConfigError
from ..exchange.reentry import Reentry, ReentryUnavailable
from ..exchange.router import Skill
from ..ops.log_fields import fields
from ..protocol.model import Part, Principal
from ..protocol.scrub import scrub
from .dispatch import AnswerTooLarge, AppDispatcher, refusal_text
from .entity import Entity, EntityGate
from .tools import ArgumentError, Tool, build_tools, describe_skill

if t.TYPE_CHECKING:
    from ..exchange.tasks import TaskContext

log = logging.getLogger("flask_a2a")

#: The refusal for a gated tool, whatever the reason: it says nothing about why.
TOOL_UNAVAILABLE: t.Final = "tool unavailable"


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


class EntityRegistry:
    """The tools of every entity of one app, and the entity skills built from them.

    :param dispatcher: re-enters the app as the caller (the agent's hook applied first).
    :param gate: ``gate(principal_or_None, entity, operation) -> bool``; every skill call runs
        it, and the public card lists only what it lets an anonymous caller (``None``) list.
    """

    def __init__(
        self,
        entities: t.Iterable[Entity],
        dispatcher: AppDispatcher,
        gate: EntityGate | None = None,
    ) -> None:
        self.entities: dict[str, Entity] = {}
        self.tools: dict[str, Tool] = {}
        for entity in entities:
            if entity.skill_id in self.entities:
                raise ConfigError(
                    f"A2A entities=: two entities share the skill id {entity.skill_id!r}"
                )
            self.entities[entity.skill_id] = entity
            for tool in build_tools(entity):
                self.tools[tool.name] = tool
        self.gate = gate
        self.dispatcher = dispatcher

    def tools_of(self, entity: Entity) -> list[Tool]:
        return [self.tools[f"{entity.qualified_name}.{op}"] for op in entity.operations]

    def allowed(self, principal: Principal | None, entity: Entity, operation: str) -> bool:
        """The gate's answer; a gate that raises refuses."""
        if self.gate is None:
            return True
        try:
            return bool(self.gate(principal, entity, operation))
        except Exception as exc:
            log.warning("a2a: entity gate failed: %s", scrub(repr(exc)))
            return False

    def listed_tools(self, principal: Principal | None = None) -> list[dict[str, t.Any]]:
        """The tools ``principal`` may list (``None``: an anonymous caller), as dicts."""
        return [
            tool.describe()
            for tool in self.tools.values()
            if self.allowed(principal, tool.entity, tool.operation)
        ]

    def skills(self) -> list[Skill]:
        """One skill per entity, described from its tools.

        A skill is listed on the public card when its entity is public and an anonymous
        caller may list at least one of its tools (a skill names its entity and fields). Like
        every skill, that is fixed when the app starts; each call still runs the gate.
        """
        return [self._skill(entity) for entity in self.entities.values()]

    def anonymous_can_list(self, entity: Entity) -> bool:
        return any(self.allowed(None, entity, op) for op in entity.operations)

    def _skill(self, entity: Entity) -> Skill:
        examples: tuple[str, ...] = ()
        if "list" in entity.operations:
            example: dict[str, t.Any] = {"skill": entity.skill_id, "operation": "list"}
            if "limit" in self.tools[f"{entity.qualified_name}.list"].keys:
                example["arguments"] = {"limit": 10}
            examples = (json.dumps(example),)
        return Skill(
            id=entity.skill_id,
            name=entity.title or f"{entity.name.replace('_', ' ').capitalize()} records",
            description=describe_skill(entity, self.tools_of(entity)),
            handler=lambda task: self.run(task, entity),
            tags=("entity", entity.name),
            examples=examples,
            input_modes=("application/json",),
            output_modes=("application/json",),
            public=entity.public and self.anonymous_can_list(entity),
        )

    def run(self, task: TaskContext, entity: Entity) -> None:
        """The entity skill handler: route the operation, gate, validate, re-enter the app."""
        operations = ", ".join(entity.operations)
        request = _entity_request(task, entity)
        operation = request.get("operation")
        if operation is None:
            task.reject(f"missing operation; operations: {operations}")
            return
        if operation not in entity.operations:
            asked = scrub(operation)[:100]
            task.reject(f'unknown operation "{asked}"; operations: {operations}')
            return
        arguments = request.get("arguments", {})
        if not isinstance(arguments, dict):
            task.reject(f"arguments must be a JSON object, not {_json_kind(arguments)}")
            return
        if not self.allowed(task.principal, entity, operation):
            task.fail(TOOL_UNAVAILABLE)
            return
        tool = self.tools[f"{entity.qualified_name}.{operation}"]
        try:
            call = tool.prepare(arguments)
        except ArgumentError as exc:
            task.fail(scrub(f"invalid arguments: {exc}")[:1000])
            return
        task.check()
        reentry = Reentry.of(task, call.method, call.path, query=call.query, json=call.body)
        try:
            answer = self.dispatcher(reentry, entity.reentry)
        except ReentryUnavailable:  # the app is gone (shutting down)
            task.fail(TOOL_UNAVAILABLE)
            return
        except AnswerTooLarge as exc:
            task.fail(f"entity request failed: {exc}")
            return
        except Exception as exc:
            log.warning(
                "a2a: entity %s %s failed: %s",
                entity.name,
                operation,
                scrub(repr(exc)),
                extra=fields(task.id, task.skill.id),
            )
            task.fail("entity request failed: status 500: Internal Server Error")
            return
        if not answer.ok:
            task.fail(f"entity request failed: {refusal_text(answer)}")
            return
        try:
            data = json.loads(answer.body) if answer.body.strip() else None
        except (ValueError, UnicodeDecodeError):
            task.fail(f"entity request failed: status {answer.status}: the answer is not JSON")
            return
        task.artifact([Part(data=data)], name=f"{entity.name}.{operation}")


def _entity_request(task: TaskContext, entity: Entity) -> dict[str, t.Any]:
    """The data part carrying this skill (or, with the skill in metadata, the first object)."""
    objects = [p.data for p in task.message.parts if isinstance(p.data, dict)]
    for data in objects:
        if data.get("skill") == entity.skill_id:
            return data
    return objects[0] if objects else {}
