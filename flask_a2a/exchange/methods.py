"""The exchange: the A2A method table. Imports nothing of Flask and no binding.

Each method of :attr:`Exchange.methods` takes one :class:`~flask_a2a.exchange.calls.Call` (a
principal and params, after a binding's checks: ``bindings/jsonrpc.py``, ``bindings/rest.py``)
and returns a result or a streaming :class:`~flask_a2a.exchange.calls.Reply`; each method is
one small function here. How a message becomes a run is ``runs.py``'s; what a streaming answer
is made of, ``stream_replies.py``'s.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import time
import typing as t
from datetime import datetime

from ..config import ConfigError, Settings
from ..ops.metrics import recorder
from ..protocol import jsonrpc, schemas, wire
from ..protocol.errors import (
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from ..protocol.extensions import Activation, AgentExtension
from ..protocol.limits import MAX_TASK_ID, unstorable
from ..protocol.model import Message, Principal, TaskState
from ..protocol.params import read_send_params
from ..store.base import Store, TaskRecord, holds_nothing_at_rest
from .bus import Bus, BusEvent, BusHooks
from .calls import Call, Method, Reply
from .hooks import NO_HOOKS, HostHooks
from .media import MediaCheck
from .reentry import Caller
from .replicas import ReplicaWatch, is_shared
from .retention import Retention
from .router import Skill
from .run_leases import RunLeases, supports_leases
from .run_life import RunLife
from .run_state import Run
from .runner import Runner, RunSlots
from .runs import Runs
from .stream_replies import close_stream, stored_event, stream_reply
from .streams import Seats, off_stack
from .tasks import TaskUpdater
from .visibility import tier_query, visible_page, visible_record
from .writer import PushDelivery, TaskWriter

log = logging.getLogger("flask_a2a")


def _token(cursor: tuple[datetime, str]) -> str:
    raw = json.dumps([wire.format_timestamp(cursor[0]), cursor[1]]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _untoken(token: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        stamp, task_id = json.loads(raw)
        if not isinstance(task_id, str) or unstorable(task_id, MAX_TASK_ID) is not None:
            raise ValueError("not a task id")
        return wire.parse_timestamp(stamp), task_id
    except (ValueError, TypeError, RecursionError) as exc:
        raise InvalidParamsError(
            "Invalid parameters: pageToken: not a token this server issued",
            field_violations=[("pageToken", "not a token this server issued")],
        ) from exc


class Exchange:
    """One A2A task exchange: skills, a store, a run pool, a bus and the method table."""

    def __init__(
        self,
        settings: Settings,
        skills: t.Iterable[Skill],
        store: Store,
        runner: Runner,
        *,
        hooks: HostHooks = NO_HOOKS,
        push: PushDelivery | None = None,
        extensions: t.Iterable[AgentExtension] = (),
        bus: Bus | None = None,
        default_modes: tuple[t.Sequence[str], t.Sequence[str]] | None = None,
        slots: RunSlots | None = None,
        seats: Seats | None = None,
        close_bus: t.Callable[[], None] | None = None,
        close_store: t.Callable[[], None] | None = None,
    ) -> None:
        """Built once, from what it needs; nothing outside this module sets its fields.

        ``hooks``: where the host's code runs (``hooks.HostHooks``); ``default_modes``: the
        card's (input, output) media types, what a skill declaring none accepts
        (``A2A_CHECK_MEDIA_TYPES``; the AgentCard defaults when not given); ``slots`` and
        ``seats``: the per-owner run slots and stream seats (``fleet.limits`` counts them
        across replicas; this replica's own when not given); ``close_bus`` and
        ``close_store``: called by :meth:`shutdown` once every run has ended (agents sharing
        a bus or a store close it with the last of them: ``wiring.LastOut``); the bus's own
        ``close`` and nothing when not given."""
        self.settings = settings
        #: The card's extensions: which ones a request activates, and which it must.
        self.extensions = Activation(extensions)
        self.skills: dict[str, Skill] = {}
        for skill in skills:
            if skill.id in self.skills:
                raise ConfigError(f"A2A skills=: two skills share the id {skill.id!r}")
            self.skills[skill.id] = skill
        if not self.skills:
            raise ConfigError("an A2A exchange needs at least one skill (skills= or entities=)")
        self.store = store
        if not callable(getattr(runner, "can_run_here", None)):  # checked once, here
            raise ConfigError(
                f"runner= {type(runner).__name__} has no can_run_here(): a Runner says whether "
                "a blocking send may run its run in the request's greenlet (return False "
                "unless it offers here(); flask_a2a.exchange.runner.Runner)"
            )
        if not callable(getattr(runner, "lock", None)):
            raise ConfigError(
                f"runner= {type(runner).__name__} has no lock(): a Runner makes the re-entrant "
                "lock of each run's writes, of the kind its runs wait on (threading.RLock() "
                "for threads; flask_a2a.exchange.runner.Runner)"
            )
        self.runner = runner
        #: The in-process bus, or one shared by replicas (``redis_bus.RedisBus``).
        self.bus = bus if bus is not None else Bus()
        #: Prometheus metrics (a no-op without the prometheus extra or with A2A_METRICS off).
        self.metrics = recorder(settings.metrics, settings.agent)
        self.seats = seats or Seats(
            settings.max_stream_seats_per_owner, settings.stream_seat_overflow, self.metrics
        )
        self.extended_card = hooks.extended_card
        self.updater_context = hooks.updater_context
        #: Push delivery (``push.PushSender``) or None when push notifications are off.
        self.push = push
        self.writer = TaskWriter(
            store,
            self.bus,
            max_history=settings.max_history,
            on_final=self._after_final,
            on_event=push.deliver if push is not None else None,
            after_store=self._store_answered,
        )
        # Retention deletes settled tasks only: no other replica runs or streams them.
        self.retention = Retention(
            settings, store, self.writer, functools.partial(self.forget, local=True)
        )
        self.closing = False
        life = RunLife(
            settings,
            store,
            runner,
            self.bus,
            self.writer,
            slots=slots,
            run_context=hooks.run_context,
        )
        self.runs = Runs(
            life,
            self.writer,
            skills=self.skills,
            retention=self.retention,
            media=MediaCheck(settings.check_media_types, *(default_modes or ())),
            push=push,
            handler_principal=hooks.handler_principal,
            reenter=hooks.reenter,
        )
        self.slots = life.slots
        #: Polls a store shared with other replicas for what they wrote to our runs.
        self.replicas: ReplicaWatch | None = None
        #: Run leases in a shared store: a run whose process died is settled by the others.
        self.leases: RunLeases | None = None
        #: What a bus shared by replicas asks this exchange (agents sharing a bus: each's).
        self.bus_hooks = BusHooks(
            spawn=runner.spawn,
            running=lambda task_id: self.runs.get(task_id) is not None,
            settled_elsewhere=self._settled_elsewhere,
            snapshot=self._stored_event,
        )
        self.bus.bind(self.bus_hooks)
        self.close_bus = close_bus or self.bus.close
        #: Releases what the store holds open (the extension's: agents sharing a store release
        #: it with the last one).
        self.close_store: t.Callable[[], None] = close_store or (lambda: None)
        self.methods: dict[str, Method] = {
            "SendMessage": self.send_message,
            "SendStreamingMessage": self.send_streaming_message,
            "GetTask": self.get_task,
            "ListTasks": self.list_tasks,
            "CancelTask": self.cancel_task,
            "SubscribeToTask": self.subscribe_to_task,
            "CreateTaskPushNotificationConfig": self.create_push_config,
            "GetTaskPushNotificationConfig": self.get_push_config,
            "ListTaskPushNotificationConfigs": self.list_push_configs,
            "DeleteTaskPushNotificationConfig": self.delete_push_config,
            "GetExtendedAgentCard": self.get_extended_card,
        }
        self.store_chosen()

    def store_chosen(self, chosen: Store | None = None) -> None:
        """Watch other replicas' writes and lease runs when the store is shared and can: at
        construction, and again once a store chosen at first use is known (``store.choice``:
        ``chosen``). A store in this process's memory never hangs: its writes need no bound."""
        if chosen is not None and holds_nothing_at_rest(chosen):
            self.runs.life.writes_never_hang()
        if self.replicas is None and is_shared(self.store):
            self.replicas = ReplicaWatch(self)
            self.runs.life.watched_by(self.replicas)
        if self.leases is None and supports_leases(self.store, self.settings):
            self.lease_runs()

    def _after_final(self, record: TaskRecord) -> None:
        """A task settled: retention holds its tier to the bounds (``retention.py``)."""
        self.retention.after_final(record)

    def _store_answered(self) -> None:
        """A write was stored: settles owed while the store did not answer go now."""
        self.runs.owed.kick()

    # ------------------------------------------------------------------ reading tasks

    def visible_record(self, task_id: str, principal: Principal) -> TaskRecord:
        """The caller's task, or -32001 for unknown and foreign alike (``visibility.py``)."""
        return visible_record(self.store, task_id, principal)

    def get_task(self, call: Call) -> t.Any:
        params = schemas.read(schemas.GetTaskRequestSchema, call.params)
        record = self.visible_record(params["id"], call.principal)
        history_length = params.get("history_length")
        if history_length is None:  # the whole task: its stored encoding, when it has one
            return jsonrpc.Encoded(wire.task_json(record.task))
        return wire.dump_task(record.task, history_length=history_length)

    def list_tasks(self, call: Call) -> t.Any:
        params = schemas.read(schemas.ListTasksRequestSchema, call.params)
        principal = call.principal
        status = params.get("status")
        query = tier_query(
            principal,
            context_id=params.get("context_id") or None,
            states=frozenset({status}) if status not in (None, TaskState.UNSPECIFIED) else None,
            status_after=params.get("status_timestamp_after"),
            limit=params.get("page_size", 50),
            cursor=_untoken(params["page_token"]) if params.get("page_token") else None,
        )
        self.retention.settled(principal.owner)  # trims after answered settles are done
        page = visible_page(self.store, query, principal)
        records, total, next_cursor = page.records, page.total, page.next_cursor
        history_length = params.get("history_length")
        include_artifacts = params.get("include_artifacts", False)
        return {
            "tasks": [
                wire.dump_task(
                    r.task, history_length=history_length, include_artifacts=include_artifacts
                )
                for r in records
            ],
            "nextPageToken": _token(next_cursor) if next_cursor else "",
            "pageSize": len(records),
            "totalSize": total,
        }

    # ------------------------------------------------------------------ sending

    def _message_params(self, call: Call) -> tuple[Message, dict[str, t.Any]]:
        params = read_send_params(call.params)
        if self.closing:
            raise UnsupportedOperationError("server is shutting down; no new runs are accepted")
        config = params.get("configuration") or {}
        inline = config.get("task_push_notification_config")
        if inline is not None:  # the config's webhooks take the shape of the call's version
            config["task_push_notification_config"] = {
                **inline,
                "protocol_version": call.protocol_version,
            }
        return params["message"], config

    def live_runs(self) -> list[Run]:
        """The runs in flight in this process."""
        return self.runs.live()

    def send_message(self, call: Call) -> t.Any:
        message, config = self._message_params(call)
        record, run, _ = self.runs.start(
            message,
            call.principal,
            config,
            caller=Caller.of(call.http),
            extensions=call.extensions,
            here=True,
        )
        history_length = config.get("history_length")
        if run is not None and not config.get("return_immediately"):
            self.runs.run_here(run)  # a blocking send runs its handler in its own greenlet
            run.done.wait()
            if run.reply is not None:  # the handler answered with a message: no task remains
                return {"message": wire.dump_message(run.reply)}
            record = run.record  # every path that settles the run stores its record here
            if record.version == 0 or run.unsettled:  # its last write failed (logged): the
                raise run.refusal or InternalError()  # task does not exist, or is owed its end

        if history_length is None:  # the whole task: its stored encoding, when it has one
            return jsonrpc.Encoded(wire.task_event_json(record.task))
        return {"task": wire.dump_task(record.task, history_length=history_length)}

    # ------------------------------------------------------------------ streams

    def _stored_event(self, task_id: str, version: int = 0) -> tuple[str, int, bool] | None:
        """A replica's snapshot of a task, as a stream event (``bus.BusHooks.snapshot``)."""
        return stored_event(self.store, task_id, version)

    def _settled_elsewhere(self, task_id: str, version: int) -> None:
        """The bus says another process settled a task: if it runs here, cut it now."""
        run = self.runs.get(task_id)
        replicas = self.replicas
        if run is not None and replicas is not None and version > run.record.version:
            self.runner.spawn(lambda: replicas.check_now(run))

    def send_streaming_message(self, call: Call) -> Reply:
        return off_stack(lambda: self._send_streaming(call), close_stream)

    def _send_streaming(self, call: Call) -> Reply:
        message, config = self._message_params(call)
        seat = self.seats.take(call.principal.owner)
        try:
            record, _, subscription = self.runs.start(
                message,
                call.principal,
                config,
                subscribe=True,
                caller=Caller.of(call.http),
                extensions=call.extensions,
            )
        except BaseException:
            seat.release()
            raise
        assert subscription is not None  # subscribe=True: taken before the run started
        return stream_reply(self, call, record, subscription, seat)

    def subscribe_to_task(self, call: Call) -> Reply:
        return off_stack(lambda: self._subscribe(call), close_stream)

    def _subscribe(self, call: Call) -> Reply:
        params = schemas.read(schemas.SubscribeToTaskRequestSchema, call.params)
        record = self.visible_record(params["id"], call.principal)
        if record.state.terminal:
            # Plain JSON, no stream (the SDK's and the conformance suite's STREAM-SUB-003
            # reading); an unknown or foreign task stays a stream's one error event.
            refusal = UnsupportedOperationError(
                f"task is {record.state.value}; there is nothing to subscribe to",
                metadata={"taskId": record.task.id},
            )
            refusal.before_stream = True
            raise refusal
        seat = self.seats.take(call.principal.owner)
        subscription = None
        try:
            subscription = self.bus.subscribe(record.task.id)
            # Re-read after subscribing: the snapshot's version bounds what the bus may skip.
            record = self.store.get_task(record.task.id) or record
        except BaseException:
            if subscription is not None:
                subscription.close()
            seat.release()
            raise
        return stream_reply(self, call, record, subscription, seat)

    # ------------------------------------------------------------------ cancel

    def cancel_task(self, call: Call) -> t.Any:
        params = schemas.read(schemas.CancelTaskRequestSchema, call.params)
        record = self.visible_record(params["id"], call.principal)
        return wire.dump_task(self.cancel(record).task)

    def cancel(self, record: TaskRecord, *, text: str | None = None) -> TaskRecord:
        """Settle CANCELED against the store and cut the local run, if any."""
        return self.runs.cancel(record, text=text)

    # ------------------------------------------------------------------ retention

    def trim_tier(self, record: TaskRecord) -> None:
        """Hold ``record``'s tier to both retention bounds now (``flask a2a trim``)."""
        self.retention.trim_tier(record)

    def forget(self, task_id: str, *, local: bool = False) -> None:
        """A task was deleted: cut its local run, end its streams with no event and delete its
        queued push notifications. ``local``:
        a settled task (retention), which no other replica runs or streams any more, so a
        shared bus (Redis) is not told: a blocking send whose settle trims its tier costs the
        bus nothing."""
        self.runs.cut(task_id)
        self.bus.publish(BusEvent.removed(task_id, local=local))
        if self.push is not None:  # its queued notifications go with it
            self.push.task_deleted(task_id)

    # ------------------------------------------------------------------ push configs

    def _push(self) -> PushDelivery:
        if self.push is None:
            raise PushNotificationNotSupportedError()
        return self.push

    def create_push_config(self, call: Call) -> t.Any:
        push = self._push()
        params = schemas.read(schemas.PushConfigSchema, call.params)
        if not params.get("task_id"):
            raise InvalidParamsError(
                "Invalid parameters: taskId: Missing data for required field.",
                field_violations=[("taskId", "Missing data for required field.")],
            )
        record = self.visible_record(params["task_id"], call.principal)
        push.check_url(params["url"])
        params["protocol_version"] = call.protocol_version  # the shape its webhooks take
        return wire.dump_push_config(push.register(record, params))

    def get_push_config(self, call: Call) -> t.Any:
        push = self._push()
        params = schemas.read(schemas.PushConfigRefSchema, call.params)
        record = self.visible_record(params["task_id"], call.principal)
        config = push.get_config(record.task.id, params["id"])
        if config is None:
            raise TaskNotFoundError("Push notification config not found")
        return wire.dump_push_config(config)

    def list_push_configs(self, call: Call) -> t.Any:
        push = self._push()
        params = schemas.read(schemas.ListPushConfigsRequestSchema, call.params)
        record = self.visible_record(params["task_id"], call.principal)
        configs = push.list_configs(record.task.id)
        size = params.get("page_size") or 100
        start = 0
        if params.get("page_token"):
            try:
                start = int(params["page_token"])
                if start < 0:
                    raise ValueError(start)
            except ValueError:
                raise InvalidParamsError("Invalid parameters: pageToken is not valid") from None
        page = configs[start : start + size]
        out: dict[str, t.Any] = {"configs": [wire.dump_push_config(c) for c in page]}
        if start + size < len(configs):
            out["nextPageToken"] = str(start + size)
        return out

    def delete_push_config(self, call: Call) -> None:
        self._push()
        params = schemas.read(schemas.PushConfigRefSchema, call.params)
        record = self.visible_record(params["task_id"], call.principal)
        # Idempotent (spec §3.1.10): a config already gone, or never there, answers null too.
        self.store.delete_push_config(record.task.id, params["id"])
        self._push().config_deleted(record.task.id, params["id"])
        return None

    # ------------------------------------------------------------------ the extended card

    def get_extended_card(self, call: Call) -> t.Any:
        schemas.read(schemas.GetExtendedAgentCardRequestSchema, call.params)
        if self.extended_card is None:
            raise ExtendedAgentCardNotConfiguredError()
        return self.extended_card(call.principal)

    # ------------------------------------------------------------------ outside the wire

    def task_updater(self, task_id: str) -> TaskUpdater:
        return TaskUpdater(self.writer, task_id, self.updater_context)

    def lease_runs(self) -> None:
        """Keep this process's runs leased in the shared store, and settle the runs other
        processes left behind (``run_leases.py``)."""
        if self.leases is None and not self.closing:
            leases = self.leases = RunLeases(self)
            self.runs.life.leased_by(leases)
            for name, method in self.methods.items():  # it sweeps from its first call on
                self.methods[name] = leases.served(method)

    def shutdown(self, timeout: float | None = None) -> bool:
        """Refuse new runs, cut every live run (settled CANCELED), wait for them to finish.

        Returns True when every run finished within ``timeout``.
        """
        self.closing = True
        if self.leases is not None:
            self.leases.close()
        budget = self.settings.shutdown_timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        try:
            finished = self.runs.shutdown(budget)
            # Retention trims waiting to run after their settles' answers run now, so none is
            # left holding a store connection once the exchange has stopped.
            ended = self.retention.flush(max(0.0, deadline - time.monotonic())) and finished
            if ended:  # nothing of ours holds a store connection any more
                self.close_store()
            return ended
        finally:
            self.close_bus()
