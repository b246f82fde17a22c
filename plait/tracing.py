"""OpenTelemetry traces, one per export task or alert message: the W3C ``traceparent`` travels in
the envelope and the Kafka header, each agent's span is its child, HTTP calls carry it
(:func:`inject`). OTLP export when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; no-ops without the SDK.
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

TRACEPARENT = "traceparent"
_configured = False
_exporting = False


def setup(service: str) -> None:
    """Install this process's tracer provider once, named ``service``, with an OTLP exporter when
    configured."""
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
    """Tests: send every span to ``exporter`` synchronously (per-item spans also need
    :func:`item_spans`)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    setup("plait-test")
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # pragma: no cover
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))


def exporting() -> bool:
    """True when spans leave the process: only then are optional per-alert spans made."""
    return _exporting


@contextlib.contextmanager
def item_spans(on: bool = True) -> Iterator[None]:
    """Tests: make the optional per-item spans inside the block (or not)."""
    global _exporting
    before, _exporting = _exporting, on
    try:
        yield
    finally:
        _exporting = before


def _tracer():
    return trace.get_tracer("plait")


def context_of(traceparent: str | None):
    """The context whose parent is ``traceparent`` (None or malformed: a new trace)."""
    if _PROP is None or not traceparent:
        return None
    return _PROP.extract({TRACEPARENT: traceparent})


MAX_LINKS = 32


def trace_id(traceparent: str | None) -> str | None:
    """The 32-hex trace id of a ``traceparent``, or None when absent or malformed."""
    parts = traceparent.split("-") if traceparent else ()
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


def parent_and_links(candidates, limit: int = MAX_LINKS) -> tuple[str | None, list[str]]:
    """``(parent, links)`` of ``candidates`` (traceparents): the first valid one is the parent, each
    later one of another trace a link (at most ``limit``)."""
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
    """A span named ``name``, child of ``traceparent`` or of the current span; ``links`` (at most
    :data:`MAX_LINKS`); ``optional``: made only when :func:`exporting`, else yields None. None
    attributes dropped; an exception is recorded and re-raised."""
    if trace is None or (optional and not _exporting):
        yield None
        return
    attrs = {k: v for k, v in attributes.items() if v is not None}
    ctx = context_of(traceparent) if traceparent else None
    with _tracer().start_as_current_span(name, context=ctx, attributes=attrs,
                                         links=_links(links) or None) as s:
        yield s


def current_traceparent() -> str | None:
    """The ``traceparent`` of the current recording span, or None."""
    if _PROP is None:
        return None
    carrier: dict[str, str] = {}
    _PROP.inject(carrier)
    return carrier.get(TRACEPARENT)


def inject(headers: dict[str, str] | None = None) -> dict[str, str]:
    """``headers`` (new dict when None) plus the current ``traceparent``, for outgoing HTTP
    requests."""
    headers = {} if headers is None else headers
    tp = current_traceparent()
    if tp:
        headers[TRACEPARENT] = tp
    return headers


def from_headers(headers: Any) -> str | None:
    """The ``traceparent`` of Kafka record headers (``(key, bytes)`` pairs or a mapping), or None.
    """
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    for k, v in items:
        if (k.decode() if isinstance(k, bytes) else k).lower() == TRACEPARENT:
            return v.decode() if isinstance(v, bytes) else str(v)
    return None


def attach(traceparent: str | None):
    """Make ``traceparent`` the current parent; a token for :func:`detach`, or None."""
    ctx = context_of(traceparent)
    return otel_context.attach(ctx) if ctx is not None else None


def detach(token) -> None:
    if token is not None:
        otel_context.detach(token)
