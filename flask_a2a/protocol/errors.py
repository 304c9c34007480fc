"""JSON-RPC and A2A errors, one class per code.

Each class carries its own ``code``, default ``message``, the ``google.rpc.ErrorInfo`` reason it
reports and the HTTP status it is answered with (200 for every JSON-RPC-level error; the few
refusals that happen before JSON-RPC exists use a real HTTP status). The code-to-class lookup is
built by scanning the subclasses, so there is no second table to keep in step. What the other
two bindings answer, HTTP+JSON and gRPC, is one table beside them (:data:`STATUSES`).
"""

from __future__ import annotations

import typing as t

ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"
ERROR_DOMAIN = "a2a-protocol.org"


class A2AError(Exception):
    """Base class: a refusal answered as a JSON-RPC error object."""

    #: JSON-RPC error code.
    code: t.ClassVar[int] = -32603
    #: Default human-readable message (the spec's wording, so clients can match on it).
    message: str = "Internal error"
    #: ``ErrorInfo.reason``; ``None`` sends no ``data`` at all.
    reason: t.ClassVar[str | None] = None
    #: HTTP status of the response that carries this error.
    http_status: t.ClassVar[int] = 200
    #: Answered as plain JSON even by a streaming method: a refusal the method makes before
    #: any stream could open (SubscribeToTask on a terminal task), as the official SDK does.
    before_stream: bool = False

    def __init__(
        self,
        message: str | None = None,
        *,
        metadata: t.Mapping[str, str] | None = None,
        field_violations: t.Sequence[tuple[str, str]] = (),
    ) -> None:
        if message is not None:
            self.message = message
        self.metadata = dict(metadata or {})
        self.field_violations = list(field_violations)
        super().__init__(self.message)

    def data(self) -> list[dict[str, t.Any]] | None:
        """The typed-details array of ``error.data``: ErrorInfo first, then BadRequest."""
        if self.reason is None:
            return None
        details: list[dict[str, t.Any]] = [
            {
                "@type": ERROR_INFO_TYPE,
                "reason": self.reason,
                "domain": ERROR_DOMAIN,
                "metadata": {k: str(v) for k, v in self.metadata.items()},
            }
        ]
        if self.field_violations:
            details.append(
                {
                    "@type": BAD_REQUEST_TYPE,
                    "fieldViolations": [
                        {"field": f, "description": d} for f, d in self.field_violations
                    ],
                }
            )
        return details

    def to_dict(self) -> dict[str, t.Any]:
        """The JSON-RPC ``error`` member."""
        out: dict[str, t.Any] = {"code": self.code, "message": self.message}
        data = self.data()
        if data is not None:
            out["data"] = data
        return out


class JSONParseError(A2AError):
    code = -32700
    message = "Invalid JSON payload"


class InvalidRequestError(A2AError):
    code = -32600
    message = "Request payload validation error"
    reason = "INVALID_REQUEST"


class MethodNotFoundError(A2AError):
    code = -32601
    message = "Method not found"


class InvalidParamsError(A2AError):
    code = -32602
    message = "Invalid parameters"
    reason = "INVALID_PARAMS"


class InternalError(A2AError):
    code = -32603
    message = "Internal error"
    reason = "INTERNAL_ERROR"


class TaskNotFoundError(A2AError):
    code = -32001
    message = "Task not found"
    reason = "TASK_NOT_FOUND"


class TaskNotCancelableError(A2AError):
    code = -32002
    message = "Task cannot be canceled"
    reason = "TASK_NOT_CANCELABLE"


class PushNotificationNotSupportedError(A2AError):
    code = -32003
    message = "Push notifications are not supported"
    reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"


class UnsupportedOperationError(A2AError):
    code = -32004
    message = "This operation is not supported"
    reason = "UNSUPPORTED_OPERATION"


class ContentTypeNotSupportedError(A2AError):
    code = -32005
    message = "Incompatible content types"
    reason = "CONTENT_TYPE_NOT_SUPPORTED"


class InvalidAgentResponseError(A2AError):
    code = -32006
    message = "Invalid agent response"
    reason = "INVALID_AGENT_RESPONSE"


class ExtendedAgentCardNotConfiguredError(A2AError):
    code = -32007
    message = "Extended agent card is not configured"
    reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"


class ExtensionSupportRequiredError(A2AError):
    code = -32008
    message = "Extension support is required"
    reason = "EXTENSION_SUPPORT_REQUIRED"


class VersionNotSupportedError(A2AError):
    code = -32009
    message = "Protocol version is not supported"
    reason = "VERSION_NOT_SUPPORTED"


class MalformedBodyError(A2AError):
    """The body could not be read as HTTP: a bad chunked encoding, or a client that left
    before sending all of it. Answered 400 (nobody may be there to read it)."""

    code = -31400
    message = "Malformed request body"
    http_status = 400


class UnauthenticatedError(A2AError):
    """No principal: the caller resolved to no owner. There is no anonymous posture."""

    code = -31401
    message = "Authentication required"
    reason = "UNAUTHENTICATED"
    http_status = 401


class ForbiddenError(A2AError):
    """The host app refused the caller before the exchange saw the request: its own CSRF,
    ban or permission check (``abort(403)``, or its 403 page), answered with its text."""

    code = -31403
    message = "Forbidden"
    reason = "FORBIDDEN"
    http_status = 403


class ForbiddenOriginError(ForbiddenError):
    """A browser ``Origin`` naming another authority, refused before the body is read."""

    code = -31403
    message = "Origin not allowed"
    reason = "FORBIDDEN_ORIGIN"
    http_status = 403


class NotFoundError(A2AError):
    """The host app answered "not found" on an endpoint of the exchange (its own hook's
    ``abort(404)``, or its 404 page), answered with its text."""

    code = -31404
    message = "Not found"
    reason = "NOT_FOUND"
    http_status = 404


class MethodNotAllowedError(A2AError):
    """Anything but POST on the endpoint (answered with ``Allow: POST``)."""

    code = -31405
    message = "Method not allowed; use POST"
    http_status = 405


class PayloadTooLargeError(A2AError):
    """A body over the cap; it is never parsed nor dispatched."""

    code = -31413
    message = "Request body too large"
    http_status = 413


class RateLimitedError(A2AError):
    """Too many requests: the host app's own rate limit (``abort(429)``, or its 429 page)."""

    code = -31429
    message = "Too many requests"
    reason = "RATE_LIMITED"
    http_status = 429


class StreamSeatsExhaustedError(RateLimitedError):
    """The owner holds every stream seat and the overflow policy is ``refuse``."""

    code = -31429
    message = "Too many open streams for this caller"
    reason = "STREAM_SEATS_EXHAUSTED"
    http_status = 429


#: Error class -> (HTTP status, google.rpc.Code name, gRPC status code name): the HTTP+JSON
#: binding's answer (its status, and the code its ``google.rpc.Status`` body names) beside the
#: gRPC binding's (``grpc.StatusCode`` by name: this layer imports no grpc). Spec §5.4 as
#: corrected in A2A 1.0.1 for the A2A errors (UnsupportedOperation, PushNotificationNotSupported,
#: VersionNotSupported: FAILED_PRECONDITION), the google.rpc mapping for the rest (the host's
#: own refusals among them: a hook's 403, 404, 429). Looked up along the class's MRO
#: (:func:`statuses_of`). A wrong verb has no google.rpc.Code over HTTP (UNIMPLEMENTED reads as
#: "no such method" and maps to 501): its status names the HTTP refusal, METHOD_NOT_ALLOWED.
STATUSES: t.Final[dict[type[A2AError], tuple[int, str, str]]] = {
    TaskNotFoundError: (404, "NOT_FOUND", "NOT_FOUND"),
    TaskNotCancelableError: (400, "FAILED_PRECONDITION", "FAILED_PRECONDITION"),
    PushNotificationNotSupportedError: (400, "FAILED_PRECONDITION", "FAILED_PRECONDITION"),
    UnsupportedOperationError: (400, "FAILED_PRECONDITION", "FAILED_PRECONDITION"),
    ContentTypeNotSupportedError: (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
    InvalidAgentResponseError: (500, "INTERNAL", "INTERNAL"),
    ExtendedAgentCardNotConfiguredError: (400, "FAILED_PRECONDITION", "FAILED_PRECONDITION"),
    ExtensionSupportRequiredError: (400, "FAILED_PRECONDITION", "FAILED_PRECONDITION"),
    VersionNotSupportedError: (400, "FAILED_PRECONDITION", "FAILED_PRECONDITION"),
    JSONParseError: (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
    InvalidRequestError: (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
    InvalidParamsError: (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
    MethodNotFoundError: (404, "NOT_FOUND", "UNIMPLEMENTED"),
    InternalError: (500, "INTERNAL", "INTERNAL"),
    MalformedBodyError: (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
    UnauthenticatedError: (401, "UNAUTHENTICATED", "UNAUTHENTICATED"),
    ForbiddenOriginError: (403, "PERMISSION_DENIED", "PERMISSION_DENIED"),
    ForbiddenError: (403, "PERMISSION_DENIED", "PERMISSION_DENIED"),
    NotFoundError: (404, "NOT_FOUND", "NOT_FOUND"),
    MethodNotAllowedError: (405, "METHOD_NOT_ALLOWED", "UNIMPLEMENTED"),
    PayloadTooLargeError: (413, "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED"),
    StreamSeatsExhaustedError: (429, "RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED"),
    RateLimitedError: (429, "RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED"),
}


class Statuses(t.NamedTuple):
    """An error's row of :data:`STATUSES`."""

    http: int
    rest: str
    grpc: str


def statuses_of(error: A2AError) -> Statuses:
    """The first row of :data:`STATUSES` along the error's MRO (500 INTERNAL for none)."""
    for cls in type(error).__mro__:
        row = STATUSES.get(cls)
        if row is not None:
            return Statuses(*row)
    return Statuses(500, "INTERNAL", "INTERNAL")


def _all_subclasses(cls: type[A2AError]) -> t.Iterator[type[A2AError]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def error_class_for_code(code: int) -> type[A2AError]:
    """The class for a JSON-RPC error code (clients raise what the server sent)."""
    for cls in _all_subclasses(A2AError):
        if cls.code == code:
            return cls
    return A2AError


#: The host app's refusal statuses, answered as these errors (:func:`host_refusal`).
HOST_REFUSALS: t.Final[dict[int, type[A2AError]]] = {
    400: MalformedBodyError,
    401: UnauthenticatedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    413: PayloadTooLargeError,
    429: RateLimitedError,
}


def host_refusal(status: int, text: str) -> A2AError:
    """What the host app's own refusal (a hook's ``abort``, an error page) on an endpoint of
    the exchange is answered as: the binding's error for its status, with the host's words.
    Another 4xx is a -31400; a 5xx is the -32603 it is."""
    cls = HOST_REFUSALS.get(status) or (InternalError if status >= 500 else MalformedBodyError)
    return cls(text or cls.message)


def _class_for(code: int, reason: object) -> type[A2AError]:
    """The class of a code; of two sharing one (-31429), the one naming ``reason``."""
    for cls in _all_subclasses(A2AError):
        if cls.code == code and reason is not None and cls.reason == reason:
            return cls
    return error_class_for_code(code)


def error_from_dict(error: t.Mapping[str, t.Any]) -> A2AError:
    """Rebuild an error received over the wire: the inverse of :meth:`A2AError.to_dict`
    (its class by code and reason, its message, the ErrorInfo metadata and the field
    violations)."""
    code = error.get("code")
    details = error.get("data")
    reason = next(
        (
            d.get("reason")
            for d in (details if isinstance(details, list) else ())
            if isinstance(d, dict) and d.get("@type") == ERROR_INFO_TYPE
        ),
        None,
    )
    cls = _class_for(code, reason) if isinstance(code, int) else A2AError
    exc = cls(str(error.get("message", cls.message)))
    for detail in details if isinstance(details, list) else ():
        if not isinstance(detail, dict):
            continue
        if detail.get("@type") == ERROR_INFO_TYPE and isinstance(detail.get("metadata"), dict):
            exc.metadata = {str(k): str(v) for k, v in detail["metadata"].items()}
        elif detail.get("@type") == BAD_REQUEST_TYPE:
            exc.field_violations = [
                (str(v.get("field", "")), str(v.get("description", "")))
                for v in detail.get("fieldViolations") or ()
                if isinstance(v, dict)
            ]
    return exc


# Run-side signals: raised inside a handler by TaskContext, never sent over the wire.


class TaskInterrupted(Exception):
    """Base for the reasons a run must stop mutating its task."""


class TaskCanceled(TaskInterrupted):
    """The task was canceled (by a client, by shutdown or by another replica)."""


class TaskTimedOut(TaskInterrupted):
    """The run went past ``A2A_TASK_TIMEOUT``."""


class TaskSettled(TaskInterrupted):
    """The task already reached a terminal or interrupted state in this run."""


class TaskVisibleError(RuntimeError):
    """``reply()`` came too late: the caller already has the task (or the handler changed
    it), so the answer must be the task; settle it instead (``task.complete(text)``)."""


class HandlerUsageError(TypeError):
    """A handler used the TaskContext wrongly (``artifact({...})``, an unusable return value).

    The library wrote the message, naming the fix, so unlike a handler's own exception text
    it is safe to show the caller as the task's status.
    """


class UnencodableDataError(ValueError):
    """Handler data that cannot be JSON-encoded (NaN, functions, cycles)."""


class TaskNotStored(Exception):
    """A run's change of its task could not be written (the store failed; the details are
    in the log, never in the task): a run that meets it settles FAILED "internal error".

    ``answer``: the store's own refusal for the caller (an :class:`A2AError` it raised, such
    as tables a migration has not made yet), answered when the task was never written."""

    def __init__(self, message: str, answer: A2AError | None = None) -> None:
        super().__init__(message)
        self.answer = answer
