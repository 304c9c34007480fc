"""Push secrets at rest: a config's ``token`` and ``authentication.credentials``, sealed.

With ``A2A_PUSH_SECRET_KEY`` set (Fernet keys, newest first), ``PushSender`` seals both values
right before a store write and opens them right after a store read, so a store that persists
(the SQL store, any store of the host's) holds only ciphertext for them; the URL, the ids and
the ``scheme`` stay readable. The crypto is ``cryptography``'s Fernet / MultiFernet (AES-128-CBC
and HMAC-SHA256, authenticated), never our own; it is needed only when a key is set (the
``push-secrets`` extra). The memory store is not sealed: it holds the plaintext only in the
process's memory, where the key would sit beside it anyway.

A sealed value is ``MARKER`` + a Fernet token, so a value stored before a key was configured
(no marker) still reads, as plaintext, and ``flask a2a rotate-push-secrets`` seals it. A
sealed value no configured key opens makes its config *unreadable*: never delivered to,
answered without its secrets, and logged once per config (not once per event).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import threading
import typing as t

from ..config import ConfigError
from ..ops.log_fields import fields
from ..protocol.model import AuthenticationInfo, PushConfig
from ..protocol.scrub import scrub
from ..protocol.wire import dump_push_config, push_config_from_wire

if t.TYPE_CHECKING:
    from cryptography.fernet import Fernet, MultiFernet

    from ..store.sql import SQLStore

log = logging.getLogger("flask_a2a")

#: Prefix of a sealed value in the stored config.
MARKER: t.Final = "a2a-fernet:"
EXTRA_HINT: t.Final = "pip install flask-a2a[push-secrets]"
#: Configs whose unreadable-secret line was logged (oldest forgotten first).
_REPORTED_MEMORY: t.Final = 4096
#: Rows read and rewritten per step of a rotation.
ROTATE_BATCH: t.Final = 500


class UnreadableSecretError(Exception):
    """A sealed value that no configured key opens (or sealed with no key configured)."""


@dataclasses.dataclass
class Rotation:
    """What ``rotate_sql_store`` did: counts of configs."""

    rotated: int = 0
    current: int = 0
    unreadable: int = 0
    #: Rows changed by the exchange between the read and the rewrite (left as they are).
    moved: int = 0


class PushSecrets:
    """Seals and opens push config secrets with the configured keys (none: plaintext).

    :param keys: Fernet keys (url-safe base64 of 32 bytes), newest first: the first seals,
        every one opens. Refused with :class:`ConfigError` when malformed, or when
        ``cryptography`` is not installed.
    """

    def __init__(
        self, keys: t.Sequence[str] = (), *, plaintext: t.Callable[[], bool] | None = None
    ) -> None:
        #: Asked once, at the first seal: True keeps values as given (the memory store, which
        #: holds nothing at rest; asked late because the store is chosen at first use).
        self._plaintext = plaintext
        self._plain = False
        self._fernet: MultiFernet | None = None
        self._newest: Fernet | None = None
        if keys:
            self._newest, self._fernet = _fernets(keys)
        self._lock = threading.Lock()
        self._reported: collections.OrderedDict[tuple[str, str], None] = collections.OrderedDict()

    @property
    def sealing(self) -> bool:
        return self._fernet is not None

    # -- one config

    def seal(self, config: PushConfig) -> PushConfig:
        """The config as it is stored: its secrets sealed under the newest key (if any)."""
        return self._map(config, self._seal_value)

    def seal_always(self, config: PushConfig) -> PushConfig:
        """The config sealed under the newest key whatever the store (a queued notification
        rests in Redis); as given when no key is configured."""
        if self._fernet is None:
            return config
        fernet = self._fernet
        return self._map(config, lambda value: MARKER + fernet.encrypt(value.encode()).decode())

    def open(self, config: PushConfig) -> PushConfig:
        """The config as read back, secrets in plaintext; :class:`UnreadableSecretError` if a
        sealed value does not open."""
        return self._map(config, self._open_value)

    def readable(self, config: PushConfig) -> PushConfig | None:
        """The opened config, or None (logged once per config) when it cannot be opened."""
        try:
            return self.open(config)
        except UnreadableSecretError:
            self._report(config)
            return None

    def answer(self, config: PushConfig) -> PushConfig:
        """What the owner is answered: the opened config, or (unreadable, logged once) the
        config without its token and credentials."""
        opened = self.readable(config)
        if opened is not None:
            return opened
        auth = config.authentication
        return dataclasses.replace(
            config,
            token=None,
            authentication=AuthenticationInfo(auth.scheme) if auth is not None else None,
        )

    def answer_wire(self, data: dict[str, t.Any]) -> dict[str, t.Any]:
        """:meth:`answer` for a stored config in its wire form (the data export)."""
        return dump_push_config(self.answer(push_config_from_wire(data)))

    def rotate(self, config: PushConfig) -> PushConfig | None:
        """The config sealed under the newest key, or None when it already is (plaintext
        values get sealed); :class:`UnreadableSecretError` when a value does not open."""
        changed = False

        def rotate_value(value: str) -> str:
            nonlocal changed
            if not value.startswith(MARKER):
                changed = True
                return self._seal_value(value)
            token = value[len(MARKER) :].encode()
            assert self._newest is not None and self._fernet is not None
            try:
                self._newest.decrypt(token)
                return value
            except _invalid_token():
                pass
            try:
                rotated = self._fernet.rotate(token)
            except _invalid_token():
                raise UnreadableSecretError() from None
            changed = True
            return MARKER + rotated.decode()

        if self._fernet is None:
            raise RuntimeError("no A2A_PUSH_SECRET_KEY to rotate to")
        rotated = self._map(config, rotate_value)
        return rotated if changed else None

    # -- values

    def _seal_value(self, value: str) -> str:
        if self._fernet is None or self._keeps_plaintext():
            return value
        return MARKER + self._fernet.encrypt(value.encode()).decode()

    def _keeps_plaintext(self) -> bool:
        if self._plaintext is not None:
            self._plain = self._plaintext()
            self._plaintext = None
        return self._plain

    def _open_value(self, value: str) -> str:
        if not value.startswith(MARKER):
            return value  # stored before a key was configured
        if self._fernet is None:
            raise UnreadableSecretError()
        try:
            return self._fernet.decrypt(value[len(MARKER) :].encode()).decode()
        except (_invalid_token(), UnicodeDecodeError):
            raise UnreadableSecretError() from None

    @staticmethod
    def _map(config: PushConfig, change: t.Callable[[str], str]) -> PushConfig:
        auth = config.authentication
        if auth is not None and auth.credentials:
            auth = AuthenticationInfo(auth.scheme, change(auth.credentials))
        token = change(config.token) if config.token else config.token
        return dataclasses.replace(config, token=token, authentication=auth)

    def _report(self, config: PushConfig) -> None:
        key = (config.task_id, config.id)
        with self._lock:
            if key in self._reported:
                return
            self._reported[key] = None
            while len(self._reported) > _REPORTED_MEMORY:
                self._reported.popitem(last=False)
        log.error(
            "a2a: push config %s of task %s: its secrets do not open with A2A_PUSH_SECRET_KEY; "
            "it gets no deliveries (configure the key that sealed it, or re-create the config)",
            scrub(config.id),
            scrub(config.task_id),
            extra=fields(config.task_id),
        )


def _fernets(keys: t.Sequence[str]) -> tuple[Fernet, MultiFernet]:
    try:
        from cryptography.fernet import Fernet, MultiFernet
    except ImportError:
        raise ConfigError(
            f"A2A_PUSH_SECRET_KEY needs the cryptography package: {EXTRA_HINT}"
        ) from None
    fernets = []
    for position, key in enumerate(keys, start=1):
        try:
            fernets.append(Fernet(key))
        except (ValueError, TypeError):
            # Never the key itself: it is a secret, and this line goes to the log.
            raise ConfigError(
                f"A2A_PUSH_SECRET_KEY: key {position} of {len(keys)} is not a Fernet key "
                "(url-safe base64 of 32 bytes: cryptography.fernet.Fernet.generate_key())"
            ) from None
    return fernets[0], MultiFernet(fernets)


def _invalid_token() -> type[Exception]:
    from cryptography.fernet import InvalidToken

    return InvalidToken


# ------------------------------------------------------------------ rotation


def rotate_sql_store(store: SQLStore, secrets: PushSecrets, batch: int = ROTATE_BATCH) -> Rotation:
    """Re-seal every push config of ``store`` under the newest key, ``batch`` rows at a time.

    Rows are walked in key order (keyset paging) and rewritten in place only when they change
    (``UPDATE ... WHERE body = <what was read>``): a config the exchange replaced or deleted
    meanwhile is left as it is, never resurrected, and its order among the task's configs is
    kept. Running it again rewrites nothing.
    """
    import sqlalchemy as sa

    table = store.push_configs
    pc = table.c
    report = Rotation()
    last: tuple[str, str] | None = None
    update = (
        table.update()
        .where(
            pc.task_id == sa.bindparam("k_task"),
            pc.id == sa.bindparam("k_id"),
            pc.body == sa.bindparam("old"),
        )
        .values(body=sa.bindparam("new"))
    )
    while True:
        query = sa.select(pc.task_id, pc.id, pc.body).order_by(pc.task_id, pc.id).limit(batch)
        if last is not None:
            query = query.where(
                sa.or_(pc.task_id > last[0], sa.and_(pc.task_id == last[0], pc.id > last[1]))
            )
        with store.engine.begin() as conn:
            rows = list(conn.execute(query))
        if not rows:
            return report
        changes = []
        for row in rows:
            try:
                rotated = secrets.rotate(push_config_from_wire(json.loads(row.body)))
            except UnreadableSecretError:
                report.unreadable += 1
                continue
            if rotated is None:
                report.current += 1
                continue
            new = json.dumps(dump_push_config(rotated), separators=(",", ":"))
            changes.append({"k_task": row.task_id, "k_id": row.id, "old": row.body, "new": new})
        if changes:
            with store.engine.begin() as conn:  # one short transaction per batch
                for change in changes:  # one by one: each rowcount says if that row moved
                    if conn.execute(update, change).rowcount:
                        report.rotated += 1
                    else:
                        report.moved += 1
        last = (rows[-1].task_id, rows[-1].id)
