"""A store that could not be opened, told to the caller as the protocol's error.

:class:`~flask_a2a.store.choice.ChosenStore` opens its store at first use, and opening fails two
ways no caller should see as such: the store lives in one process while several serve
(:class:`StoreRefused`), or its database does not answer (:class:`StoreUnavailable`).
:class:`StoreErrors` is the chosen store's stand-in until the store is open: each call opens it
and forwards, and a failure reaches the caller as -32603 with a message that names no driver.
"""

from __future__ import annotations

import logging
import typing as t

from ..config import ConfigRuntimeError
from ..protocol.errors import InternalError
from .base import holds_nothing_at_rest, offers, unavailable_error

if t.TYPE_CHECKING:
    from ..protocol.model import PushConfig, TaskState, Tier
    from .base import ListQuery, Operations, TaskPage, TaskRecord
    from .leases import LapsedRun

log = logging.getLogger("flask_a2a")


class StoreRefused(ConfigRuntimeError):
    """A store that lives in one process, in a server that runs several: a misconfiguration
    (a ``ConfigError``, still the ``RuntimeError`` it was)."""


class StoreUnavailable(RuntimeError):
    """The store's database did not answer when the store was being opened; it is opened at
    a later use. :attr:`cause` is what the driver raised."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"the task store's database does not answer ({type(cause).__name__})")
        self.cause = cause


#: What a caller hears when the store refuses to serve several processes (the log says why).
REFUSED: t.Final = (
    "Internal error: this server's task store cannot serve several worker processes; its "
    "operator must configure a shared SQL store (see the server log)"
)


class StoreErrors:
    """The store ``open_store()`` returns, its refusal and its outage mapped to -32603.

    The refusal is logged once (it names the fix); the outage was logged by the opener.
    """

    def __init__(self, open_store: t.Callable[[], Operations]) -> None:
        self._open_store = open_store
        self._refusal_logged = False

    def opened(self) -> Operations:
        """The store, opened now if it was not yet, or the protocol error saying why not."""
        try:
            return self._open_store()
        except StoreRefused as exc:
            if not self._refusal_logged:
                self._refusal_logged = True
                log.error("%s", exc)
            raise InternalError(REFUSED) from None
        except StoreUnavailable as exc:
            raise unavailable_error() from exc.cause

    # -- what the store says of itself

    @property
    def filters_scope(self) -> bool:
        return self.opened().filters_scope

    @property
    def filters_tenant(self) -> bool:
        return self.opened().filters_tenant

    @property
    def in_memory(self) -> bool:
        return holds_nothing_at_rest(self.opened())

    @property
    def deferred_trims(self) -> bool:
        return bool(getattr(self.opened(), "deferred_trims", False))

    def offers(self, name: str) -> bool:
        return offers(self.opened(), name)

    # -- the Store protocol

    def create_task(self, record: TaskRecord) -> TaskRecord:
        return self.opened().create_task(record)

    def get_task(self, task_id: str, owner: str | None = None) -> TaskRecord | None:
        return self.opened().get_task(task_id, owner)

    def update_task(self, record: TaskRecord, expected_version: int) -> TaskRecord:
        return self.opened().update_task(record, expected_version)

    def list_tasks(self, query: ListQuery) -> TaskPage:
        return self.opened().list_tasks(query)

    def delete_tasks(self, task_ids: t.Iterable[str]) -> int:
        return self.opened().delete_tasks(task_ids)

    def put_push_config(self, owner: str, config: PushConfig, keep: int) -> PushConfig:
        return self.opened().put_push_config(owner, config, keep)

    def get_push_config(self, task_id: str, config_id: str) -> PushConfig | None:
        return self.opened().get_push_config(task_id, config_id)

    def list_push_configs(self, task_id: str) -> list[PushConfig]:
        return self.opened().list_push_configs(task_id)

    def delete_push_config(self, task_id: str, config_id: str) -> bool:
        return self.opened().delete_push_config(task_id, config_id)

    def export_owner(self, owner: str) -> dict[str, list[dict[str, t.Any]]]:
        return self.opened().export_owner(owner)

    def erase_owner(self, owner: str) -> int:
        return self.opened().erase_owner(owner)

    # -- the optional operations (ask ``offers`` first)

    def trim_terminal_tasks(self, tier: Tier, keep: int) -> list[str]:
        return self.opened().trim_terminal_tasks(tier, keep)

    def task_versions(self, task_ids: list[str]) -> dict[str, tuple[int, TaskState]]:
        return self.opened().task_versions(task_ids)

    def owners(self) -> list[str]:
        return self.opened().owners()

    def lease_run(self, task_id: str, until: int, deadline: int | None) -> None:
        self.opened().lease_run(task_id, until, deadline)

    def renew_runs(self, task_ids: list[str], until: int) -> None:
        self.opened().renew_runs(task_ids, until)

    def release_runs(self, task_ids: list[str]) -> None:
        self.opened().release_runs(task_ids)

    def lapsed_runs(self, now: int, limit: int) -> list[LapsedRun]:
        return self.opened().lapsed_runs(now, limit)
