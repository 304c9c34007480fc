"""The A2A v1.0 data model as plain, immutable dataclasses.

These are the objects handlers and stores work with; ``wire.py`` turns them into ProtoJSON and
back. They are frozen so a stored task can be shared without copying: every change builds a new
object with :func:`dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import typing as t
from datetime import datetime, timezone


class _Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


#: "No value", distinct from ``None`` (a data part may hold JSON ``null``).
UNSET: t.Final = _Unset.UNSET


class TaskState(enum.Enum):
    """Task states, valued by their proto names (what the wire carries)."""

    UNSPECIFIED = "TASK_STATE_UNSPECIFIED"
    SUBMITTED = "TASK_STATE_SUBMITTED"
    WORKING = "TASK_STATE_WORKING"
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELED = "TASK_STATE_CANCELED"
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
    REJECTED = "TASK_STATE_REJECTED"
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"

    # A member is itself alone (Enum compares by identity): hashed by identity, in C, where
    # Enum's own hash is a Python call at every set or dict lookup of a state.
    __hash__ = object.__hash__

    if t.TYPE_CHECKING:  # at run time, plain attributes set on each member below

        @property
        def terminal(self) -> bool:
            """Immutable end states: a follow-up needs a new task."""

        @property
        def interrupted(self) -> bool:
            """Paused states: the next message carrying the task id resumes it."""


TERMINAL_STATES: t.Final = frozenset(
    {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
)
INTERRUPTED_STATES: t.Final = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})
# Plain attributes, not properties: a request reads them a dozen times, a property is a call.
for _state in TaskState:
    setattr(_state, "terminal", _state in TERMINAL_STATES)  # noqa: B010
    setattr(_state, "interrupted", _state in INTERRUPTED_STATES)  # noqa: B010
#: Proto enum numbers, accepted on input as ProtoJSON readers do.
TASK_STATE_NUMBERS: t.Final = dict(enumerate(TaskState))


class Role(enum.Enum):
    UNSPECIFIED = "ROLE_UNSPECIFIED"
    USER = "ROLE_USER"
    AGENT = "ROLE_AGENT"


ROLE_NUMBERS: t.Final = dict(enumerate(Role))


def utcnow() -> datetime:
    """Now in UTC, truncated to the millisecond precision the wire carries."""
    now = datetime.now(timezone.utc)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def new_id() -> str:
    """A random (version 4) UUID, as ``str(uuid.uuid4())`` spells it.

    Built from the same 16 random bytes ``uuid4`` takes, without the ``UUID`` object: a send
    makes three ids, and the object's checks and formatting cost twice the bytes' price.
    """
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    x = raw.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


@dataclasses.dataclass(frozen=True)
class Part:
    """One piece of content: exactly one of ``text``, ``raw``, ``url`` or ``data``."""

    text: str | None = None
    raw: bytes | None = None
    url: str | None = None
    #: Any JSON value, ``None`` (JSON null) included; ``UNSET`` when this is not a data part.
    data: t.Any = UNSET
    metadata: dict[str, t.Any] | None = None
    filename: str | None = None
    media_type: str | None = None

    def __post_init__(self) -> None:
        kinds = (self.text is not None) + (self.raw is not None) + (self.url is not None)
        kinds += self.data is not UNSET
        if kinds != 1:
            raise ValueError("a Part holds exactly one of text, raw, url or data")


@dataclasses.dataclass(frozen=True)
class Message:
    message_id: str
    role: Role
    parts: tuple[Part, ...]
    context_id: str | None = None
    task_id: str | None = None
    metadata: dict[str, t.Any] | None = None
    extensions: tuple[str, ...] = ()
    reference_task_ids: tuple[str, ...] = ()

    @classmethod
    def agent(cls, text: str, *, context_id: str | None, task_id: str | None) -> Message:
        """An agent message holding one text part (status messages, refusals)."""
        return cls(new_id(), Role.AGENT, (Part(text=text),), context_id, task_id)

    def placed(self, task_id: str | None, context_id: str | None) -> Message:
        """This message on a task and context (``dataclasses.replace`` costs twice as much,
        and this runs on every send)."""
        return Message(
            self.message_id,
            self.role,
            self.parts,
            context_id,
            task_id,
            self.metadata,
            self.extensions,
            self.reference_task_ids,
        )

    @property
    def text(self) -> str:
        """The text parts joined by newlines (a convenience for handlers)."""
        return "\n".join(p.text for p in self.parts if p.text is not None)

    @property
    def data(self) -> t.Any:
        """The first data part's value, or ``None``."""
        for part in self.parts:
            if part.data is not UNSET:
                return part.data
        return None


@dataclasses.dataclass(frozen=True)
class Artifact:
    artifact_id: str
    parts: tuple[Part, ...] = ()
    name: str | None = None
    description: str | None = None
    metadata: dict[str, t.Any] | None = None
    extensions: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class TaskStatus:
    state: TaskState
    timestamp: datetime
    message: Message | None = None


@dataclasses.dataclass(frozen=True)
class Task:
    id: str
    context_id: str
    status: TaskStatus
    artifacts: tuple[Artifact, ...] = ()
    history: tuple[Message, ...] = ()
    metadata: dict[str, t.Any] | None = None
    #: The whole task as JSON, once something encoded it (``wire.task_json``): a task never
    #: changes, so a store's write and the answer about the same task share one encoding.
    _json: str | None = dataclasses.field(default=None, init=False, repr=False, compare=False)

    def evolve(
        self,
        *,
        status: TaskStatus | None = None,
        artifacts: tuple[Artifact, ...] | None = None,
        history: tuple[Message, ...] | None = None,
    ) -> Task:
        """A copy with the fields a change touches replaced (``dataclasses.replace`` costs
        several times more, and this runs on every write)."""
        return Task(
            self.id,
            self.context_id,
            self.status if status is None else status,
            self.artifacts if artifacts is None else artifacts,
            self.history if history is None else history,
            self.metadata,
        )


@dataclasses.dataclass(frozen=True)
class TaskStatusUpdateEvent:
    task_id: str
    context_id: str
    status: TaskStatus
    metadata: dict[str, t.Any] | None = None


@dataclasses.dataclass(frozen=True)
class TaskArtifactUpdateEvent:
    task_id: str
    context_id: str
    artifact: Artifact
    append: bool = False
    last_chunk: bool = False
    metadata: dict[str, t.Any] | None = None


#: What a stream or a webhook carries: exactly one of these per StreamResponse.
StreamEvent = t.Union[Task, Message, TaskStatusUpdateEvent, TaskArtifactUpdateEvent]


@dataclasses.dataclass(frozen=True)
class AuthenticationInfo:
    scheme: str
    credentials: str | None = None


@dataclasses.dataclass(frozen=True)
class PushConfig:
    """A TaskPushNotificationConfig: where to POST a task's events."""

    id: str
    task_id: str
    url: str
    token: str | None = None
    authentication: AuthenticationInfo | None = None
    tenant: str | None = None
    #: The A2A version the config was registered over: its webhooks are sent in that
    #: version's shape (a v0.3 config receives the v0.3 Task).
    protocol_version: str = "1.0"


@dataclasses.dataclass(frozen=True)
class Principal:
    """Who is calling, as resolved by the host app's own auth.

    :param owner: the user id every task is owned by (erasure deletes by it); an int
        (``user.id``) is stored as its string, ``Principal(owner=7).owner == "7"``.
    :param scopes: ``None`` for a session (sees every task of its owner); the scope set of a
        narrowed token or embed grant otherwise (sees only tasks made under the same set).
    :param tenant: the tenant the request acts in; tasks are visible only in the tenant they
        were made in. An int is stored as its string too.
    """

    owner: str
    scopes: frozenset[str] | None = None
    tenant: str | None = None

    def __post_init__(self) -> None:
        owner, tenant, scopes = self.owner, self.tenant, self.scopes
        if (  # the usual principal, made on every request: nothing to convert or refuse
            type(owner) is str
            and owner
            and (tenant is None or type(tenant) is str)
            and (scopes is None or type(scopes) is frozenset)
        ):
            return
        for name in ("owner", "tenant"):
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, name, str(value))  # integer user ids, as apps have them
        if not isinstance(self.owner, str) or not self.owner:
            raise ValueError(
                "Principal.owner must be a non-empty str or an int, "
                f"got {type(self.owner).__name__} {self.owner!r}"
            )
        if self.tenant is not None and not isinstance(self.tenant, str):
            raise ValueError(
                f"Principal.tenant must be a str, an int or None, got {type(self.tenant).__name__}"
            )
        if self.scopes is not None and not isinstance(self.scopes, frozenset):
            object.__setattr__(self, "scopes", frozenset(self.scopes))

    @property
    def scope_key(self) -> tuple[str, ...] | None:
        """The stored form of the scope set: sorted, or ``None`` for a session."""
        return None if self.scopes is None else tuple(sorted(self.scopes))

    @property
    def tier(self) -> Tier:
        return Tier(self.owner, self.tenant, self.scope_key)


class Tier(t.NamedTuple):
    """A retention and visibility tier: one owner, one tenant, one scope set."""

    owner: str
    tenant: str | None
    scopes: tuple[str, ...] | None
