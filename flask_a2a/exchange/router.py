"""Deterministic skill routing: a skill is invoked by name, never inferred from prose.

The router reads ``message.metadata.skill``, then the first data part carrying a ``"skill"``
key, then (only when exactly one skill is registered) that skill. Only a non-empty string names
a skill: anything else there (``null``, ``""``, ``5``, ``{}``) names nothing. A named skill
never falls back to another. Anything else is rejected, naming the skill asked for and no
other: the card is where clients find the skills they can call.
"""

from __future__ import annotations

import dataclasses
import json
import typing as t

from ..config import ConfigError, ConfigTypeError
from ..protocol.model import Message
from ..protocol.scrub import scrub

if t.TYPE_CHECKING:
    from .tasks import TaskContext

#: A handler returning a value (not None) makes it the artifact (``parts.returned_parts``).
Handler = t.Callable[["TaskContext"], object]


@dataclasses.dataclass(frozen=True)
class Skill:
    """A named unit of work the agent offers.

    :param handler: ``handler(task)``; raising fails the task, returning without settling
        completes it (a returned str, dict, list, bytes or Part is its artifact).
    :param public: listed on the public agent card (entity skills may be served but unlisted).
    """

    id: str
    name: str
    description: str
    handler: Handler
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    input_modes: tuple[str, ...] = ()
    output_modes: tuple[str, ...] = ()
    public: bool = True

    def __post_init__(self) -> None:
        if not self.id or not isinstance(self.id, str):
            raise ConfigError("Skill.id must be a non-empty string")
        if not callable(self.handler):
            raise ConfigTypeError(f"Skill {self.id!r}: handler must be callable")
        for name in ("tags", "examples", "input_modes", "output_modes"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise ConfigTypeError(f"Skill {self.id!r}: {name} must be a sequence of strings")
            object.__setattr__(self, name, tuple(value))


class Route(t.NamedTuple):
    #: The skill to run, or None (the task is rejected with ``refusal``).
    skill: Skill | None
    refusal: str


def named_skill(message: Message) -> str | None:
    """The skill a message names, by the router's order; None when it names none.

    Only a non-empty string names a skill: a JSON ``null`` (ProtoJSON's unset), an empty
    string, a number or an object names nothing, so the next place is read.
    """
    metadata = message.metadata or {}
    if _is_name(metadata.get("skill")):
        return t.cast(str, metadata["skill"])
    for part in message.parts:
        if isinstance(part.data, dict) and _is_name(part.data.get("skill")):
            return t.cast(str, part.data["skill"])
    return None


def _is_name(value: object) -> bool:
    return isinstance(value, str) and value != ""


def route(message: Message, skills: t.Mapping[str, Skill]) -> Route:
    asked = named_skill(message)
    if asked is not None:
        skill = skills.get(asked)
        if skill is None:
            # Quoted and bounded: the name is the caller's text, echoed into a stored task.
            shown = json.dumps(
                asked if len(asked) <= 100 else asked[:100] + "…", ensure_ascii=False
            )
            return Route(None, f"unknown skill {scrub(shown)}")
        return Route(skill, "")
    if len(skills) == 1:
        return Route(next(iter(skills.values())), "")
    return Route(
        None,
        "no skill named: send the skill id in message.metadata.skill or in a data part "
        'carrying "skill" (the agent card lists the skills)',
    )
