"""The ``extra`` fields every log line of the library carries where there is a task.

``log.error("...", extra=fields(task_id, skill))`` puts ``a2a_task_id`` and ``a2a_skill`` on
the log record, where a JSON formatter (python-json-logger, structlog's stdlib bridge) picks
them up as fields of their own. Ids only: never a message body, a credential or a token.
"""

from __future__ import annotations

import typing as t

TASK_ID: t.Final = "a2a_task_id"
SKILL: t.Final = "a2a_skill"


def fields(task_id: str | None = None, skill: str | None = None) -> dict[str, str]:
    """The record's ``extra``: the task id and the skill id, each when known."""
    extra: dict[str, str] = {}
    if task_id:
        extra[TASK_ID] = task_id
    if skill:
        extra[SKILL] = skill
    return extra
