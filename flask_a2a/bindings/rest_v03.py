"""A2A v0.3's HTTP+JSON routes (``{A2A_REST_PATH}/v1/...``) over the exchange's v1.0 methods.

Served when ``A2A_PROTOCOL_VERSIONS`` holds ``0.3``: ``extension.py`` hands a REST path that
starts with ``v1/`` here instead of to ``rest.py`` (so, with 0.3 on, ``v1`` is no tenant
prefix). A request runs the same checks as every other (``checks.py``: Origin gate, body cap,
content type, principal, ``A2A-Version`` by ``checks.requested_version``'s rule, extensions),
its body is read with ``protocol/v03_rest.py`` into the v1.0 params, the v1.0 method runs, and
its answer is written back as v0.3 ProtoJSON; errors are the ``google.rpc.Status`` bodies of
``rest.py`` (a v0.3 client reads only the HTTP status). Imports nothing of Flask.
"""

from __future__ import annotations

import json
import typing as t

from ..config import Settings
from ..exchange.calls import Call, HTTPRequest, Method, Reply
from ..protocol import jsonrpc, v03_rest, wire
from ..protocol.errors import A2AError, MethodNotAllowedError, MethodNotFoundError
from ..protocol.extensions import Activation
from ..protocol.scrub import scrub
from .checks import admit, check_origin, finish, internal_error, invoke, preflight
from .rest import JSON_HEADERS, Body, body_params, error_reply, query_params
from .v03 import VERSION, asked_config, table_of, translate_stream

#: The prefix of every v0.3 route below the REST mount.
PREFIX: t.Final = "v1/"


def _route(path: str, verb: str) -> tuple[str, dict[str, str], Body]:
    """(the v0.3 method, the path's params, the body) for ``path`` below ``v1/``."""
    found: dict[str, tuple[str, Body]] | None = None
    params: dict[str, str] = {}
    segments = path.split("/")
    n = len(segments)
    head = segments[0]
    if n == 1 and head == "message:send":
        found = {"POST": ("message/send", "required")}
    elif n == 1 and head == "message:stream":
        found = {"POST": ("message/stream", "required")}
    elif n == 1 and head == "card":
        found = {"GET": ("agent/getAuthenticatedExtendedCard", "none")}
    elif head == "tasks" and n == 2:
        task = segments[1]
        if task.endswith(":cancel"):
            found, params = {"POST": ("tasks/cancel", "optional")}, {"id": task[:-7]}
        elif task.endswith(":subscribe"):
            # The proto says GET (the v0.3 client's verb); the spec's table says POST.
            found = {
                "GET": ("tasks/resubscribe", "none"),
                "POST": ("tasks/resubscribe", "optional"),
            }
            params = {"id": task[:-10]}
        else:
            found, params = {"GET": ("tasks/get", "none")}, {"id": task}
    elif head == "tasks" and n == 3 and segments[2] == "pushNotificationConfigs":
        found = {
            "POST": ("tasks/pushNotificationConfig/set", "required"),
            "GET": ("tasks/pushNotificationConfig/list", "none"),
        }
        params = {"id": segments[1]}
    elif head == "tasks" and n == 4 and segments[2] == "pushNotificationConfigs":
        found = {
            "GET": ("tasks/pushNotificationConfig/get", "none"),
            "DELETE": ("tasks/pushNotificationConfig/delete", "none"),
        }
        params = {"id": segments[1], "configId": segments[3]}
    if found is None or not all(params.values()):
        raise MethodNotFoundError(f"No A2A v0.3 route at {scrub(PREFIX + path)[:100]!r}")
    if verb not in found:
        allowed = ", ".join(found)
        raise MethodNotAllowedError(
            f"Method not allowed; use {allowed}", metadata={"allow": allowed}
        )
    name, body = found[verb]
    return name, params, body


def _loaded(result: t.Any) -> t.Any:
    return json.loads(result) if isinstance(result, str) else result


class _Methods:
    """Each v0.3 route as a call of the v1.0 method; params are the route's and the body's."""

    def __init__(self, table: t.Mapping[str, Method]) -> None:
        self.table = table

    def _call(self, name: str, call: Call, params: dict[str, t.Any]) -> t.Any:
        return _loaded(self.table[name](call._replace(params=params, protocol_version=VERSION)))

    def send(self, call: Call) -> t.Any:
        result = self._call("SendMessage", call, v03_rest.send_params(call.params))
        return v03_rest.dump_event(wire.event_from_wire(result))

    def stream(self, call: Call) -> t.Any:
        params = v03_rest.send_params(call.params)
        return translate_stream(
            self.table["SendStreamingMessage"](
                call._replace(params=params, protocol_version=VERSION)
            ),
            _v03_event,
        )

    def get_task(self, call: Call) -> t.Any:
        params = {"id": call.params["id"]}
        for key in ("historyLength", "history_length"):  # ProtoJSON's two spellings
            if key in call.params:
                params["historyLength"] = call.params[key]
        return v03_rest.dump_task(wire.task_from_wire(self._call("GetTask", call, params)))

    def cancel(self, call: Call) -> t.Any:
        task = self._call("CancelTask", call, {"id": call.params["id"]})
        return v03_rest.dump_task(wire.task_from_wire(task))

    def resubscribe(self, call: Call) -> t.Any:
        return translate_stream(
            self.table["SubscribeToTask"](
                call._replace(params={"id": call.params["id"]}, protocol_version=VERSION)
            ),
            _v03_event,
        )

    def set_push(self, call: Call) -> t.Any:
        params = v03_rest.create_push_params(call.params, call.params["id"])
        made = self._call("CreateTaskPushNotificationConfig", call, params)
        return v03_rest.dump_push_config(wire.push_config_from_wire(made))

    def get_push(self, call: Call) -> t.Any:
        got = asked_config(
            lambda name, v1: self._call(name, call, v1), call.params["id"], call.params["configId"]
        )
        return v03_rest.dump_push_config(wire.push_config_from_wire(got))

    def list_push(self, call: Call) -> t.Any:
        params = {k: v for k, v in call.params.items() if k in ("pageSize", "pageToken")}
        listed = self._call(
            "ListTaskPushNotificationConfigs", call, {**params, "taskId": call.params["id"]}
        )
        out: dict[str, t.Any] = {
            "configs": [
                v03_rest.dump_push_config(wire.push_config_from_wire(c))
                for c in listed.get("configs") or []
            ]
        }
        if listed.get("nextPageToken"):
            out["nextPageToken"] = listed["nextPageToken"]
        return out

    def delete_push(self, call: Call) -> t.Any:
        params = {"taskId": call.params["id"], "id": call.params["configId"]}
        self._call("DeleteTaskPushNotificationConfig", call, params)
        return {}

    def extended_card(self, call: Call) -> t.Any:
        return self._call("GetExtendedAgentCard", call, {})


def methods(table: t.Mapping[str, Method]) -> dict[str, Method]:
    """The v0.3 REST method table over the v1.0 ``table``."""
    return table_of(_Methods(table))


def handle(
    http: HTTPRequest,
    path: str,
    settings: Settings,
    table: t.Mapping[str, Method],
    extensions: Activation | None = None,
) -> Reply:
    """One v0.3 REST request (``path`` below ``v1/``); ``table``: :func:`methods`."""
    activated: tuple[str, ...] = ()
    try:
        if http.method == "OPTIONS" and http.headers.get("Origin") is not None:
            return preflight(http, settings, "GET, POST, DELETE", refuse=error_reply)
        check_origin(http, settings)  # before the body is read
        name, path_params, body = _route(path, http.method)
        params = query_params(http.query) if body == "none" else body_params(http, settings, body)
        params.update(path_params)
        principal, method = admit(http, {}, name, {VERSION: table})
        if extensions is not None:
            activated = extensions.activate(http.headers, name)
        call = Call(None, params, principal, http, activated, binding="rest")
        result = invoke(method, name, call)
        if isinstance(result, Reply):
            reply = result
        else:
            reply = Reply(200, list(JSON_HEADERS), jsonrpc.encode_result(result))
    except A2AError as exc:
        reply = error_reply(exc)
    except Exception as exc:
        reply = error_reply(internal_error(exc))
    return finish(http, reply, activated)


_EVENT_KEYS: t.Final = ("task", "message", "statusUpdate", "artifactUpdate")


def _v03_event(doc: t.Any) -> t.Any:
    """A bare v1.0 StreamResponse as the v0.3 one (anything else, an error, as it is)."""
    if isinstance(doc, dict) and any(key in doc for key in _EVENT_KEYS):
        return v03_rest.dump_event(wire.event_from_wire(doc))
    return doc
