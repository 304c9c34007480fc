"""``flask a2a call``: call any A2A agent with the client, from the shell. A client command: it
needs no app (``cli.py`` adds it to the ``flask a2a`` group)."""

from __future__ import annotations

import json
import time
import typing as t

import click
import requests

from .client.a2a_client import A2AClient, A2AClientError
from .protocol import wire
from .protocol.errors import A2AError
from .protocol.model import (
    UNSET,
    Message,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)

#: The states ``flask a2a call`` exits 1 on.
FAILED_STATES: t.Final = frozenset({TaskState.FAILED, TaskState.REJECTED, TaskState.CANCELED})


def short_state(state: TaskState) -> str:
    """``COMPLETED`` for ``TASK_STATE_COMPLETED``: the CLI's tables and lines."""
    return state.value.removeprefix("TASK_STATE_")


def _json_option(value: str | None, name: str) -> t.Any:
    if value is None:
        return UNSET
    try:
        return json.loads(value)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=name) from None


def render_part(part: Part) -> str:
    if part.text is not None:
        return part.text
    if part.url is not None:
        return part.url
    if part.raw is not None:
        return f"<{len(part.raw)} bytes{' ' + part.filename if part.filename else ''}>"
    return json.dumps(part.data, ensure_ascii=False)


def _status_text(message: Message | None) -> str:
    return message.text if message is not None else ""


def describe_event(event: Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> str:
    """One progress line for a stream event."""
    if isinstance(event, Task):
        line = f"{short_state(event.status.state)}  task {event.id}"
        return f"{line}  {_status_text(event.status.message)}".rstrip()
    if isinstance(event, TaskStatusUpdateEvent):
        return f"{short_state(event.status.state)}  {_status_text(event.status.message)}".rstrip()
    if isinstance(event, TaskArtifactUpdateEvent):
        name = event.artifact.name or event.artifact.artifact_id
        body = " ".join(render_part(p) for p in event.artifact.parts)
        return f"artifact {name}{' (+)' if event.append else ''}: {body}"
    return f"message: {event.text}"


def describe_task(task: Task) -> str:
    lines = [f"task {task.id}: {short_state(task.status.state)}"]
    if task.status.message is not None:
        lines.append(f"  agent: {task.status.message.text}")
    for artifact in task.artifacts:
        lines.append(f"  artifact {artifact.name or artifact.artifact_id}:")
        lines.extend(f"    {render_part(part)}" for part in artifact.parts)
    return "\n".join(lines)


@click.command("call")
@click.argument("url")
@click.argument("skill")
@click.option("--text", help="A text part.")
@click.option("--data", help="A data part, as JSON.")
@click.option("--operation", help="An entity skill's operation (list, get, create, …).")
@click.option("--arguments", help="The operation's arguments, as a JSON object.")
@click.option("--token", envvar="A2A_TOKEN", help="Bearer token (or $A2A_TOKEN).")
@click.option("--task-id", help="Continue this paused task.")
@click.option("--stream", is_flag=True, help="Stream the task, one line per event.")
@click.option("--json", "as_json", is_flag=True, help="Print ProtoJSON instead of text.")
@click.option(
    "--timeout",
    type=float,
    default=330.0,
    show_default=True,
    help="Seconds to wait for an answer (between events when streaming).",
)
@click.option(
    "--binding",
    help="JSONRPC, HTTP+JSON (also 'rest') or GRPC (the grpc extra; URL is then host:port "
    "or the card's URL); default: what the agent card lists first, or lists at URL.",
)
def call_command(
    url: str,
    skill: str,
    text: str | None,
    data: str | None,
    operation: str | None,
    arguments: str | None,
    token: str | None,
    task_id: str | None,
    stream: bool,
    as_json: bool,
    timeout: float,
    binding: str | None,
) -> None:
    """Call SKILL on the A2A agent at URL (a base URL, its card's URL, or the endpoint; a gRPC
    endpoint is host:port)."""
    data_value = _json_option(data, "--data")
    args = _json_option(arguments, "--arguments")
    if args is not UNSET and not isinstance(args, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--arguments")
    options: dict[str, t.Any] = {
        "data": data_value,
        "operation": operation,
        "arguments": None if args is UNSET else args,
        "task_id": task_id,
    }
    try:
        with A2AClient.connect(
            url,
            token=token,
            send_timeout=(5.0, timeout),
            stream_timeout=(5.0, timeout),
            binding=binding,
        ) as client:
            if stream:
                state = _stream(client, skill, text, options, as_json)
            else:
                task = client.call(skill, text, **options)
                click.echo(json.dumps(wire.dump_task(task)) if as_json else describe_task(task))
                state = task.status.state
    except A2AError as exc:
        raise click.ClickException(f"{type(exc).__name__} ({exc.code}): {exc.message}") from exc
    except (A2AClientError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    except requests.RequestException as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc
    if state in FAILED_STATES:
        raise click.exceptions.Exit(1)


def _stream(
    client: A2AClient, skill: str, text: str | None, options: dict[str, t.Any], as_json: bool
) -> TaskState | None:
    """Print one line per event while the task runs; returns the last state seen."""
    started = time.monotonic()
    with client.stream_call(skill, text, **options) as events:
        for event in events:
            if as_json:
                click.echo(json.dumps(wire.dump_event(event)))
            else:
                click.echo(f"{time.monotonic() - started:7.2f}s  {describe_event(event)}")
        return events.state
