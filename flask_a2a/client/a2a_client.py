"""A synchronous A2A v1.0 client on requests: one Session, a timeout on every call, any
binding (JSON-RPC, HTTP+JSON, or gRPC with the ``grpc`` extra; chosen from the card:
``bindings.py``).

>>> client = A2AClient.from_card_url("http://127.0.0.1:5000", token="alice-token")
>>> task = client.call("echo", text="hello")
>>> with client.stream_call("countdown", data={"steps": 3}) as events:
...     for event in events:
...         print(event)

Errors the server answers with come back as the classes the server raised
(:mod:`flask_a2a.protocol.errors`), so ``except TaskNotFoundError`` reads the same on both
sides; that includes the HTTP-level refusals (401, 403, 413, 429), whose bodies are JSON-RPC
errors too.
Transport failures stay ``requests`` exceptions (``requests.Timeout``,
``requests.ConnectionError``); an answer that is not A2A at all raises :class:`A2AClientError`.
A client is meant for one thread at a time, like the ``requests.Session`` it holds.
"""

from __future__ import annotations

import dataclasses
import typing as t
from datetime import datetime
from urllib.parse import urlsplit

import requests

from ..card.document import AGENT_CARD_PATH
from ..protocol import wire
from ..protocol.model import (
    UNSET,
    AuthenticationInfo,
    Message,
    PushConfig,
    Task,
    TaskState,
)
from . import bindings
from . import v03 as v03_client
from .bindings import Interface, Transport
from .messages import build_message, skill_message
from .requester import BearerAuth, Requester
from .sse import A2AClientError as A2AClientError
from .sse import EventStream as EventStream
from .sse import StreamEvent as StreamEvent
from .sse import Timeout as Timeout

PROTOCOL_VERSION: t.Final = "1.0"
#: Reads, lists, cancels, push configs, the card.
DEFAULT_TIMEOUT: t.Final = (5.0, 30.0)
#: A blocking SendMessage waits for the run, which the server bounds by A2A_TASK_TIMEOUT (300 s).
DEFAULT_SEND_TIMEOUT: t.Final = (5.0, 330.0)
#: Between two frames of a stream; the server sends a keep-alive every 15 s by default.
DEFAULT_STREAM_TIMEOUT: t.Final = (5.0, 60.0)


@dataclasses.dataclass(frozen=True)
class TaskListPage:
    """One ListTasks page; ``next_page_token`` is empty on the last page."""

    tasks: tuple[Task, ...]
    next_page_token: str
    page_size: int
    total_size: int


@dataclasses.dataclass(frozen=True)
class PushConfigPage:
    """One ListTaskPushNotificationConfigs page; ``next_page_token`` is empty on the last."""

    configs: tuple[PushConfig, ...]
    next_page_token: str


class A2AClient:
    """Calls one A2A v1.0 agent over one of its interfaces.

    :param endpoint: the interface URL (``http://host/a2a``, ``http://host/a2a/rest``, or a
        gRPC ``host:port``); see :meth:`from_card_url` and :meth:`connect` to find it (and its
        binding) from the card.
    :param binding: ``JSONRPC`` (default), ``HTTP+JSON`` (also ``rest``) or ``GRPC`` (the
        ``grpc`` extra; its headers go as metadata); with :meth:`from_card_url`, the binding to
        pick from the card.
    :param token: sent as ``Authorization: Bearer <token>``.
    :param auth: anything ``requests`` accepts as ``auth=`` (instead of ``token``).
    :param timeout: (connect, read) for every call that does not wait for a run.
    :param send_timeout: for a blocking SendMessage, which answers when the run ends.
    :param stream_timeout: for streams: the read part bounds the silence between two frames,
        so keep it above the server's keep-alive interval.
    :param tenant: sent as ``tenant`` in every request's params.
    :param headers: sent with every request (over the client's own; an ``Authorization``
        here wins over ``token``).
    :param session: a ``requests.Session`` to use (its owner closes it); a new one otherwise.
        The client writes nothing onto it: its headers and credentials go with each request,
        so clients of different users may share one session.
    :param transports: this client's registry of bindings, ``protocolBinding`` -> the class
        that speaks it (``bindings.Transport``, made with ``(url, requester, tenant)``), in
        the order the client prefers them; ``flask_a2a.client.bindings.TRANSPORTS`` (JSON-RPC,
        HTTP+JSON) when not given. A client told no ``binding`` speaks the first.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        token: str | None = None,
        auth: t.Any = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        send_timeout: Timeout = DEFAULT_SEND_TIMEOUT,
        stream_timeout: Timeout = DEFAULT_STREAM_TIMEOUT,
        tenant: str | None = None,
        headers: t.Mapping[str, str] | None = None,
        session: requests.Session | None = None,
        binding: str | None = None,
        transports: bindings.Transports | None = None,
    ) -> None:
        if token is not None and auth is not None:
            raise ValueError("pass token= or auth=, not both")
        self.timeout = timeout
        self.send_timeout = send_timeout
        self.stream_timeout = stream_timeout
        self.tenant = tenant
        #: The bindings this client speaks, and the transport class of each.
        self.transports: bindings.Transports = (
            transports if transports is not None else bindings.TRANSPORTS
        )
        #: The agent card, once fetched (by :meth:`from_card_url` or :meth:`get_agent_card`).
        self.card: dict[str, t.Any] | None = None
        self.card_url = _origin(endpoint) + AGENT_CARD_PATH
        self._owns_session = session is None
        #: The ``requests.Session`` the calls go through; the client never changes it.
        self.session = session if session is not None else requests.Session()
        own = {
            "A2A-Version": PROTOCOL_VERSION,
            "Accept": "application/json, application/a2a+json, text/event-stream",
            **(headers or {}),
        }
        if token is not None and "Authorization" not in own:  # a header given wins, as before
            auth = BearerAuth(token)
        #: Each request, with this client's headers and credentials (``requester.py``).
        self.http = Requester(self.session, own, auth)
        #: How the client talks to the agent (one binding's wire; see ``bindings.py``).
        named = bindings.binding_name(binding or next(iter(self.transports)), self.transports)
        self.transport: Transport = bindings.transport(
            Interface(endpoint, named), self.http, tenant, self.transports
        )

    @property
    def endpoint(self) -> str:
        """The interface URL the client talks to."""
        return self.transport.url

    @property
    def binding(self) -> str:
        """The ``protocolBinding`` it speaks: ``JSONRPC`` or ``HTTP+JSON``."""
        return self.transport.binding

    def use(self, interface: Interface) -> None:
        """Talk to ``interface`` from now on (its tenant unless the client was given one)."""
        previous = self.transport
        self.transport = bindings.transport(interface, self.http, self.tenant, self.transports)
        _close_transport(previous)

    # ------------------------------------------------------------------ building

    @classmethod
    def from_card_url(cls, url: str, **options: t.Any) -> A2AClient:
        """Fetch the agent card at ``url`` (a base URL or the card's own URL) and use the
        first interface of it this client speaks (``binding=`` narrows it to one binding),
        as the official SDK picks: the card's order is the agent's preference."""
        stripped = url.rstrip("/")
        card_url = stripped if stripped.endswith(AGENT_CARD_PATH) else stripped + AGENT_CARD_PATH
        binding = options.get("binding")
        client = cls(card_url, **options)
        try:
            card = client.get_agent_card(card_url)
            try:
                client.use(bindings.choose(card, card_url, binding, client.transports))
            except A2AClientError:
                # No 1.x interface: an agent that serves JSON-RPC in v0.3 only is spoken to in
                # v0.3 (client/v03.py), unless another binding was asked for.
                legacy = v03_client.legacy_endpoint(card, card_url)
                if legacy is None or (
                    binding and bindings.binding_name(binding, client.transports) != "JSONRPC"
                ):
                    raise
                client.transport = v03_client.V03Transport(legacy, client.http)
        except BaseException:
            client.close()
            raise
        return client

    @classmethod
    def connect(cls, url: str, **options: t.Any) -> A2AClient:
        """A base URL or a card URL resolves the card; any other path is the endpoint.

        For an endpoint the binding is ``binding=`` when given, else the one the agent's card
        (at the URL's origin) lists at that URL — so ``…/a2a/rest`` is spoken as HTTP+JSON —
        else JSON-RPC.
        """
        path = urlsplit(url).path
        if path in ("", "/") or path.rstrip("/").endswith(AGENT_CARD_PATH):
            return cls.from_card_url(url, **options)
        client = cls(url, **options)
        if options.get("binding") is None:
            try:
                card = client.get_agent_card()
            except (A2AClientError, requests.RequestException):
                return client  # no card to ask: JSON-RPC, as before
            except BaseException:
                client.close()
                raise
            listed = bindings.at_url(card, client.card_url, url, client.transports)
            if listed is not None:
                client.use(listed)
        return client

    def close(self) -> None:
        _close_transport(self.transport)  # a gRPC channel
        if self._owns_session:
            self.session.close()

    def __enter__(self) -> A2AClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<A2AClient {self.binding} {self.endpoint}>"

    # ------------------------------------------------------------------ the card

    def get_agent_card(self, url: str | None = None) -> dict[str, t.Any]:
        """GET the public agent card (JSON), and keep it in :attr:`card`."""
        url = url or self.card_url
        response = self.http.get(url, timeout=self.timeout, headers={"Accept": "application/json"})
        with response:
            if response.status_code != 200:
                raise A2AClientError(
                    f"no agent card at {url}: HTTP {response.status_code}", response.status_code
                )
            try:
                card = response.json()
            except ValueError:
                raise A2AClientError(f"the agent card at {url} is not JSON", 200) from None
        if not isinstance(card, dict):
            raise A2AClientError(f"the agent card at {url} is not a JSON object", 200)
        self.card, self.card_url = card, url
        return card

    def get_extended_agent_card(self) -> dict[str, t.Any]:
        return t.cast(dict[str, t.Any], self._call("GetExtendedAgentCard", {}))

    # ------------------------------------------------------------------ messages

    def send_message(
        self,
        message: Message | str,
        *,
        history_length: int | None = None,
        return_immediately: bool = False,
        accepted_output_modes: t.Sequence[str] | None = None,
        push_config: t.Mapping[str, t.Any] | None = None,
        metadata: t.Mapping[str, t.Any] | None = None,
    ) -> Task | Message:
        """SendMessage. Unless ``return_immediately``, the answer comes when the run ends (or
        pauses), so this waits up to ``send_timeout``."""
        params = self._send_params(
            message,
            history_length,
            return_immediately,
            accepted_output_modes,
            push_config,
            metadata,
        )
        timeout = self.timeout if return_immediately else self.send_timeout
        return t.cast(
            "Task | Message", wire.event_from_wire(self._call("SendMessage", params, timeout))
        )

    def send_streaming_message(
        self,
        message: Message | str,
        *,
        history_length: int | None = None,
        accepted_output_modes: t.Sequence[str] | None = None,
        push_config: t.Mapping[str, t.Any] | None = None,
        metadata: t.Mapping[str, t.Any] | None = None,
    ) -> EventStream:
        """SendStreamingMessage: the task snapshot, then each event until the final one."""
        params = self._send_params(
            message, history_length, False, accepted_output_modes, push_config, metadata
        )
        return self._stream("SendStreamingMessage", params)

    def call(
        self,
        skill: str,
        text: str | None = None,
        *,
        data: t.Any = UNSET,
        operation: str | None = None,
        arguments: t.Mapping[str, t.Any] | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        **options: t.Any,
    ) -> Task:
        """Invoke ``skill`` by name and return its task as the run left it.

        ``client.call("echo", "hi")``; an entity skill:
        ``client.call("entity.invoices", operation="list", arguments={"limit": 10})``.
        ``options`` go to :meth:`send_message` (``history_length``, ``return_immediately``…).
        """
        message = skill_message(
            skill,
            text,
            data=data,
            operation=operation,
            arguments=arguments,
            task_id=task_id,
            context_id=context_id,
        )
        result = self.send_message(message, **options)
        if not isinstance(result, Task):
            raise A2AClientError("the agent answered with a message, not a task")
        return result

    def stream_call(
        self,
        skill: str,
        text: str | None = None,
        *,
        data: t.Any = UNSET,
        operation: str | None = None,
        arguments: t.Mapping[str, t.Any] | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        **options: t.Any,
    ) -> EventStream:
        """:meth:`call`, streamed: an iterator of the task's events."""
        message = skill_message(
            skill,
            text,
            data=data,
            operation=operation,
            arguments=arguments,
            task_id=task_id,
            context_id=context_id,
        )
        return self.send_streaming_message(message, **options)

    # ------------------------------------------------------------------ tasks

    def get_task(self, task_id: str, *, history_length: int | None = None) -> Task:
        params: dict[str, t.Any] = {"id": task_id}
        if history_length is not None:
            params["historyLength"] = history_length
        return wire.task_from_wire(self._call("GetTask", params))

    def list_tasks(
        self,
        *,
        context_id: str | None = None,
        status: TaskState | str | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
        history_length: int | None = None,
        status_timestamp_after: datetime | None = None,
        include_artifacts: bool | None = None,
    ) -> TaskListPage:
        """One page of the caller's tasks, newest status first."""
        params: dict[str, t.Any] = {}
        if context_id:
            params["contextId"] = context_id
        if status is not None:
            params["status"] = status.value if isinstance(status, TaskState) else status
        if page_size is not None:
            params["pageSize"] = page_size
        if page_token:
            params["pageToken"] = page_token
        if history_length is not None:
            params["historyLength"] = history_length
        if status_timestamp_after is not None:
            params["statusTimestampAfter"] = wire.format_timestamp(status_timestamp_after)
        if include_artifacts is not None:
            params["includeArtifacts"] = include_artifacts
        result = self._call("ListTasks", params)
        return TaskListPage(
            tasks=tuple(wire.task_from_wire(x) for x in result.get("tasks") or ()),
            next_page_token=result.get("nextPageToken") or "",
            page_size=int(result.get("pageSize") or 0),
            total_size=int(result.get("totalSize") or 0),
        )

    def iter_tasks(self, *, max_pages: int = 1000, **filters: t.Any) -> t.Iterator[Task]:
        """Every task :meth:`list_tasks` finds, following page tokens (at most ``max_pages``)."""
        token = None
        for _ in range(max_pages):
            page = self.list_tasks(page_token=token, **filters)
            yield from page.tasks
            if not page.next_page_token:
                return
            token = page.next_page_token

    def cancel_task(self, task_id: str, *, metadata: t.Mapping[str, t.Any] | None = None) -> Task:
        params: dict[str, t.Any] = {"id": task_id}
        if metadata is not None:
            params["metadata"] = dict(metadata)
        return wire.task_from_wire(self._call("CancelTask", params))

    def subscribe_to_task(self, task_id: str) -> EventStream:
        """SubscribeToTask: the task's current snapshot, then each event until the final one."""
        return self._stream("SubscribeToTask", {"id": task_id})

    # ------------------------------------------------------------------ push configs

    def create_task_push_notification_config(
        self,
        task_id: str,
        url: str,
        *,
        token: str | None = None,
        config_id: str | None = None,
        authentication: AuthenticationInfo | None = None,
    ) -> PushConfig:
        params: dict[str, t.Any] = {"taskId": task_id, "url": url}
        if config_id:
            params["id"] = config_id
        if token:
            params["token"] = token
        if authentication is not None:
            auth: dict[str, t.Any] = {"scheme": authentication.scheme}
            if authentication.credentials:
                auth["credentials"] = authentication.credentials
            params["authentication"] = auth
        result = self._call("CreateTaskPushNotificationConfig", params)
        return wire.push_config_from_wire(result)

    def get_task_push_notification_config(self, task_id: str, config_id: str) -> PushConfig:
        params = {"taskId": task_id, "id": config_id}
        return wire.push_config_from_wire(self._call("GetTaskPushNotificationConfig", params))

    def list_task_push_notification_configs(
        self, task_id: str, *, page_size: int | None = None, page_token: str | None = None
    ) -> PushConfigPage:
        params: dict[str, t.Any] = {"taskId": task_id}
        if page_size is not None:
            params["pageSize"] = page_size
        if page_token:
            params["pageToken"] = page_token
        result = self._call("ListTaskPushNotificationConfigs", params)
        return PushConfigPage(
            configs=tuple(wire.push_config_from_wire(c) for c in result.get("configs") or ()),
            next_page_token=result.get("nextPageToken") or "",
        )

    def delete_task_push_notification_config(self, task_id: str, config_id: str) -> None:
        self._call("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": config_id})

    # ------------------------------------------------------------------ the wire

    def _send_params(
        self,
        message: Message | str,
        history_length: int | None,
        return_immediately: bool,
        accepted_output_modes: t.Sequence[str] | None,
        push_config: t.Mapping[str, t.Any] | None,
        metadata: t.Mapping[str, t.Any] | None,
    ) -> dict[str, t.Any]:
        if isinstance(message, str):
            message = build_message(message)
        config: dict[str, t.Any] = {}
        if history_length is not None:
            config["historyLength"] = history_length
        if return_immediately:
            config["returnImmediately"] = True
        if accepted_output_modes:
            config["acceptedOutputModes"] = list(accepted_output_modes)
        if push_config is not None:
            config["taskPushNotificationConfig"] = dict(push_config)
        params: dict[str, t.Any] = {"message": wire.dump_message(message)}
        if config:
            params["configuration"] = config
        if metadata is not None:
            params["metadata"] = dict(metadata)
        return params

    def _call(self, method: str, params: dict[str, t.Any], timeout: Timeout | None = None) -> t.Any:
        return self.transport.call(method, params, timeout or self.timeout)

    def _stream(self, method: str, params: dict[str, t.Any]) -> EventStream:
        return self.transport.stream(method, params, self.stream_timeout)


def jsonrpc_endpoint(card: t.Mapping[str, t.Any], card_url: str) -> str:
    """The card's JSON-RPC 1.x interface URL, absolute."""
    return bindings.choose(card, card_url, bindings.JSONRPC).url


def _origin(url: str) -> str:
    """An HTTP URL's origin; a gRPC ``host:port`` has none (``""``: its card is not there)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return ""
    return f"{parts.scheme}://{parts.netloc}"


def _close_transport(transport: Transport) -> None:
    close = getattr(transport, "close", None)
    if close is not None:
        close()
