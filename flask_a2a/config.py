"""Every deployment setting, as an ``A2A_*`` Flask config key with the spec's default.

The protocol core takes a :class:`Settings`; the extension builds it from ``app.config`` once,
in ``init_app``. docs/configuration.md documents each key.

Every key is checked there, by a plain reader chosen by the type of its :class:`Settings` field
(not marshmallow: the host's, of whatever version, is left to its own schemas): a value from the
environment (a string, or what ``from_prefixed_env`` parsed as JSON) is coerced when it reads as
the type, and anything else fails startup naming the key, the value and the type expected. A new
setting is one :class:`Settings` field: its name, type and default (``DEFAULTS`` is read off it).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import logging
import math
import typing as t

log = logging.getLogger("flask_a2a")

#: Keys whose values are secrets: a startup error names the key, never the value.
_SECRET_KEYS: t.Final = frozenset({"A2A_PUSH_SECRET_KEY"})

SEAT_OVERFLOW_POLICIES: t.Final = ("refuse", "evict-oldest")
#: Who may load the console page: a request the principal hook resolves to an owner, or anyone
#: (the page holds no data; every call it makes is authenticated by the exchange).
CONSOLE_PRINCIPALS: t.Final = ("required", "optional")
#: ``protocolBinding`` names of the interfaces the card can list first.
BINDINGS: t.Final = ("JSONRPC", "HTTP+JSON", "GRPC")
#: ``A2A_CHECK_MEDIA_TYPES`` values (``True`` reads as ``refuse``, ``False`` as ``off``).
MEDIA_CHECKS: t.Final = ("refuse", "log", "off")
#: A2A versions the endpoints can serve (``A2A_PROTOCOL_VERSIONS``; 1.0 always).
PROTOCOL_VERSIONS: t.Final = ("1.0", "0.3")

#: Keys where the spec says "0 = the default".
_ZERO_IS_DEFAULT: t.Final = (
    "A2A_TERMINAL_TASK_RETENTION",
    "A2A_PAUSED_TASK_RETENTION",
    "A2A_MAX_PUSH_CONFIGS_PER_TASK",
    "A2A_MAX_CONCURRENT_RUNS_PER_OWNER",
    "A2A_MAX_STREAM_SEATS_PER_OWNER",
)


class ConfigError(ValueError):
    """An ``A2A_*`` setting or an ``A2A(...)`` argument (or what one declares: a ``Skill``, an
    ``Entity``, a ``SigningKey``) that cannot be used; raised by ``A2A(...)`` and ``init_app``,
    before any request, naming the setting or the argument. Catch this one class."""


class ConfigTypeError(ConfigError, TypeError):
    """A :class:`ConfigError` for an argument of the wrong kind; a ``TypeError`` too, as
    0.1 raised, so an ``except TypeError`` written for it still catches it."""


class ConfigRuntimeError(ConfigError, RuntimeError):
    """A :class:`ConfigError` for a setting that collides with what the app already holds (a
    route, an agent's name) or needs an extra not installed; a ``RuntimeError`` too, as 0.1
    raised, so an ``except RuntimeError`` written for it still catches it."""


_WORDS: t.Final = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _boolean(value: t.Any) -> bool:
    """``True``/``False``, ``1``/``0``, or the words true/false, 1/0, yes/no (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _WORDS:
        return _WORDS[value.strip().lower()]
    raise ValueError(value)


def _integer(value: t.Any) -> int:
    """An int, or a string or float that is exactly one (``"16"``, ``16.0``; not ``16.5``)."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(value)
    return int(value)


def _number(value: t.Any) -> float:
    """A finite float, or a string or int that reads as one."""
    if isinstance(value, bool):
        raise ValueError(value)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(value)
    return number


def _string(value: t.Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if not isinstance(value, str):
        raise ValueError(value)
    return value


def _or_none(read: t.Callable[[t.Any], t.Any]) -> t.Callable[[t.Any], t.Any]:
    return lambda value: None if value is None else read(value)


def _words(value: t.Any) -> tuple[str, ...]:
    """A list of strings, or one string of them separated by commas or spaces (the
    environment's form); unset (None) is no entries."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.replace(",", " ").split())
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise ValueError(value)


#: A ``Settings`` field type -> (how its key is read, what the error says it expects).
_READERS: t.Final[dict[t.Any, tuple[t.Callable[[t.Any], t.Any], str]]] = {
    bool: (_boolean, "a boolean (true/false, 1/0, yes/no)"),
    int: (_integer, "an integer"),
    float: (_number, "a number"),
    str: (_string, "a string"),
    t.Optional[str]: (_or_none(_string), "a string or None"),
    t.Optional[float]: (_or_none(_number), "a number or None"),
    tuple[str, ...]: (_words, "a list of strings, or one comma- or space-separated string"),
}


def _zero_is_default(value: int, default: int) -> int:
    return default if value == 0 else value


@dataclasses.dataclass(frozen=True)
class Settings:
    path: str = "/a2a"
    task_timeout: float = 300.0
    allowed_origins: tuple[str, ...] = ()
    allow_private_push: bool = False
    #: Settled tasks kept per tier; negative = the host owns retention.
    terminal_task_retention: int = 64
    #: Paused tasks kept per tier (the oldest are canceled past it); negative = host owns it.
    paused_task_retention: int = 64
    max_push_configs_per_task: int = 8
    #: Concurrent runs per owner; negative = unlimited.
    max_concurrent_runs_per_owner: int = 16
    #: Size of the process-wide run pool; 0 = the runner's default (1000 greenlets, 64 threads).
    run_pool_size: int = 0
    #: Concurrent streams per owner; negative = unlimited.
    max_stream_seats_per_owner: int = 16
    stream_seat_overflow: str = "refuse"
    keepalive_interval: float = 15.0
    max_body_bytes: int = 1024 * 1024
    disable_entity_skills: bool = False
    disable_push_notifications: bool = False
    max_history: int = 100
    shutdown_timeout: float = 10.0
    replica_poll_interval: float = 1.0
    #: A blocking run nobody else can see yet is written when it settles or after this many
    #: seconds, whichever is first; 0 = write every change at once.
    blocking_write_delay: float = 1.0
    database_url: t.Optional[str] = None
    statement_timeout: float = 5.0
    sql_asynchronous_commit: bool = True
    #: The SQL store creates its tables when missing; off = migrations own them.
    create_tables: bool = True
    #: Seconds a new connection of the store's own engine may take (client side).
    database_connect_timeout: float = 3.0
    #: Seconds any wait for the database may take (client side); None = statement timeout + 1.
    database_read_timeout: t.Optional[float] = None
    #: Serve from the memory store even in several worker processes (each sees only its own).
    allow_memory_store_in_workers: bool = False
    push_timeout: float = 10.0
    role: t.Optional[str] = None
    public_base_url: t.Optional[str] = None
    card_max_age: int = 300
    #: Where the JWKS that verifies the card's signatures is served (the JWS ``jku``).
    jwks_path: str = "/.well-known/jwks.json"
    #: RFC 9728: issuers of the tokens this resource accepts; non-empty = serve the metadata.
    authorization_servers: tuple[str, ...] = ()
    scopes_supported: tuple[str, ...] = ()
    #: Fernet keys sealing push tokens and credentials at rest, newest first (``push_secrets``).
    push_secret_key: tuple[str, ...] = dataclasses.field(default=(), repr=False)
    #: A Redis bus shared by replicas (the ``redis`` extra); unset = the in-process bus.
    redis_url: t.Optional[str] = None
    #: Every Redis key the bus and the fleet limits use starts with this.
    redis_prefix: str = "a2a:"
    #: Seconds any one Redis call may take (connect and read) before it counts as an outage.
    redis_timeout: float = 0.5
    #: Seconds a watch or a fleet lease lives without its process's heartbeat.
    redis_lease_ttl: float = 10.0
    #: Seconds between reconnect attempts while Redis does not answer.
    redis_retry: float = 0.5
    #: Count run slots and stream seats per owner across every replica (needs the Redis bus).
    fleet_limits: bool = False
    #: Record Prometheus metrics when prometheus_client is installed (the ``prometheus`` extra).
    metrics: bool = True
    #: Serve the metrics text at this path (unset: the host mounts ``metrics_view`` itself).
    metrics_path: t.Optional[str] = None
    #: Where the HTTP+JSON (REST) binding is mounted; None = ``A2A_PATH`` + ``/rest``,
    #: ``""`` = not served (see :attr:`rest_mount`).
    rest_path: t.Optional[str] = None
    #: The interface the card lists first (clients such as the official SDK take the first
    #: one they support): ``JSONRPC``, ``HTTP+JSON`` or ``GRPC``.
    preferred_binding: str = "JSONRPC"
    #: Where the gRPC server (``flask a2a grpc``) is reached, ``host:port``: the card lists a
    #: ``GRPC`` interface there. Unset: the card lists none.
    grpc_url: t.Optional[str] = None
    #: The gRPC server's threads: at most this many RPCs at once (an open stream holds one);
    #: the next is refused RESOURCE_EXHAUSTED.
    grpc_threads: int = 64
    #: Media types checked against the routed skill's modes: ``refuse`` (-32005), ``log``
    #: (answer as before, log what ``refuse`` would refuse) or ``off``.
    check_media_types: str = "log"
    #: Serve the browser console (docs/console.md) at this path; unset = not served.
    console_path: t.Optional[str] = None
    #: ``required``: the page is refused unless the principal hook names an owner;
    #: ``optional``: served to anyone, it asks for a bearer token (``CONSOLE_PRINCIPALS``).
    console_principal: str = "required"
    #: Owners shown the console's operators panel (a ``console_admin=`` check may add others).
    console_admin: tuple[str, ...] = ()
    #: The agent's name (``A2A(name=...)``, not a config key): labels its metrics.
    agent: str = "default"
    #: The RQ queue push notifications are handed to (``push/queue.py``); None = in process.
    push_queue: t.Optional[str] = None
    #: The Redis holding that queue; None = ``redis_url``.
    push_queue_url: t.Optional[str] = None
    #: Attempts per queued notification (the first included) before it is given up.
    push_retry_attempts: int = 6
    #: Seconds before a queued notification's first retry; doubled for each next one.
    push_retry_backoff: float = 1.0
    #: The longest wait between two attempts.
    push_retry_max_delay: float = 60.0
    #: Failed attempts in a row that pause a config (queue mode).
    push_pause_after: int = 20
    #: Seconds a paused config stays paused.
    push_pause_seconds: float = 600.0
    #: Bytes one owner's queued notifications may hold in Redis; past it one is dropped
    #: (logged). Negative = no cap.
    push_queue_max_bytes_per_owner: int = 8 * 1024 * 1024
    #: The A2A versions served on the same endpoints: 1.0, and 0.3 beside it when listed
    #: (docs/protocol-versions.md).
    protocol_versions: tuple[str, ...] = ("1.0",)
    #: With a shared SQL store, each running task holds a lease; a lapsed one (its process
    #: died) is settled FAILED by any process (``exchange/run_leases.py``).
    run_leases: bool = True
    #: Seconds a run lease lives at least, however short the poll interval makes it: a loaded
    #: machine may delay a renewal a second. Tests lower it to wait less for lapses.
    min_run_lease: float = 2.0

    @property
    def rest_mount(self) -> str | None:
        """The REST binding's path prefix, or None when it is off."""
        if self.rest_path is None:
            return self.path.rstrip("/") + "/rest"
        return self.rest_path.rstrip("/") or None

    @classmethod
    def from_config(cls, config: t.Mapping[str, t.Any]) -> Settings:
        """Read the ``A2A_*`` keys (missing ones take their defaults) and check them.

        Raises :class:`ConfigError` naming every key whose value is not of its type; logs a
        warning for an ``A2A_*`` key no setting has (a typo would otherwise be silently ignored).
        """
        warn_unknown_keys(config)
        raw = {key: config.get(key, default) for key, default in DEFAULTS.items()}
        if isinstance(raw["A2A_CHECK_MEDIA_TYPES"], bool):
            raw["A2A_CHECK_MEDIA_TYPES"] = "refuse" if raw["A2A_CHECK_MEDIA_TYPES"] else "off"
        loaded, problems = _read(raw)
        if problems:
            raise ConfigError(
                "\n".join(
                    f"{key}={_shown(key, raw[key])} ({type(raw[key]).__name__}): "
                    f"expected {_expected(key)}"
                    for key in problems
                )
            )
        for key in _ZERO_IS_DEFAULT:
            loaded[key] = _zero_is_default(loaded[key], DEFAULTS[key])
        settings = cls(**{key[4:].lower(): value for key, value in loaded.items()})
        settings.validate()
        return settings

    def validate(self) -> None:
        if not self.path.startswith("/"):
            raise ConfigError(f"A2A_PATH must start with '/', got {self.path!r}")
        if self.stream_seat_overflow not in SEAT_OVERFLOW_POLICIES:
            raise ConfigError(
                f"A2A_STREAM_SEAT_OVERFLOW must be one of {SEAT_OVERFLOW_POLICIES}, "
                f"got {self.stream_seat_overflow!r}"
            )
        if self.keepalive_interval <= 0:
            raise ConfigError("A2A_KEEPALIVE_INTERVAL must be positive")
        if self.max_body_bytes <= 0:
            raise ConfigError("A2A_MAX_BODY_BYTES must be positive")
        if self.min_run_lease <= 0:
            raise ConfigError("A2A_MIN_RUN_LEASE must be positive")
        if self.blocking_write_delay < 0:
            raise ConfigError("A2A_BLOCKING_WRITE_DELAY must be 0 (write at once) or positive")
        if not self.jwks_path.startswith("/"):
            raise ConfigError(f"A2A_JWKS_PATH must start with '/', got {self.jwks_path!r}")
        if self.metrics_path is not None and not self.metrics_path.startswith("/"):
            raise ConfigError(f"A2A_METRICS_PATH must start with '/', got {self.metrics_path!r}")
        if self.database_connect_timeout <= 0:
            raise ConfigError("A2A_DATABASE_CONNECT_TIMEOUT must be positive")
        if self.database_read_timeout is not None and self.database_read_timeout <= 0:
            raise ConfigError("A2A_DATABASE_READ_TIMEOUT must be positive (or unset)")
        if self.role not in (None, "", "agent"):
            raise ConfigError(f"A2A_ROLE must be unset or 'agent', got {self.role!r}")
        if self.rest_path and not self.rest_path.startswith("/"):
            raise ConfigError(
                f"A2A_REST_PATH must start with '/' (or be '' to turn REST off), "
                f"got {self.rest_path!r}"
            )
        if self.rest_path and self.rest_path.rstrip("/") in ("", self.path.rstrip("/")):
            raise ConfigError(
                f"A2A_REST_PATH {self.rest_path!r} must differ from A2A_PATH and from '/'"
            )
        if self.preferred_binding not in BINDINGS:
            raise ConfigError(
                f"A2A_PREFERRED_BINDING must be one of {BINDINGS}, got {self.preferred_binding!r}"
            )
        if self.check_media_types not in MEDIA_CHECKS:
            raise ConfigError(
                f"A2A_CHECK_MEDIA_TYPES must be one of {MEDIA_CHECKS}, "
                f"got {self.check_media_types!r}"
            )
        if self.preferred_binding == "HTTP+JSON" and self.rest_mount is None:
            raise ConfigError("A2A_PREFERRED_BINDING is HTTP+JSON but A2A_REST_PATH turns REST off")
        self._validate_grpc()
        unknown = [v for v in self.protocol_versions if v not in PROTOCOL_VERSIONS]
        if unknown or "1.0" not in self.protocol_versions:
            raise ConfigError(
                f"A2A_PROTOCOL_VERSIONS must list 1.0 and may add 0.3, "
                f"got {list(self.protocol_versions)!r}"
            )
        self._validate_console()
        self._validate_push_queue()

    def _validate_console(self) -> None:
        if self.console_principal not in CONSOLE_PRINCIPALS:
            raise ConfigError(
                f"A2A_CONSOLE_PRINCIPAL must be one of {CONSOLE_PRINCIPALS}, "
                f"got {self.console_principal!r}"
            )
        if not self.console_path:
            return
        path = self.console_path.rstrip("/")
        if not path.startswith("/"):
            raise ConfigError(f"A2A_CONSOLE_PATH must start with '/', got {self.console_path!r}")
        rest = self.rest_mount
        if path == self.path.rstrip("/") or (
            rest is not None and (path + "/").startswith(rest + "/")
        ):
            raise ConfigError(
                f"A2A_CONSOLE_PATH {self.console_path!r} must differ from A2A_PATH and lie "
                "outside A2A_REST_PATH"
            )

    def _validate_grpc(self) -> None:
        if self.preferred_binding == "GRPC" and not self.grpc_url:
            raise ConfigError("A2A_PREFERRED_BINDING is GRPC but A2A_GRPC_URL is unset")
        url = self.grpc_url
        if url is not None:
            host, _, port = url.rpartition(":")
            if not host or "/" in url or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(
                    f"A2A_GRPC_URL must be host:port (the spec's form, no scheme), got {url!r}"
                )
        if self.grpc_threads < 1:
            raise ConfigError("A2A_GRPC_THREADS must be at least 1")

    def _validate_push_queue(self) -> None:
        if self.push_queue and not (self.push_queue_url or self.redis_url):
            raise ConfigError(
                "A2A_PUSH_QUEUE needs a Redis: set A2A_PUSH_QUEUE_URL (or A2A_REDIS_URL)"
            )
        if self.push_retry_attempts < 1:
            raise ConfigError("A2A_PUSH_RETRY_ATTEMPTS must be at least 1")
        if self.push_retry_backoff < 0 or self.push_retry_max_delay < 0:
            raise ConfigError("A2A_PUSH_RETRY_BACKOFF and A2A_PUSH_RETRY_MAX_DELAY must be >= 0")
        if self.push_pause_after < 1 or self.push_pause_seconds <= 0:
            raise ConfigError(
                "A2A_PUSH_PAUSE_AFTER must be at least 1 and A2A_PUSH_PAUSE_SECONDS positive"
            )
        if self.push_queue_max_bytes_per_owner == 0:
            raise ConfigError(
                "A2A_PUSH_QUEUE_MAX_BYTES_PER_OWNER must be positive (or negative: no cap)"
            )


#: Settings fields that are no config key (``agent`` comes from ``A2A(name=...)``).
_NOT_KEYS: t.Final = frozenset({"agent"})

#: Key -> default, read off :class:`Settings`, where each default is written once. Knobs where
#: the spec says "0 = the default" resolve 0 to these values.
DEFAULTS: t.Final[dict[str, t.Any]] = {
    "A2A_" + field.name.upper(): field.default
    for field in dataclasses.fields(Settings)
    if field.name not in _NOT_KEYS
}


def _shown(key: str, value: t.Any) -> str:
    return "<hidden>" if key in _SECRET_KEYS else repr(value)


def warn_unknown_keys(config: t.Mapping[str, t.Any]) -> None:
    """Log a warning for each ``A2A_*`` key that is no setting, naming the closest one."""
    for key in sorted(k for k in config if k.startswith("A2A_") and k not in DEFAULTS):
        # Compared without the shared "A2A_", which would make every key look close.
        close = difflib.get_close_matches(key[4:], [known[4:] for known in DEFAULTS], n=1)
        hint = f"; did you mean A2A_{close[0]}?" if close else ""
        log.warning("a2a: unknown config key %s is ignored%s", key, hint)


@functools.cache
def _hints() -> dict[str, t.Any]:
    return t.get_type_hints(Settings)


def _reader_of(key: str) -> tuple[t.Callable[[t.Any], t.Any], str]:
    hint = _hints()[key[4:].lower()]
    try:
        return _READERS[hint]
    except KeyError:
        raise TypeError(f"Settings.{key[4:].lower()}: no config reader for {hint}") from None


def _expected(key: str) -> str:
    return _reader_of(key)[1]


def _read(raw: dict[str, t.Any]) -> tuple[dict[str, t.Any], list[str]]:
    """Each key read by the reader of its ``Settings`` field type; and the keys refused."""
    loaded: dict[str, t.Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        try:
            loaded[key] = _reader_of(key)[0](value)
        except (ValueError, TypeError, OverflowError):
            problems.append(key)
    return loaded, problems
