"""The ``flask.commands`` entry point: ``flask a2a`` that loads the library only when it runs.

Flask loads every plugin's entry point for every ``flask`` command, so anything that fails on
import here would take down ``flask db upgrade``, ``flask run`` and the app's own commands with
our traceback. This module imports click alone; ``flask a2a …`` imports the real commands
(``cli.py``) when it is invoked, and a library that cannot load is one line on stderr.
"""

from __future__ import annotations

import typing as t

import click

#: What ``flask --help`` shows beside ``a2a`` (the real group's own help, unloaded).
HELP: t.Final = "Inspect and maintain the A2A task exchange; call A2A agents."


def load_commands() -> click.Command:
    """The real ``flask a2a`` group, or a ClickException saying in one line what is missing."""
    try:
        from .versions import too_old

        lines = too_old()
        if lines:
            raise click.ClickException("; ".join(lines))
        from .cli import a2a_cli
    except ImportError as exc:
        raise click.ClickException(
            f"flask a2a cannot load flask_a2a: {type(exc).__name__}: {exc}"
        ) from None
    return a2a_cli


class LazyA2ACommands(click.Command):
    """Takes every argument as it comes and hands them to the real group when invoked."""

    def __init__(self) -> None:
        super().__init__(
            "a2a",
            help=HELP,
            short_help=HELP,
            add_help_option=False,
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        )

    def invoke(self, ctx: click.Context) -> t.Any:
        commands = load_commands()
        with commands.make_context(ctx.info_name, list(ctx.args), parent=ctx.parent) as real:
            return commands.invoke(real)


a2a_cli = LazyA2ACommands()
