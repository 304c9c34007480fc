"""``flask a2a …``: look at and look after an app's task exchange, and call any A2A agent.

Registered through the ``flask.commands`` entry point, so every app with the extension gets it:
``flask --app examples/agent.py a2a skills``. The commands that read the exchange (``card``,
``skills``, ``tasks``, ``export-user``, ``erase-user``, ``trim``, ``rotate-push-secrets``,
``push-worker``, ``push-status``) run in the app's context and go through its store; ``grpc``
(``cli_grpc.py``) serves the agent over gRPC; ``call`` (``cli_call.py``) is a client and needs no
app.
"""

from __future__ import annotations

import dataclasses
import json
import time
import typing as t

import click
from flask import current_app
from flask.cli import AppGroup

from .agents import agent_of, agents
from .cli_call import call_command, short_state
from .cli_grpc import grpc_command
from .extension import A2A
from .protocol import wire
from .protocol.model import (
    Tier,
)
from .push.secrets import ROTATE_BATCH, rotate_sql_store
from .push.webhooks import PushSender
from .state import A2AState
from .store.base import ListQuery, TaskRecord, holds_nothing_at_rest, offers, optional
from .store.choice import chosen_store, process_local

#: Public (docs/api.md, "Where names live"); the rest of this module is private.
__all__ = ["a2a_cli"]


def _select_agent(agent: str | None) -> None:
    """``flask a2a --agent NAME ...``: the agent the command reads (apps with several)."""
    click.get_current_context().meta[_AGENT_KEY] = agent


_AGENT_KEY: t.Final = "flask_a2a.agent"
a2a_cli = AppGroup(
    "a2a",
    help="Inspect and maintain the A2A task exchange; call A2A agents.",
    params=[
        click.Option(
            ["--agent"],
            metavar="NAME",
            help=(
                "The agent to act on, when the app serves several (A2A(name=...)); default: the "
                "first registered."
            ),
        )
    ],
    callback=_select_agent,
)

#: Tasks read per store page when walking an owner (the walk ends when the store's pages do).
WALK_PAGE: t.Final = 500


def _state() -> A2AState:
    state = current_app.extensions.get("a2a")
    if state is None:
        raise click.ClickException(f"A2A is not registered on the app {current_app.name!r}")
    registry = agents(current_app)
    name = click.get_current_context().meta.get(_AGENT_KEY)
    if name is not None:
        try:
            return registry.get(name)
        except KeyError as exc:
            raise click.ClickException(str(exc.args[0])) from None
    if registry.several():
        click.echo(
            f"agent {state.name!r} (this app serves {', '.join(registry.states)}; "
            "choose with flask a2a --agent NAME)",
            err=True,
        )
    return t.cast(A2AState, state)


def _table(rows: t.Sequence[t.Sequence[str]]) -> str:
    """Rows as left-aligned columns; the first row is the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows
    )


# ------------------------------------------------------------------ reading the exchange


@a2a_cli.command("card")
@click.option(
    "--base-url",
    metavar="URL",
    help="The public base URL the card's URLs start with (e.g. https://example.com).",
)
def card_command(base_url: str | None) -> None:
    """Print the public agent card (JSON), as the app serves it.

    Outside a request the card's URLs come from A2A_PUBLIC_BASE_URL, else --base-url, else
    Flask's SERVER_NAME and PREFERRED_URL_SCHEME; with none of them they say
    http://localhost, and a note on stderr says so.
    """
    state = _state()
    config = current_app.config
    if base_url is not None and "://" not in base_url:
        raise click.BadParameter(
            "a URL with its scheme: https://example.com", param_hint="--base-url"
        )
    if not (base_url or state.settings.public_base_url or config.get("SERVER_NAME")):
        click.echo(
            "note: neither A2A_PUBLIC_BASE_URL, SERVER_NAME nor --base-url is set: the card's "
            "URLs below say http://localhost",
            err=True,
        )
    response = current_app.test_client().get(state.card_path, base_url=base_url)
    if response.status_code != 200:
        raise click.ClickException(f"the card route answered HTTP {response.status_code}")
    click.echo(json.dumps(response.get_json(), indent=2, ensure_ascii=False))


@a2a_cli.command("skills")
def skills_command() -> None:
    """List the skills the exchange serves: id, name, input and output modes."""
    state = _state()
    rows = [("ID", "NAME", "INPUT", "OUTPUT", "CARD")]
    for skill in state.exchange.skills.values():
        rows.append(
            (
                skill.id,
                skill.name,
                ", ".join(skill.input_modes or state.card.default_input_modes),
                ", ".join(skill.output_modes or state.card.default_output_modes),
                "listed" if skill.public else "unlisted",
            )
        )
    click.echo(_table(rows))


def owner_records(state: A2AState, owner: str) -> list[TaskRecord]:
    """Every task of ``owner``, across tenants and scope sets, newest status first."""
    records: list[TaskRecord] = []
    cursor = None
    query = ListQuery(owner=owner, tenanted=False, scoped=False, limit=WALK_PAGE)
    while True:
        page = state.exchange.store.list_tasks(dataclasses.replace(query, cursor=cursor))
        records.extend(
            r
            for r in page.records
            if r.owner == owner
            and (not agents(current_app).several() or agent_of(r.tenant) == state.name)
        )
        if page.next_cursor is None or not page.records:
            return records
        cursor = page.next_cursor


def owner_of(state: A2AState, name: str) -> str:
    """The owner id an operator means by NAME: the host's ``owner_lookup(name)`` when it knows
    NAME (``A2A(owner_lookup=...)``), else NAME itself (owners are what the principal hook
    returns: often a user id, not a user name)."""
    lookup = state.owner_lookup
    if lookup is None:
        return name
    found = lookup(name)
    if found is None or found == "" or isinstance(found, bool):
        return name
    owner = str(found)
    if owner != name:
        click.echo(f"{name} is owner {owner}", err=True)
    return owner


def _shared_store(state: A2AState, command: str) -> None:
    """Refuse to act on a store that lives in the server's process (the memory store): in
    this command's own process it is a new, empty one, and "no tasks" would be a lie. A store
    of this process that holds tasks is served from here (one process, a test) and is used."""
    store = state.store()
    what = process_local(store)
    if what is None:
        return
    lister = getattr(store, "owners", None)
    if lister is not None and lister():
        return
    handle = state.store_handle
    if handle is not None and handle.given:
        fix = (
            f"you passed store={type(store).__name__}() to A2A: leave store= out to use "
            "A2A_DATABASE_URL or the app's Flask-SQLAlchemy database"
        )
    else:
        fix = "use a SQL store (A2A_DATABASE_URL, or Flask-SQLAlchemy on the app)"
    raise click.ClickException(
        f"flask a2a {command}: {what} keeps tasks inside the server process that made them, "
        "and this command runs in a process of its own, which holds none of them; to manage "
        f"tasks from the command line, {fix}"
    )


def _nothing_for(state: A2AState, name: str, owner: str, what: str) -> str:
    """The line for an owner with nothing stored, saying what an owner is when that may be why."""
    line = f"{what} for {owner}"
    if state.owner_lookup is None:
        return (
            f"{line} (owners are the ids your principal hook returns, such as a user id, "
            "not user names; A2A(owner_lookup=...) lets this command take a name)"
        )
    if owner == name:
        return f"{line} (the owner lookup knows no user {name!r})"
    return line


@a2a_cli.command("tasks")
@click.argument("owner")
def tasks_command(owner: str) -> None:
    """List OWNER's tasks in every tier: id, state, skill, status time, tenant, scopes.

    OWNER is an owner id, or a user name the app's ``owner_lookup`` turns into one.
    """
    state = _state()
    _shared_store(state, "tasks")
    name, owner = owner, owner_of(state, owner)
    records = owner_records(state, owner)
    if not records:
        click.echo(_nothing_for(state, name, owner, "no tasks"))
        return
    rows = [("ID", "STATE", "SKILL", "UPDATED", "TENANT", "SCOPES")]
    for record in records:
        rows.append(
            (
                record.task.id,
                short_state(record.state),
                record.skill or "-",
                wire.format_timestamp(record.task.status.timestamp),
                record.tenant or "-",
                " ".join(record.scopes) if record.scopes is not None else "session",
            )
        )
    click.echo(_table(rows))
    click.echo(f"{len(records)} task(s)")


# ------------------------------------------------------------------ user data


def _extension() -> A2A:
    """``export_user_data`` / ``erase_user_data`` read only the app's state, so an unbound
    extension object serves any app."""
    return A2A()


@a2a_cli.command("export-user")
@click.argument("owner")
def export_user_command(owner: str) -> None:
    """Print every task and push config of OWNER as JSON (data export); OWNER as for
    ``tasks``."""
    state = _state()
    _shared_store(state, "export-user")
    owner = owner_of(state, owner)
    data = _extension().export_user_data(owner, app=current_app)
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


@a2a_cli.command("erase-user")
@click.argument("owner")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def erase_user_command(owner: str, yes: bool) -> None:
    """Delete every task and push config of OWNER (as for ``tasks``); their live runs are cut."""
    state = _state()
    _shared_store(state, "erase-user")
    name, owner = owner, owner_of(state, owner)
    held = _extension().export_user_data(owner, app=current_app)
    task_ids = [row["task"]["id"] for row in held.get("tasks", ())]
    configs = len(held.get("pushConfigs", ()))
    if not task_ids and not configs:
        click.echo(_nothing_for(state, name, owner, "nothing stored"))
        return
    if not yes:
        click.confirm(
            f"Erase {len(task_ids)} task(s) and {configs} push config(s) of {owner}?",
            abort=True,
        )
    removed = _extension().erase_user_data(owner, app=current_app)
    for task_id in task_ids:
        click.echo(f"deleted task {task_id}")
    click.echo(
        f"erased {owner}: {len(task_ids)} task(s), {configs} push config(s) ({removed} rows)"
    )


# ------------------------------------------------------------------ retention


@a2a_cli.command("trim")
@click.argument("owners", nargs=-1)
def trim_command(owners: tuple[str, ...]) -> None:
    """Run retention now over every tier of OWNERS (all owners, when the store lists them);
    each OWNER as for ``tasks``.

    Each tier keeps A2A_TERMINAL_TASK_RETENTION settled tasks and A2A_PAUSED_TASK_RETENTION
    paused ones, exactly as after a settle in it: useful after lowering either bound.
    """
    state = _state()
    _shared_store(state, "trim")
    exchange, settings = state.exchange, state.settings
    if not owners:
        store = exchange.store
        lister = optional(store).owners if offers(store, "owners") else None
        if lister is None:
            raise click.UsageError(
                "this store cannot list its owners; name them: flask a2a trim OWNER..."
            )
        owners = tuple(lister())
    else:
        owners = tuple(owner_of(state, owner) for owner in owners)
    if settings.terminal_task_retention < 0 and settings.paused_task_retention < 0:
        click.echo("retention is off (both retention bounds are negative): nothing to do")
        return
    deleted = canceled = 0
    for owner in owners:
        before = _tiers(owner_records(state, owner))
        for records in before.values():
            # Through the exchange's own trimming, so runs and streams of deleted tasks end.
            exchange.trim_tier(records[0])
        after = _tiers(owner_records(state, owner))
        for tier, records in before.items():
            left = after.get(tier, [])
            gone = len(records) - len(left)
            stopped = _paused(records) - _paused(left)
            deleted, canceled = deleted + gone, canceled + stopped
            click.echo(
                f"{owner}  tenant={tier.tenant or '-'}  scopes="
                f"{' '.join(tier.scopes) if tier.scopes is not None else 'session'}  "
                f"kept {len(left)}, deleted {gone}, canceled {stopped} paused"
            )
    click.echo(f"trimmed {len(owners)} owner(s): {deleted} task(s) deleted, {canceled} canceled")


def _tiers(records: list[TaskRecord]) -> dict[Tier, list[TaskRecord]]:
    tiers: dict[Tier, list[TaskRecord]] = {}
    for record in records:
        tiers.setdefault(record.tier, []).append(record)
    return tiers


def _paused(records: list[TaskRecord]) -> int:
    return sum(1 for r in records if r.state.interrupted)


# ------------------------------------------------------------------ push secrets


@a2a_cli.command("rotate-push-secrets")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=ROTATE_BATCH,
    show_default=True,
    help="Configs read and rewritten per step.",
)
def rotate_push_secrets_command(batch_size: int) -> None:
    """Re-seal every stored push token and credential under the newest A2A_PUSH_SECRET_KEY.

    Values sealed under an older key, and plaintext stored before a key was set, are rewritten;
    values already under the newest key are left alone, so running it again changes nothing.
    Exits 1 when some config opens with no configured key.
    """
    from .store.sql import SQLStore

    state = _state()
    store = chosen_store(state.exchange.store)
    if holds_nothing_at_rest(store):
        click.echo("the memory store keeps push secrets in process memory only: nothing to rotate")
        return
    if state.push_secrets is None or not state.push_secrets.sealing:
        raise click.UsageError("A2A_PUSH_SECRET_KEY is not set: there is no key to rotate to")
    if not isinstance(store, SQLStore):
        raise click.UsageError(f"{type(store).__name__} cannot be walked by this command")
    report = rotate_sql_store(store, state.push_secrets, batch_size)
    moved = f", {report.moved} changed meanwhile (left as written)" if report.moved else ""
    click.echo(
        f"rotated {report.rotated} push config(s); {report.current} already under the newest "
        f"key, {report.unreadable} unreadable{moved}"
    )
    if report.unreadable:
        click.echo(
            f"{report.unreadable} config(s) open with no configured key: configure the key "
            "that sealed them, or delete them",
            err=True,
        )
        raise click.exceptions.Exit(1)


# ------------------------------------------------------------------ push delivery (queue)


def _push_queue() -> t.Any:
    """The app's push queue (push/queue.py), or a usage error naming the setting."""
    push = _state().exchange.push
    queue = push.queue if isinstance(push, PushSender) else None
    if queue is None:
        raise click.UsageError("A2A_PUSH_QUEUE is not set: push notifications go in process")
    return queue


@a2a_cli.command("push-worker")
@click.option("--burst", is_flag=True, help="Exit once the queue is empty.")
def push_worker_command(burst: bool) -> None:
    """Deliver queued push notifications (A2A_PUSH_QUEUE): an RQ worker in the app's context,
    with RQ's scheduler for the retries it schedules. Run as many as you need."""
    queue = _push_queue()
    click.echo(f"push worker on queue {queue.name}")
    queue.worker().work(burst=burst, with_scheduler=True)


@a2a_cli.command("push-status")
@click.argument("task_id")
@click.option("--owner", help="Answer only if the task is OWNER's (as an unknown task if not).")
def push_status_command(task_id: str, owner: str | None) -> None:
    """How TASK's push notifications fared through the queue: per config, sent, retried,
    given up, dropped, paused, and the last outcome."""
    from .push.queue import KEY_TTL

    state = _state()
    queue = _push_queue()
    record = state.exchange.store.get_task(task_id)
    if record is None or (owner is not None and record.owner != owner):
        raise click.ClickException(f"no task {task_id}" + (f" for {owner}" if owner else ""))
    click.echo(f"task {task_id}  owner {record.owner}  {short_state(record.state)}")
    found = queue.status(task_id)
    configs = {c.id: c.url for c in state.exchange.store.list_push_configs(task_id)}
    if not found and not configs:
        click.echo("no push configs and no queued deliveries")
        return
    rows = [("CONFIG", "URL", "SENT", "RETRIED", "GIVEN UP", "DROPPED", "STATE", "LAST")]
    for config_id in [*configs, *(c for c in found if c not in configs)]:
        entry = found.get(config_id, {})
        last = entry.get("last") or {}
        url = configs.get(config_id) or last.get("url", "?")
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(last["at"])) if last else "-"
        said = f"{when} {last.get('outcome', '')} {last.get('detail', '')}".strip()
        paused = entry.get("paused", 0.0)
        rows.append(
            (
                config_id,
                url,
                str(entry.get("sent", 0)),
                str(entry.get("retried", 0)),
                str(entry.get("given_up", 0)),
                str(entry.get("dropped", 0)),
                f"paused {paused:.0f}s" if paused else ("-" if not entry else "active"),
                said,
            )
        )
    click.echo(_table(rows))
    click.echo(f"(counts kept {KEY_TTL // 86400} days after the last delivery)")


a2a_cli.add_command(call_command)
a2a_cli.add_command(grpc_command)
