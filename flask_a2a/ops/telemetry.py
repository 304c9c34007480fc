"""OpenTelemetry spans: one per exchange method call, one per run, one per store call and push.

The ``otel`` extra (``opentelemetry-api``), imported once here. Without it every hook is a plain
no-op; with it, spans are recorded only once the host has set a tracer provider (the SDK), so the
API alone costs one ``isinstance`` per hook. The spans nest in whatever span is current in the
request (the host's ``FlaskInstrumentor`` server span); a run, which runs in another greenlet or
thread, gets the request's context passed explicitly, and a run that outlives its request
(``returnImmediately``) starts a trace of its own with a link back to the request's span.

Attributes carry ids, names, states and codes only: never a message body, a credential, a token
or a URL's query.
"""

from __future__ import annotations

import json
import os
import typing as t

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
except ImportError:  # the otel extra is not installed: every hook below is a no-op
    trace = None  # type: ignore[assignment]

#: The otel extra is importable (spans may record once the host sets a tracer provider).
AVAILABLE: t.Final = trace is not None

if t.TYPE_CHECKING:
    from types import TracebackType

TRACER_NAME: t.Final = "flask_a2a"
#: Where the exchange puts a task's skill id in its metadata (runs.py's SKILL_METADATA_KEY).
_SKILL_KEY: t.Final = "flask_a2a.skill"


class SpanLike(t.Protocol):
    def set_attribute(self, key: str, value: t.Any) -> None: ...


class _NoSpan:
    """What every hook hands out when nothing records: a span and a context manager at once."""

    def set_attribute(self, key: str, value: t.Any) -> None:
        pass

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


NO_SPAN: t.Final = _NoSpan()

_tracer: t.Any = None
_provider: t.Any = None


#: A provider is set (it never changes back: OpenTelemetry sets the global provider once).
_set = False
#: The API keeps its global provider in ``trace._TRACER_PROVIDER`` (None until one is set):
#: read as an attribute, without a ``getattr`` call, on every hook of every request.
_SLOT = AVAILABLE and hasattr(trace, "_TRACER_PROVIDER")
#: ``OTEL_PYTHON_TRACER_PROVIDER`` names a provider the API builds at its first lookup.
_from_env = AVAILABLE and bool(os.environ.get("OTEL_PYTHON_TRACER_PROVIDER"))


def recording() -> bool:
    """True when the host set a tracer provider (the SDK): spans are worth making.

    Until one is set this costs one module attribute read (the API's own lookup reads the
    environment on every call).
    """
    global _set
    if _set:
        return True
    if trace is None or (_SLOT and trace._TRACER_PROVIDER is None and not _from_env):
        return False
    provider = trace.get_tracer_provider()
    _set = not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))
    return _set


def _get_tracer() -> t.Any:
    """Our tracer from the current global provider (a provider set later is picked up)."""
    global _tracer, _provider
    provider = trace.get_tracer_provider()
    if provider is not _provider:
        from .. import __version__

        _tracer = provider.get_tracer(TRACER_NAME, __version__)
        _provider = provider
    return _tracer


class _Span:
    """A span made current for a ``with`` block; an exception leaving it is noted by kind
    (an A2A error's code, or ERROR for anything else), never by its text."""

    __slots__ = ("_cm", "span")

    def __init__(self, cm: t.Any) -> None:
        self._cm = cm
        self.span: t.Any = None

    def __enter__(self) -> t.Any:
        self.span = self._cm.__enter__()
        return self.span

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            note_error(self.span, exc)
        self._cm.__exit__(kind, exc, tb)


def note_error(span: SpanLike, exc: BaseException) -> None:
    """An A2A refusal carries its JSON-RPC code; anything else marks the span ERROR."""
    from ..protocol.errors import A2AError, InternalError, TaskInterrupted

    if isinstance(exc, TaskInterrupted):
        return  # a cancel or a deadline cut the run: its state says so
    code = getattr(exc, "code", None)
    if isinstance(exc, A2AError) and isinstance(code, int):
        span.set_attribute("a2a.error_code", code)
        if not isinstance(exc, InternalError):
            return
    if not isinstance(exc, Exception):
        return  # a kill (TaskCanceled, GreenletExit) or an exit: no failure of ours
    set_status = getattr(span, "set_status", None)
    if set_status is not None:
        set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__name__))


def _start(
    name: str,
    attributes: dict[str, t.Any],
    kind: t.Any = None,
    context: t.Any = None,
    links: t.Sequence[t.Any] = (),
) -> _Span:
    return _Span(_get_tracer().start_as_current_span(
        name,
        context=context,
        kind=kind if kind is not None else trace.SpanKind.INTERNAL,
        attributes=attributes,
        links=links,
        record_exception=False,  # an exception's text may quote a caller or a secret
        set_status_on_exception=False,
    ))  # fmt: skip


def exchange_span(method: str, binding: str) -> t.ContextManager[SpanLike]:
    """The span of one exchange method call (``a2a.SendMessage``), inside the request's span."""
    if not recording():
        return NO_SPAN
    return _start(f"a2a.{method}", {"a2a.method": method, "a2a.binding": binding})


def note_result(span: SpanLike, result: t.Any) -> None:
    """Task id, skill and state of a method's answer (a task, or ``{"task": ...}``; as data
    or already encoded: read back only when a span records)."""
    if span is NO_SPAN:
        return
    if isinstance(result, str):  # jsonrpc.Encoded: a stored task's own encoding
        result = json.loads(result)
    if not isinstance(result, dict):
        return
    task = result.get("task", result)
    if not isinstance(task, dict):
        return
    status = task.get("status")
    if isinstance(task.get("id"), str) and isinstance(status, dict):
        span.set_attribute("a2a.task_id", task["id"])
        span.set_attribute("a2a.state", str(status.get("state", "")))
        metadata = task.get("metadata")
        if isinstance(metadata, dict) and isinstance(metadata.get(_SKILL_KEY), str):
            span.set_attribute("a2a.skill_id", metadata[_SKILL_KEY])


def annotate(task_id: str | None = None, skill: str | None = None) -> None:
    """Name the task (and skill) on the current span: a method call that started a task."""
    if not recording():
        return
    span = trace.get_current_span()
    if not span.is_recording():
        return
    if task_id is not None:
        span.set_attribute("a2a.task_id", task_id)
    if skill is not None:
        span.set_attribute("a2a.skill_id", skill)


def capture() -> t.Any:
    """The current trace context (in the request), for a run that runs elsewhere."""
    if not recording():
        return None
    return otel_context.get_current()


def run_span(
    parent: t.Any, *, detached: bool, skill: str, task_id: str
) -> t.ContextManager[SpanLike]:
    """The span of one run, on the run's own greenlet or thread.

    ``parent`` is the request's context (:func:`capture`). A run its request waits for is a
    child of the method's span; a ``detached`` one (the request answers at once) is the root
    of a trace of its own, with a link to the request's span.
    """
    if parent is None or not recording():
        return NO_SPAN
    attributes = {"a2a.skill_id": skill, "a2a.task_id": task_id}
    if not detached:
        return _start("a2a.run", attributes, context=parent)
    request_span = trace.get_current_span(parent).get_span_context()
    links = [trace.Link(request_span)] if request_span.is_valid else []
    return _start("a2a.run", attributes, context=otel_context.Context(), links=links)


def note_state(span: SpanLike, state: t.Any) -> None:
    """The state a run left its task in; a FAILED task marks the run's span ERROR."""
    if span is NO_SPAN:
        return
    span.set_attribute("a2a.state", state.value)
    if state.name == "FAILED":
        set_status = getattr(span, "set_status", None)
        if set_status is not None:
            set_status(trace.Status(trace.StatusCode.ERROR, "task failed"))


def store_span(operation: str) -> t.ContextManager[SpanLike]:
    """A store call (``a2a.store get_task``), a child of whatever span is current."""
    if not recording():
        return NO_SPAN
    return _start(f"a2a.store {operation}", {"a2a.store.operation": operation})


def push_span(parent: t.Any, host: str, task_id: str) -> t.ContextManager[SpanLike]:
    """One push delivery, a child of the span that queued it (``parent``, :func:`capture`):
    the receiver's host only (no path, query or credentials)."""
    if not recording():
        return NO_SPAN
    return _start(
        "a2a.push",
        {"server.address": host, "a2a.task_id": task_id},
        kind=trace.SpanKind.CLIENT,
        context=parent,
    )
