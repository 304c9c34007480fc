"""Media types checked against the skill that runs (``A2A_CHECK_MEDIA_TYPES``).

The router knows the skill, so the check is exact where the official SDK is not (it checks the
union of every skill's modes, opt-in, and never the output): a message part whose media type
the routed skill does not accept, or ``acceptedOutputModes`` sharing nothing with the skill's
output modes, is -32005 ContentTypeNotSupported before anything is written. A skill that
declares no modes accepts the card's defaults.

A part's type: its ``mediaType`` when set; else ``text/plain`` for text and
``application/json`` for data; a raw or url part without one has no known type and is not
checked. Parameters (``; charset=utf-8``) and case are ignored, and ``*`` wildcards
(``image/*``, ``*/*``) match on either side.

Modes: ``refuse`` answers -32005; ``log`` (the default) answers as before and logs one
WARNING line naming what ``refuse`` would have refused, so an app whose skills declared modes
loosely (as documentation) learns it before it turns refusal on; ``off`` checks nothing.
"""

from __future__ import annotations

import logging
import typing as t

from ..config import MEDIA_CHECKS, ConfigError
from ..ops.log_fields import fields
from ..protocol.errors import ContentTypeNotSupportedError
from ..protocol.model import UNSET, Message, Part
from ..protocol.scrub import scrub
from .router import Skill

log = logging.getLogger("flask_a2a")

#: What a skill declaring nothing accepts when no card says otherwise (``AgentCard``'s own).
DEFAULT_INPUT_MODES: t.Final = ("text/plain", "application/json")
DEFAULT_OUTPUT_MODES: t.Final = ("application/json", "text/plain")


def part_media_type(part: Part) -> str | None:
    """The media type a part carries (None: a file part that says none)."""
    if part.media_type:
        return _bare(part.media_type)
    if part.text is not None:
        return "text/plain"
    if part.data is not UNSET:
        return "application/json"
    return None


def matches(one: str, other: str) -> bool:
    """``one`` and ``other`` name a common type (``image/*`` matches ``image/png``)."""
    if one == other:  # the usual case (text/plain against text/plain): nothing to parse
        return True
    a_type, _, a_sub = _bare(one).partition("/")
    b_type, _, b_sub = _bare(other).partition("/")
    return (a_type == b_type or "*" in (a_type, b_type)) and (
        a_sub == b_sub or "*" in (a_sub, b_sub)
    )


def _bare(media_type: str) -> str:
    return media_type.split(";", 1)[0].strip().lower()


class MediaCheck:
    """Checks a message (and the modes its sender accepts) against a skill's modes."""

    def __init__(
        self,
        mode: str = "log",
        default_inputs: t.Sequence[str] = DEFAULT_INPUT_MODES,
        default_outputs: t.Sequence[str] = DEFAULT_OUTPUT_MODES,
    ) -> None:
        if mode not in MEDIA_CHECKS:
            raise ConfigError(f"A2A_CHECK_MEDIA_TYPES must be one of {MEDIA_CHECKS}, got {mode!r}")
        self.mode = mode
        self.default_inputs = tuple(default_inputs)
        self.default_outputs = tuple(default_outputs)

    def check(self, skill: Skill, message: Message, accepted_outputs: t.Sequence[str]) -> None:
        """Raise -32005 (``refuse``) or log (``log``) what ``skill`` cannot take or give."""
        if self.mode == "off":
            return
        problem = self.problem(skill, message, accepted_outputs)
        if problem is None:
            return
        if self.mode == "refuse":
            raise ContentTypeNotSupportedError(
                f"Incompatible content types: {problem}", metadata={"skill": skill.id}
            )
        log.warning(
            "a2a: A2A_CHECK_MEDIA_TYPES=refuse would refuse this message (-32005): %s",
            problem,
            extra=fields(message.task_id, skill.id),
        )

    def problem(
        self, skill: Skill, message: Message, accepted_outputs: t.Sequence[str]
    ) -> str | None:
        """What ``skill`` cannot take or give, as the refusal says it; None when nothing."""
        inputs = skill.input_modes or self.default_inputs
        for index, part in enumerate(message.parts):
            kind = part_media_type(part)
            if (
                kind is not None
                and kind not in inputs  # named as it is: nothing to parse
                and not any(matches(kind, mode) for mode in inputs)
            ):
                return (
                    f"message.parts[{index}] is {scrub(kind)[:100]}; skill {skill.id!r} "
                    f"accepts {', '.join(inputs)}"
                )
        outputs = skill.output_modes or self.default_outputs
        if accepted_outputs and not any(
            matches(wanted, mode) for wanted in accepted_outputs for mode in outputs
        ):
            return (
                f"configuration.acceptedOutputModes shares nothing with the output modes of "
                f"skill {skill.id!r} ({', '.join(outputs)})"
            )
        return None
