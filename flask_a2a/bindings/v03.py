"""A2A v0.3 on the same endpoints: its method names, read into the exchange's v1.0 methods.

With ``"0.3"`` in ``A2A_PROTOCOL_VERSIONS`` the JSON-RPC binding also looks a v0.3 method up
in :func:`methods` (which table a request uses is ``checks.requested_version``'s rule). Each
entry reads the v0.3 params with ``protocol/v03.py``, calls the very v1.0 method of the
exchange with the v1.0 params, and writes the answer back in v0.3 shape: one exchange, one
task, whichever version made it. Streams are the v1.0 relay with each event rewritten on its
way out. Imports nothing of Flask.
"""

from __future__ import annotations

import json
import typing as t

from ..exchange.calls import Call, Method, Reply
from ..protocol import jsonrpc, v03, wire
from ..protocol.errors import InvalidParamsError, TaskNotFoundError

#: The version string a Call made over v0.3 carries (a push config it registers keeps it).
VERSION: t.Final = "0.3"


def no_id_error() -> InvalidParamsError:
    """What a v0.3 request without ``id`` naming a method it serves is answered (with ``"id":
    null``). JSON-RPC calls it a notification, which gets no answer; the v0.3 suite wants one,
    and the a2a-sdk 0.3 server answers -32602 (its request models require the id). It is never
    run: what it would change, its caller could not learn."""
    return InvalidParamsError(
        'Invalid parameters: id: a v0.3 request without "id" is a notification, which this '
        "server does not run",
        field_violations=[("id", "is required")],
    )


#: v0.3 methods that answer a stream (their JSON-RPC errors then come as one SSE event).
STREAMING_METHODS: t.Final = frozenset({"message/stream", "tasks/resubscribe"})


def _loaded(result: t.Any) -> t.Any:
    """A v1.0 method's result as plain JSON values (it may be pre-encoded text)."""
    return json.loads(result) if isinstance(result, str) else result


def _send_result(result: t.Any) -> dict[str, t.Any]:
    """``{"task": ...}`` or ``{"message": ...}`` as the bare v0.3 Task or Message."""
    return v03.dump_event(wire.event_from_wire(_loaded(result)))


def _task_result(result: t.Any) -> dict[str, t.Any]:
    return v03.dump_task(wire.task_from_wire(_loaded(result)))


def _push_result(result: t.Any) -> dict[str, t.Any]:
    return v03.dump_push_config(wire.push_config_from_wire(_loaded(result)))


def _object(params: t.Any) -> dict[str, t.Any]:
    return params if isinstance(params, dict) else {}


class _Methods:
    """The v0.3 method table over the exchange's v1.0 one."""

    def __init__(self, table: t.Mapping[str, Method]) -> None:
        self.table = table

    def _call(self, name: str, call: Call, params: dict[str, t.Any]) -> t.Any:
        return self.table[name](call._replace(params=params, protocol_version=VERSION))

    def send(self, call: Call) -> t.Any:
        params = v03.send_params(_object(call.params))
        return _send_result(self._call("SendMessage", call, params))

    def stream(self, call: Call) -> t.Any:
        params = v03.send_params(_object(call.params))
        return translate_stream(self._call("SendStreamingMessage", call, params))

    def get_task(self, call: Call) -> t.Any:
        params = _object(call.params)
        v1 = {"id": v03.task_id_param(params)}
        if params.get("historyLength") is not None:
            v1["historyLength"] = params["historyLength"]
        return _task_result(self._call("GetTask", call, v1))

    def cancel(self, call: Call) -> t.Any:
        v1 = {"id": v03.task_id_param(_object(call.params))}
        return _task_result(self._call("CancelTask", call, v1))

    def resubscribe(self, call: Call) -> t.Any:
        v1 = {"id": v03.task_id_param(_object(call.params))}
        return translate_stream(self._call("SubscribeToTask", call, v1))

    def set_push(self, call: Call) -> t.Any:
        params = _object(call.params)
        task_id = params.get("taskId")
        v1 = v03.push_config_params(
            params.get("pushNotificationConfig"), "pushNotificationConfig", task_id
        )
        # v0.3 servers (the a2a-sdk 0.3 among them) name a config without an id by its task.
        if "id" not in v1 and isinstance(task_id, str):
            v1["id"] = task_id
        return _push_result(self._call("CreateTaskPushNotificationConfig", call, v1))

    def get_push(self, call: Call) -> t.Any:
        params = _object(call.params)
        config = asked_config(
            lambda name, v1: self._call(name, call, v1),
            v03.task_id_param(params),
            params.get("pushNotificationConfigId"),
        )
        return v03.dump_push_config(wire.push_config_from_wire(config))

    def list_push(self, call: Call) -> t.Any:
        task_id = v03.task_id_param(_object(call.params))
        out: list[dict[str, t.Any]] = []
        token = None
        for _ in range(1000):  # bounded: a task holds A2A_MAX_PUSH_CONFIGS_PER_TASK configs
            v1: dict[str, t.Any] = {"taskId": task_id}
            if token:
                v1["pageToken"] = token
            page = _loaded(self._call("ListTaskPushNotificationConfigs", call, v1))
            out.extend(_push_result(c) for c in page.get("configs") or [])
            token = page.get("nextPageToken")
            if not token:
                break
        return out

    def delete_push(self, call: Call) -> t.Any:
        params = _object(call.params)
        v1 = {"taskId": v03.task_id_param(params), "id": params.get("pushNotificationConfigId")}
        self._call("DeleteTaskPushNotificationConfig", call, v1)
        return None

    def extended_card(self, call: Call) -> t.Any:
        return self._call("GetExtendedAgentCard", call, {})


def asked_config(
    call: t.Callable[[str, dict[str, t.Any]], t.Any], task_id: t.Any, config_id: t.Any
) -> dict[str, t.Any]:
    """The config (v1.0 JSON) a v0.3 ``tasks/pushNotificationConfig/get`` asks for; ``call``
    runs a v1.0 method with its params.

    The config named, if the task has it. v0.3 also let a client ask for "the" config of a
    task, and v0.3 clients rely on it: without ``pushNotificationConfigId`` this is the task's
    first config; with one the task does not have, the task's only config when it has exactly
    one. The a2a-sdk 0.3 server answers its first config whatever the id (its REST client
    sends ``None`` for a missing one, the v0.3 suite ``default`` for a config it set without
    an id, which v0.3 names after its task); with several, naming none of them is -32001.
    """
    if config_id is not None:
        try:
            found = _loaded(
                call("GetTaskPushNotificationConfig", {"taskId": task_id, "id": config_id})
            )
            return t.cast(dict[str, t.Any], found)
        except TaskNotFoundError:
            pass  # no such config (or no such task: listing raises that again)
    listed = _loaded(call("ListTaskPushNotificationConfigs", {"taskId": task_id}))
    configs = listed.get("configs") or []
    lone = len(configs) == 1 and not listed.get("nextPageToken")
    if configs and (config_id is None or lone):
        return t.cast(dict[str, t.Any], configs[0])
    raise TaskNotFoundError("Push notification config not found")


#: Each v0.3 method, and the attribute of a method object (this module's, ``rest_v03``'s) that
#: serves it.
SERVED_BY: t.Final = {
    "message/send": "send",
    "message/stream": "stream",
    "tasks/get": "get_task",
    "tasks/cancel": "cancel",
    "tasks/resubscribe": "resubscribe",
    "tasks/pushNotificationConfig/set": "set_push",
    "tasks/pushNotificationConfig/get": "get_push",
    "tasks/pushNotificationConfig/list": "list_push",
    "tasks/pushNotificationConfig/delete": "delete_push",
    "agent/getAuthenticatedExtendedCard": "extended_card",
}


def table_of(served: object) -> dict[str, Method]:
    """The v0.3 method table of ``served``, a method object with every :data:`SERVED_BY`."""
    return {name: getattr(served, attr) for name, attr in SERVED_BY.items()}


def methods(table: t.Mapping[str, Method]) -> dict[str, Method]:
    """The v0.3 method table, each entry calling the v1.0 method of ``table``."""
    return table_of(_Methods(table))


# --------------------------------------------------------------------------- streams

_DATA: t.Final = b"data: "


def translate_stream(reply: Reply, rewrite: t.Callable[[t.Any], t.Any] | None = None) -> Reply:
    """The v1.0 stream with each event rewritten as v0.3 (keep-alives pass as they are).

    ``rewrite``: one event's JSON (parsed) -> the v0.3 one; by default a JSON-RPC response's
    v1.0 result becomes the v0.3 result (``rest_v03.py`` passes its own, for bare events).
    """
    if isinstance(reply.body, str):
        return reply
    return Reply(reply.status, reply.headers, _translated(reply.body, rewrite or _v03_response))


def _translated(body: t.Iterator[bytes], rewrite: t.Callable[[t.Any], t.Any]) -> t.Iterator[bytes]:
    try:
        for chunk in body:
            if chunk.startswith(_DATA):
                doc = rewrite(json.loads(chunk[len(_DATA) :]))
                chunk = _DATA + jsonrpc.encode(doc).encode() + b"\n\n"
            yield chunk
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()


def _v03_response(response: t.Any) -> t.Any:
    """A JSON-RPC response holding a v1.0 StreamResponse as the v0.3 one (an error as is)."""
    if isinstance(response, dict) and "result" in response:
        response["result"] = v03.dump_event(wire.event_from_wire(response["result"]))
    return response
