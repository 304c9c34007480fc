"""What a handler hands over, made Parts: ``artifact()``'s argument and a handler's return value,
each refused with the fix when it is not something a Part can hold."""

from __future__ import annotations

import typing as t

from ..protocol.errors import HandlerUsageError
from ..protocol.model import Part


def _part_for(value: object) -> str:
    """The Part that holds ``value``, as the fix a refusal names."""
    if isinstance(value, str):
        return "Part(text=...)"
    if isinstance(value, bytes):
        return "Part(raw=...)"
    return "Part(data={...})" if isinstance(value, dict) else "Part(data=...)"


def artifact_parts(parts: Part | t.Iterable[Part] | None) -> tuple[Part, ...]:
    """``artifact()``'s parts: a Part or an iterable of Parts. A dict or a str would iterate
    into its keys or characters, so anything else is refused naming what it got and the fix."""
    if parts is None:
        return ()
    if isinstance(parts, Part):
        return (parts,)
    if type(parts) is list or type(parts) is tuple:  # the usual shape: no ABC check
        pass
    elif isinstance(parts, (str, bytes, dict)) or not isinstance(parts, t.Iterable):
        raise HandlerUsageError(
            f"artifact() takes a list of flask_a2a.Part, got {type(parts).__name__}: "
            f"use task.artifact([{_part_for(parts)}])"
        )
    chunk = tuple(parts)
    for i, part in enumerate(chunk):
        if not isinstance(part, Part):
            raise HandlerUsageError(
                f"artifact() takes a list of flask_a2a.Part, item {i} is a "
                f"{type(part).__name__}: wrap it as {_part_for(part)}"
            )
    return chunk


def returned_parts(value: object) -> tuple[Part, ...]:
    """The parts a handler's return value stands for, the way a Flask view's return value is
    its response: a str is a text part, bytes a raw part, a dict or a list holding no Part one
    data part, a Part or a list of Parts those parts."""
    if isinstance(value, Part):
        return (value,)
    if isinstance(value, str):
        return (Part(text=value),)
    if isinstance(value, bytes):
        return (Part(raw=value),)
    if isinstance(value, dict):
        return (Part(data=value),)
    if isinstance(value, (list, tuple)):
        parts = tuple(item for item in value if isinstance(item, Part))
        if parts and len(parts) == len(value):
            return parts
        if not parts and isinstance(value, list):
            return (Part(data=value),)
    kind = type(value).__name__
    if isinstance(value, (list, tuple)) and any(isinstance(item, Part) for item in value):
        kind = f"a {kind} mixing Part and other values"
    raise HandlerUsageError(
        f"the handler returned {kind}: return None, a str, bytes, a dict, a list of JSON "
        "values, a flask_a2a.Part or a list of Parts (or call task.artifact())"
    )
