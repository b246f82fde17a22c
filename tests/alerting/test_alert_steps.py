"""Unit tests of the pure steps: fingerprint/dedupe, token bucket, retry
schedule, payload rendering, grouping timers."""
from __future__ import annotations

import json

import pytest

from alerting import bucket as tb
from alerting.dedupe import decide, fingerprint
from alerting.delivery import (backoff_delay, idempotency_key, is_retryable, next_attempt_at,
                               render_alertmanager, render_body, signature, verify_signature)
from alerting.group import apply_verdict, build_sections, commit_sections, due_at, new_group, settle
from alerting.model import Message
from alerting.intake import from_native


def alert(sev="warning", status="firing", asset="h1", rule="Lat", **kw):
    return from_native(dict({"rule": rule, "asset": asset, "severity": sev, "status": status}, **kw), 0)


# ------------------------------------------------------------------ fingerprint / dedupe
def test_fingerprint_default_rule_asset_and_configurable_labels():
    a = alert(labels={"env": "prod"})
    b = alert(sev="critical", labels={"env": "dev"})
    # same rule+asset, different severity/labels: one fingerprint by default
    assert fingerprint(a) == fingerprint(b) and len(fingerprint(a)) == 16
    # with env in the label set they differ; another asset always differs
    assert fingerprint(a, ["rule", "asset", "env"]) != fingerprint(b, ["rule", "asset", "env"])
    assert fingerprint(a) != fingerprint(alert(asset="h2"))


def test_dedupe_repeat_inside_cooldown_then_refresh():
    # given an episode opened at 0 with cooldown 300
    v, ep = decide(None, alert(), 0, 300)
    assert v == "new"
    # when the same alert repeats at 299 and at 300
    v1, ep1 = decide(ep, alert(), 299, 300)
    v2, ep2 = decide(ep1, alert(), 300, 300)
    # then the first is a duplicate, the second passes as a refresh (no news)
    assert (v1, v2) == ("duplicate", "refresh") and ep2["last_pass_at"] == 300
    assert ep["last_seen"] == 0, "decide must not modify its input"


def test_dedupe_escalation_passes_deescalation_counted():
    _, ep = decide(None, alert("warning"), 0, 300)
    v, ep = decide(ep, alert("critical"), 1, 300)
    assert v == "escalated" and ep["severity"] == 2 and ep["escalated_from"] == 1
    v, ep2 = decide(ep, alert("warning"), 2, 300)
    assert v == "deescalation" and ep2["severity"] == 2 and ep2["seen_severity"] == 1


def test_dedupe_resolve_then_repeats_then_refire():
    _, ep = decide(None, alert(), 0, 300)
    v, ep = decide(ep, alert(status="resolved"), 10, 300)
    assert v == "resolved" and ep["resolved_at"] == 10
    assert decide(ep, alert(status="resolved"), 20, 300)[0] == "resolve_repeat"
    assert decide(None, alert(status="resolved"), 20, 300) == ("resolve_repeat", None)
    v, ep = decide(ep, alert(), 30, 300)
    # firing again after its resolve: a new alert, starting now (Alertmanager's
    # store replaces an alert it does not overlap, provider/mem ``Put``)
    assert v == "refire" and ep["status"] == "firing" and ep["started_at"] == 30


# ------------------------------------------------------------------ token bucket
def test_bucket_burst_then_refill_rate():
    # given a full bucket of 3 refilling one token per 10 s
    b = tb.new_bucket(3, 0)
    taken = []
    for t in (0, 0, 0, 0, 5, 10, 10, 20):
        ok, b = tb.take(b, t, 3, 10)
        taken.append(ok)
    # then 3 at once, none until 10, one per 10 s after that
    assert taken == [True, True, True, False, False, True, False, True]
    assert tb.next_token_at(b, 20, 3, 10) == 30


def test_bucket_float_refill_gives_whole_token_and_caps_at_burst():
    b = {"tokens": 0.2, "updated_at": 32.0}
    assert tb.available(b, 40.0, 3, 10) and not tb.available(b, 39.9, 3, 10)
    assert tb.refill(b, 10_000, 3, 10)["tokens"] == 3
    assert tb.refill(b, 0, 3, 10) == b  # a clock going backwards adds nothing


# ------------------------------------------------------------------ delivery schedule
def test_backoff_is_exponential_and_capped():
    assert [backoff_delay(n) for n in range(1, 10)] == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert backoff_delay(10_000) == 60


def test_retry_after_delays_but_never_hastens():
    assert next_attempt_at(30, 1, 20) == 50
    assert next_attempt_at(30, 7, 5) == 90          # backoff (60) wins over a short Retry-After
    assert next_attempt_at(30, 1, 10**9, max_retry_after=3600) == 3630


@pytest.mark.parametrize("status, retry", [(None, True), (408, True), (429, True), (500, True),
                                           (503, True), (400, False), (401, False), (404, False)])
def test_retryable_statuses(status, retry):
    assert is_retryable(status) is retry


def test_signature_and_idempotency_key_are_stable():
    body = b'{"a":1}'
    sig = signature("k", body, 100)
    assert sig.startswith("sha256=") and sig == signature("k", body, 100)
    assert verify_signature("k", body, 100, sig, now=150)
    assert not verify_signature("k", body + b" ", 100, sig, now=150)
    assert not verify_signature("k", body, 100, sig, now=100 + 301)  # replay window
    assert idempotency_key("r", "r-1", 30.0) == idempotency_key("r", "r-1", 30.0) != idempotency_key("r", "r-2", 30.0)


def _message(views, group_labels=None):
    section = {"group_id": "g1", "group_labels": group_labels or {"rule": "Lat"}, "receiver": "r",
               "part": 1, "parts": 1, "merged": False, "reminder": False,
               "counts": {"new": len(views), "escalated": 0, "resolved": 0, "still_firing": len(views)},
               "alerts": views}
    return Message("r-1", "r", "k", 1, 0.0, [section], alert_count=len(views))


def _view(asset, status="firing", **kw):
    return dict({"fingerprint": f"fp{asset}", "rule": "Lat", "asset": asset, "severity": "warning",
                 "status": status, "change": "new", "escalated_from": None, "labels": {"env": "prod"},
                 "annotations": {"summary": "slow"}, "starts_at": 0.0,
                 "ends_at": 60.0 if status == "resolved" else None, "duration": None,
                 "transient": False, "generator_url": "", "source": "native"}, **kw)


def test_render_alertmanager_payload():
    # given a message with one firing and one resolved alert
    payload = render_alertmanager(_message([_view("h1"), _view("h2", "resolved")]))
    # then Alertmanager's v4 fields, zero-time endsAt only while firing
    assert payload["version"] == "4" and payload["status"] == "firing" and payload["truncatedAlerts"] == 0
    a1, a2 = payload["alerts"]
    assert a1["endsAt"] == "0001-01-01T00:00:00Z" and a2["endsAt"] == "1970-01-01T00:01:00Z"
    assert a1["labels"] == {"env": "prod", "alertname": "Lat", "severity": "warning", "asset": "h1"}
    assert payload["commonLabels"] == {"env": "prod", "alertname": "Lat", "severity": "warning"}
    # group_by [rule] is Alertmanager's [alertname] (issue 16)
    assert payload["groupLabels"] == {"alertname": "Lat"}


def test_render_alertmanager_invents_no_label_for_an_alertmanager_alert():
    # given an Alertmanager alert without severity, as a continue route's copy (fp~route)
    am = _view("h1", labels={"alertname": "Lat", "instance": "h1"}, source="alertmanager",
               fingerprint="0123456789abcdef~0.1")
    payload = render_alertmanager(_message([am]))
    # then its labels as sent (Alertmanager sends no severity it was not given), its fingerprint
    [a] = payload["alerts"]
    assert a["labels"] == {"alertname": "Lat", "instance": "h1"}
    assert payload["commonLabels"] == {"alertname": "Lat", "instance": "h1"}
    assert a["fingerprint"] == "0123456789abcdef"


def test_render_body_is_deterministic_json():
    msg = _message([_view("h1")])
    assert render_body(msg, "native") == render_body(msg, "native")
    assert json.loads(render_body(msg, "native"))["groups"][0]["alerts"][0]["asset"] == "h1"
    with pytest.raises(ValueError):
        render_body(msg, "slack")


def test_native_payload_is_camel_case_with_rfc3339_times():
    # given a message whose labels have snake_case names (sender's data)
    msg = _message([_view("h1", labels={"team_name": "db"}),
                    _view("h2", "resolved", escalated_from="info")], {"rule_name": "Lat"})
    body = json.loads(render_body(msg, "native"))
    # then every field name is camelCase, times are RFC 3339, label names are kept
    assert {"createdAt", "alertCount", "mergedGroups", "mergedAlerts"} <= set(body)
    group = body["groups"][0]
    assert group["groupLabels"] == {"rule_name": "Lat"} and group["counts"]["stillFiring"] == 2
    first, second = group["alerts"]
    assert first["labels"] == {"team_name": "db"} and first["startsAt"] == "1970-01-01T00:00:00Z"
    assert second["endsAt"] == "1970-01-01T00:01:00Z" and second["escalatedFrom"] == "info"
    assert "generatorURL" in first

    def keys(v):
        if isinstance(v, dict):
            return [k for k, x in v.items() if k not in ("labels", "annotations", "groupLabels")
                    for k in [k, *keys(x)]]
        return [k for x in v for k in keys(x)] if isinstance(v, list) else []

    assert not [k for k in keys(body) if "_" in k]


# ------------------------------------------------------------------ grouping
def _episode(fp, sev=1, start=0.0):
    return {"fp": fp, "alert": alert(asset=fp).to_dict(), "severity": sev, "started_at": start,
            "resolved_at": None}


def test_group_wait_then_grid_of_group_interval_then_repeat_on_the_grid():
    """The repeat is sent at the first flush strictly after repeat_interval
    (Alertmanager's DedupStage ``needsUpdate``, notify/notify.go:
    ``entry.Timestamp.Before(now - repeat)``; flushes every group_interval,
    dispatch/dispatch.go ``aggrGroup.run``)."""
    # given a group opened at 0 (group_wait 30, group_interval 30, repeat 300)
    g = new_group("g", "r", {"rule": "Lat"}, 0)
    apply_verdict(g, "new", _episode("h1"), "r1", 0)
    assert due_at(g, 30, 30, 300) == 30
    # when its first message goes at 30 and is delivered
    sections, _ = build_sections(g, 50, False, False, lambda m: None)
    commit_sections(g, sections, 30)
    settle(g, sections[0]["snapshot"], 30)
    # then with no news it repeats at 360 (the flush at 330 is not strictly
    # after 30 + 300); news at 100 is due at the next flush 120
    assert due_at(g, 30, 30, 300) == 360
    apply_verdict(g, "new", _episode("h2", start=100), "r2", 100)
    assert due_at(g, 30, 30, 300) == 120


def test_split_into_numbered_parts_and_mute():
    g = new_group("g", "r", {"rule": "X"}, 0)
    for i in range(7):
        apply_verdict(g, "new", _episode(f"h{i}"), f"r{i}", 0)
    # when built with batch size 3 and h0 muted by silence s1
    sections, effects = build_sections(g, 3, False, False, lambda m: "s1" if m["fp"] == "h0" else None)
    # then 6 alerts in parts 1/2, 2/2 of 3; h0 left out and reported muted
    assert [(s["part"], s["parts"], len(s["alerts"])) for s in sections] == [(1, 2, 3), (2, 2, 3)]
    assert effects["muted"] == {"h0": "s1"}
    assert all(s["counts"]["still_firing"] == 6 for s in sections)
