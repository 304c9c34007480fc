"""What the library and its examples use from Flask and Werkzeug releases newer than the floor.

Each name here calls the stack's own where the installed release has it, and does the same
thing on the older ones, so the rest of the package (and an app on Flask 2.0) never asks which
release it runs on.
"""

from __future__ import annotations

import json
import os
import typing as t

from flask import Config


def from_prefixed_env(config: Config, prefix: str = "FLASK") -> None:
    """``Config.from_prefixed_env`` (Flask 2.1+) on every Flask the library supports.

    ``FLASK_A2A_TASK_TIMEOUT=60`` sets ``A2A_TASK_TIMEOUT`` to the JSON value 60 (a value that is
    not JSON stays text); ``FLASK_A__B=1`` sets ``config["A"]["B"]``. On Flask 2.1 and newer
    this is Flask's own method.
    """
    own = getattr(config, "from_prefixed_env", None)
    if own is not None:
        own(prefix)
        return
    head = f"{prefix}_"
    for key in sorted(os.environ):
        if not key.startswith(head):
            continue
        text = os.environ[key]
        value: t.Any
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        *parents, last = key[len(head) :].split("__")
        target: t.Any = config
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
