"""Issue 15: a webhook attempt is a span of its alert's trace, the receiver
gets the W3C ``traceparent``, the attempt is counted per receiver, and the
funnel state the console reads (``alerting.view.receiver_levels``) names the
last delivery result and the token-bucket level."""
from __future__ import annotations

from types import SimpleNamespace

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from alerting.agents import AlertingService
from alerting.config import parse_config
from alerting.runner import FunnelRunner
from alerting.view import receiver_levels
from alerting.wire import parse_command, parse_raw, raw_envelope
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


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_one_trace_per_message_and_merged_alerts_are_linked():
    """Issue 15 item 3 on the alerting code itself (router, funnel runner,
    webhook sender to a real HTTP receiver): the alert that opens a group is
    one trace, ingest -> route -> funnel decision -> webhook attempt; an
    alert merged into the same message is a trace of its own, linked from
    the attempt. (End to end through the stack, exported over OTLP:
    ``tests/alerting_e2e/test_alert_e2e.py::test_receiver_down_then_up_gets_each_message_once_with_everything``.)"""
    EXPORTER.clear()
    with tracing.item_spans(), Hook([(200, {})]) as hook:
        cfg = parse_config({"receivers": [{"name": "oncall", "url": hook.url}],
                            "route": {"receiver": "oncall"}, "grouping": {"group_by": ["rule"]},
                            "timing": {"group_wait": 30, "group_interval": 30}})
        # given two alerts of one group, each POSTed on its own (its own ingest span)
        svc, sent = object.__new__(AlertingService), []
        svc.config = cfg

        async def send(key, value, **kw):
            sent.append(value)
        svc.funnel = SimpleNamespace(send=send)
        events, ingests = [], []
        # (the second began earlier, so the message lists it first: the group,
        # not the listing, must remember which alert opened it)
        for offset, (asset, began) in enumerate((("h1", "2020-01-01T00:05:00Z"),
                                                 ("h2", "2020-01-01T00:00:00Z"))):
            with tracing.span("alert.ingest"):
                tp = tracing.current_traceparent()
            ingests.append(tracing.trace_id(tp))
            _eid, value = raw_envelope([{"rule": "DiskFull", "asset": asset, "severity": "critical",
                                         "startsAt": began}])
            msg = SimpleNamespace(partition=0, offset=offset, topic="alerts.raw",
                                  headers=[(tracing.TRACEPARENT, tp.encode())])
            events.append((SimpleNamespace(message=msg), {}, parse_raw(value, 0, offset, 1000.0)))
        # when the router routes them, the funnel decides and sends its message
        await svc.route_batch(events)
        clock = Clock()
        runner = FunnelRunner(cfg, {}, clock)
        runner.apply_batch(0, [(n, parse_command(v)) for n, v in enumerate(sent)])
        clock.now += 31
        [message] = runner.apply(0, len(sent), {"kind": "tick"}).messages
        sender = WebhookSender(cfg)
        assert (await sender.send(message)).ok
        await sender.aclose()
    assert [a["asset"] for a in message.alerts()] == ["h2", "h1"]
    spans = EXPORTER.get_finished_spans()
    first, second = ({s.name: s for s in spans if f"{s.context.trace_id:032x}" == t}
                     for t in ingests)
    # then the first alert's trace holds its whole path, each step the child of the one before
    assert sorted(first) == ["alert.funnel_decision", "alert.ingest", "alert.route",
                             "webhook.attempt"]
    for child, parent in (("alert.route", "alert.ingest"), ("alert.funnel_decision", "alert.route"),
                          ("webhook.attempt", "alert.funnel_decision")):
        assert first[child].parent.span_id == first[parent].context.span_id, child
    [(_h, _b)] = hook.requests
    assert _h["traceparent"].split("-")[1] == ingests[0]
    # and the second is its own trace, without a delivery of its own, linked from the attempt
    assert sorted(second) == ["alert.funnel_decision", "alert.ingest", "alert.route"]
    assert second["alert.funnel_decision"].parent.span_id == second["alert.route"].context.span_id
    assert [(ln.context.trace_id, ln.context.span_id) for ln in first["webhook.attempt"].links] == \
        [(second["alert.funnel_decision"].context.trace_id,
          second["alert.funnel_decision"].context.span_id)]
