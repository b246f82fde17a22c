"""Issue 15: a webhook attempt is a span of its alert's trace, the receiver
gets the W3C ``traceparent``, the attempt is counted per receiver, and the
funnel state the console reads (``alerting.view.receiver_levels``) names the
last delivery result and the token-bucket level."""
from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from alerting.view import receiver_levels
from alerting.webhook import WebhookSender, report
from plait import tracing
from test_alert_webhook import Hook, _funnel_with_message

EXPORTER = InMemorySpanExporter()
tracing.use_exporter(EXPORTER)


async def test_webhook_attempt_is_traced_counted_and_shown():
    EXPORTER.clear()
    with Hook([(503, {}), (200, {})]) as hook:
        cfg, f, msg = _funnel_with_message(hook.url)
        sender = WebhookSender(cfg)
        before = REGISTRY.get_sample_value("plait_webhook_attempts_total",
                                           {"receiver": msg.receiver, "outcome": "success"}) or 0
        with tracing.span("alert.funnel_decision"):
            first = await sender.send(msg)
        next_at = report(f, msg, first, 30.0)
        levels = receiver_levels(f.state, cfg, 31.0)[msg.receiver]
        assert levels["last"]["outcome"] == "failed" and levels["last"]["status"] == 503
        [again] = f.tick(next_at)
        with tracing.span("alert.funnel_decision"):
            second = await sender.send(again)
        await sender.aclose()
        report(f, again, second, next_at + 1)
    assert second.ok
    levels = receiver_levels(f.state, cfg, next_at + 1)[msg.receiver]
    assert levels["last"]["outcome"] == "delivered"
    assert 0 <= levels["tokens"] <= levels["burst"] and levels["outbox"] == 0
    spans = EXPORTER.get_finished_spans()
    attempts = [s for s in spans if s.name == "webhook.attempt"]
    parents = {s.context.span_id: s for s in spans if s.name == "alert.funnel_decision"}
    assert len(attempts) == 2 and all(a.parent.span_id in parents for a in attempts)
    assert [a.attributes["plait.outcome"] for a in attempts] == ["http_5xx", "success"]
    for (headers, _body), attempt in zip(hook.requests, attempts):
        assert headers["traceparent"].split("-")[1] == f"{attempt.context.trace_id:032x}"
    after = REGISTRY.get_sample_value("plait_webhook_attempts_total",
                                      {"receiver": msg.receiver, "outcome": "success"})
    assert after == before + 1
    assert REGISTRY.get_sample_value("plait_webhook_request_duration_seconds_count",
                                     {"receiver": msg.receiver}) >= 2
