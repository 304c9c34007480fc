"""Every deployment setting, as an ``A2A_*`` Flask config key with the spec's default.

The protocol core takes a :class:`Settings`; the extension builds it from ``app.config`` once,
in ``init_app``. docs/configuration.md documents each key.
"""

from __future__ import annotations

import dataclasses
import typing as t

#: Key -> default. Knobs where the spec says "0 = the default" resolve 0 to these values.
DEFAULTS: t.Final[dict[str, t.Any]] = {
    "A2A_PATH": "/a2a",
    "A2A_TASK_TIMEOUT": 300.0,
    "A2A_ALLOWED_ORIGINS": (),
    "A2A_ALLOW_PRIVATE_PUSH": False,
    "A2A_TERMINAL_TASK_RETENTION": 64,
    "A2A_PAUSED_TASK_RETENTION": 64,
    "A2A_MAX_PUSH_CONFIGS_PER_TASK": 8,
    "A2A_MAX_CONCURRENT_RUNS_PER_OWNER": 16,
    "A2A_RUN_POOL_SIZE": 0,
    "A2A_MAX_STREAM_SEATS_PER_OWNER": 16,
    "A2A_STREAM_SEAT_OVERFLOW": "refuse",
    "A2A_KEEPALIVE_INTERVAL": 15.0,
    "A2A_MAX_BODY_BYTES": 1024 * 1024,
    "A2A_DISABLE_ENTITY_SKILLS": False,
    "A2A_DISABLE_PUSH_NOTIFICATIONS": False,
    "A2A_MAX_HISTORY": 100,
    "A2A_SHUTDOWN_TIMEOUT": 10.0,
    "A2A_REPLICA_POLL_INTERVAL": 1.0,
    "A2A_BLOCKING_WRITE_DELAY": 1.0,
    "A2A_DATABASE_URL": None,
    "A2A_STATEMENT_TIMEOUT": 5.0,
    "A2A_SQL_ASYNCHRONOUS_COMMIT": True,
    "A2A_PUSH_TIMEOUT": 10.0,
    "A2A_ROLE": None,
    "A2A_PUBLIC_BASE_URL": None,
    "A2A_CARD_MAX_AGE": 300,
    "A2A_JWKS_PATH": "/.well-known/jwks.json",
    "A2A_AUTHORIZATION_SERVERS": (),
    "A2A_SCOPES_SUPPORTED": (),
    "A2A_REDIS_URL": None,
    "A2A_REDIS_PREFIX": "a2a:",
    "A2A_REDIS_TIMEOUT": 0.5,
    "A2A_REDIS_LEASE_TTL": 10.0,
    "A2A_FLEET_LIMITS": False,
}

SEAT_OVERFLOW_POLICIES: t.Final = ("refuse", "evict-oldest")


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
    database_url: str | None = None
    statement_timeout: float = 5.0
    sql_asynchronous_commit: bool = True
    push_timeout: float = 10.0
    role: str | None = None
    public_base_url: str | None = None
    card_max_age: int = 300
    #: Where the JWKS that verifies the card's signatures is served (the JWS ``jku``).
    jwks_path: str = "/.well-known/jwks.json"
    #: RFC 9728: issuers of the tokens this resource accepts; non-empty = serve the metadata.
    authorization_servers: tuple[str, ...] = ()
    scopes_supported: tuple[str, ...] = ()
    #: A Redis bus shared by replicas (the ``redis`` extra); unset = the in-process bus.
    redis_url: str | None = None
    #: Every Redis key the bus and the fleet limits use starts with this.
    redis_prefix: str = "a2a:"
    #: Seconds any one Redis call may take (connect and read) before it counts as an outage.
    redis_timeout: float = 0.5
    #: Seconds a watch or a fleet lease lives without its process's heartbeat.
    redis_lease_ttl: float = 10.0
    #: Count run slots and stream seats per owner across every replica (needs the Redis bus).
    fleet_limits: bool = False

    @classmethod
    def from_config(cls, config: t.Mapping[str, t.Any]) -> Settings:
        """Read the ``A2A_*`` keys (missing ones take their defaults) and check them."""
        values = {
            key[4:].lower(): config.get(key, default) for key, default in DEFAULTS.items()
        }
        for name in ("allowed_origins", "authorization_servers", "scopes_supported"):
            found = values[name] or ()
            if isinstance(found, str):  # from an environment variable: comma or space separated
                found = found.replace(",", " ").split()
            values[name] = tuple(found)
        for name in (
            "terminal_task_retention",
            "paused_task_retention",
            "max_push_configs_per_task",
            "max_concurrent_runs_per_owner",
            "max_stream_seats_per_owner",
        ):
            values[name] = _zero_is_default(int(values[name]), DEFAULTS["A2A_" + name.upper()])
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        if not self.path.startswith("/"):
            raise ValueError(f"A2A_PATH must start with '/', got {self.path!r}")
        if self.stream_seat_overflow not in SEAT_OVERFLOW_POLICIES:
            raise ValueError(
                f"A2A_STREAM_SEAT_OVERFLOW must be one of {SEAT_OVERFLOW_POLICIES}, "
                f"got {self.stream_seat_overflow!r}"
            )
        if self.keepalive_interval <= 0:
            raise ValueError("A2A_KEEPALIVE_INTERVAL must be positive")
        if self.max_body_bytes <= 0:
            raise ValueError("A2A_MAX_BODY_BYTES must be positive")
        if self.blocking_write_delay < 0:
            raise ValueError("A2A_BLOCKING_WRITE_DELAY must be 0 (write at once) or positive")
        if not self.jwks_path.startswith("/"):
            raise ValueError(f"A2A_JWKS_PATH must start with '/', got {self.jwks_path!r}")
        if self.role not in (None, "", "agent"):
            raise ValueError(f"A2A_ROLE must be unset or 'agent', got {self.role!r}")
