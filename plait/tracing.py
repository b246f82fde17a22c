"""OpenTelemetry traces of exports and alerts (issue 15 item 3).

One trace per export task (or per alert message): the API's request span is
the root, and its W3C ``traceparent`` (W3C Trace Context, s3.2) travels with
every event of the task, in the CloudEvents envelope attribute
``traceparent`` (``plait.events``) and in the Kafka record header
``traceparent`` (``plait.agent.AgentRuntime.send``). Each agent that handles
an event starts a child span of the event's traceparent; the events it sends
carry its own span's traceparent, so the hops chain. Outgoing HTTP calls
(data API pages, webhook attempts) carry the header too (:func:`inject`).

Export: when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, spans go to it over OTLP
(HTTP/protobuf, the SDK's standard environment variables apply); otherwise
no exporter is installed and spans cost a context switch only. Tests install
an in-memory exporter with :func:`use_exporter`.

The ``opentelemetry`` packages are optional at import time: without them
every function here is a no-op and :func:`current_traceparent` returns None.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Mapping

try:  # pragma: no cover - exercised when the packages are absent
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    _PROP = TraceContextTextMapPropagator()
except ImportError:  # pragma: no cover
    trace = None  # type: ignore[assignment]
    _PROP = None

#: Header / envelope attribute name (W3C Trace Context).
TRACEPARENT = "traceparent"
_configured = False
#: spans leave the process (OTLP, or a test's exporter): see :func:`exporting`
_exporting = False


def setup(service: str) -> None:
    """Install the tracer provider of this process once, named ``service``
    (``plait-api``, ``plait-worker``...). Adds an OTLP exporter when
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set. Idempotent; a no-op without the
    SDK."""
    global _configured
    if _configured or trace is None:
        return
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:  # pragma: no cover
        return
    provider = TracerProvider(resource=Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME", service)}))
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        global _exporting
        _exporting = True
    trace.set_tracer_provider(provider)
    _configured = True


def use_exporter(exporter: Any) -> None:
    """Tests: send every span of this process to ``exporter`` (e.g. the SDK's
    ``InMemorySpanExporter``) synchronously, installing a provider if needed.
    Per-item spans (``optional``) also need :func:`item_spans`."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    setup("plait-test")
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # pragma: no cover
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))


def exporting() -> bool:
    """True when this process's spans go to a collector (OTLP configured) or
    a test asked for them (:func:`item_spans`): per-alert spans
    (``span(..., optional=True)``) are made only then, so a storm costs
    nothing extra without a collector."""
    return _exporting


@contextlib.contextmanager
def item_spans(on: bool = True) -> Iterator[None]:
    """Tests: make the optional per-item spans (or not) inside the block.
    :func:`use_exporter` alone does not: an exporter a test module installs
    would otherwise slow every storm test of the session."""
    global _exporting
    before, _exporting = _exporting, on
    try:
        yield
    finally:
        _exporting = before


def _tracer():
    return trace.get_tracer("plait")


def context_of(traceparent: str | None):
    """The OpenTelemetry context whose parent is ``traceparent`` (None or
    malformed: an empty context, i.e. a new trace)."""
    if _PROP is None or not traceparent:
        return None
    return _PROP.extract({TRACEPARENT: traceparent})


#: Most span links one span carries (a message's links to the alerts merged into it).
MAX_LINKS = 32


def trace_id(traceparent: str | None) -> str | None:
    """The 32-hex trace id of a ``traceparent`` (``00-<trace id>-<span id>-<flags>``),
    or None when absent or malformed."""
    parts = traceparent.split("-") if traceparent else ()
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


def parent_and_links(candidates, limit: int = MAX_LINKS) -> tuple[str | None, list[str]]:
    """One trace per message: of ``candidates`` (traceparents in order,
    None and malformed ones skipped) the first is the parent, and each later
    one from another trace becomes a link (one per trace, at most ``limit``).

    Returns:
        (parent traceparent or None, [traceparents to link]).
    """
    parent, links, seen = None, [], set()
    for tp in candidates:
        tid = trace_id(tp)
        if tid is None or tid in seen:
            continue
        seen.add(tid)
        if parent is None:
            parent = tp
        elif len(links) < limit:
            links.append(tp)
        else:
            break
    return parent, links


def _links(traceparents) -> list[Any]:
    out = []
    for tp in traceparents or ():
        ctx = context_of(tp)
        sc = trace.get_current_span(ctx).get_span_context() if ctx is not None else None
        if sc is not None and sc.is_valid:
            out.append(trace.Link(sc))
    return out[:MAX_LINKS]


@contextlib.contextmanager
def span(name: str, traceparent: str | None = None, links=(), optional: bool = False,
         **attributes: Any) -> Iterator[Any]:
    """A span named ``name``; child of ``traceparent`` when given, else of the
    current span (or a new trace). ``links``: traceparents of spans this one
    is related to but not a child of (OpenTelemetry span links, at most
    :data:`MAX_LINKS`; malformed ones skipped). ``optional``: a span of the
    hot path (one per alert): made only when :func:`exporting`, else None is
    yielded and the current context is left as it is. Attributes with None
    values are dropped. An exception leaving the block is recorded on the
    span and re-raised."""
    if trace is None or (optional and not _exporting):
        yield None
        return
    attrs = {k: v for k, v in attributes.items() if v is not None}
    ctx = context_of(traceparent) if traceparent else None
    with _tracer().start_as_current_span(name, context=ctx, attributes=attrs,
                                         links=_links(links) or None) as s:
        yield s


def current_traceparent() -> str | None:
    """The ``traceparent`` of the current span, or None when there is no
    recording span (no SDK, or outside any span)."""
    if _PROP is None:
        return None
    carrier: dict[str, str] = {}
    _PROP.inject(carrier)
    return carrier.get(TRACEPARENT)


def inject(headers: dict[str, str] | None = None) -> dict[str, str]:
    """``headers`` (a new dict when None) with the current ``traceparent``
    added when there is one. For outgoing HTTP requests."""
    headers = {} if headers is None else headers
    tp = current_traceparent()
    if tp:
        headers[TRACEPARENT] = tp
    return headers


def from_headers(headers: Any) -> str | None:
    """The ``traceparent`` of Kafka record headers (a list of ``(key, bytes)``
    pairs or a mapping), or None."""
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    for k, v in items:
        if (k.decode() if isinstance(k, bytes) else k).lower() == TRACEPARENT:
            return v.decode() if isinstance(v, bytes) else str(v)
    return None


def attach(traceparent: str | None):
    """Make ``traceparent`` the current parent (returns a token for
    :func:`detach`, None when nothing was attached)."""
    ctx = context_of(traceparent)
    return otel_context.attach(ctx) if ctx is not None else None


def detach(token) -> None:
    """Undo :func:`attach`."""
    if token is not None:
        otel_context.detach(token)
