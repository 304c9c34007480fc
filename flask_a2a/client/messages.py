"""The messages a client sends: a user message of text and/or data, naming its skill.

``skill_message`` also writes the data part the entity skills read (``operation``,
``arguments``); :class:`.a2a_client.A2AClient` sends what these build.
"""

from __future__ import annotations

import typing as t

from ..protocol.model import UNSET, Message, Part, Role, new_id


def build_message(
    text: str | None = None,
    *,
    data: t.Any = UNSET,
    skill: str | None = None,
    task_id: str | None = None,
    context_id: str | None = None,
    metadata: t.Mapping[str, t.Any] | None = None,
) -> Message:
    """A ROLE_USER message: a text part and/or a data part, the skill in ``metadata.skill``.

    ``data=None`` sends a JSON ``null`` data part; leave it unset to send none.
    """
    parts: list[Part] = []
    if text is not None:
        parts.append(Part(text=text))
    if data is not UNSET:
        parts.append(Part(data=data))
    meta = dict(metadata or {})
    if skill is not None:
        meta["skill"] = skill
    return Message(
        message_id=new_id(),
        role=Role.USER,
        parts=tuple(parts) or (Part(text=""),),
        context_id=context_id,
        task_id=task_id,
        metadata=meta or None,
    )


def skill_message(
    skill: str,
    text: str | None = None,
    *,
    data: t.Any = UNSET,
    operation: str | None = None,
    arguments: t.Mapping[str, t.Any] | None = None,
    task_id: str | None = None,
    context_id: str | None = None,
) -> Message:
    """The message that invokes ``skill`` by name.

    With ``operation`` (entity skills) the data part is ``{"skill", "operation",
    "arguments"}``, the contract the entity skills read; ``data`` is then not allowed.
    """
    if operation is not None:
        if data is not UNSET:
            raise ValueError("pass operation/arguments or data, not both")
        entity: dict[str, t.Any] = {"skill": skill, "operation": operation}
        if arguments is not None:
            entity["arguments"] = dict(arguments)
        data = entity
    elif arguments is not None:
        raise ValueError("arguments need an operation")
    return build_message(text, data=data, skill=skill, task_id=task_id, context_id=context_id)
