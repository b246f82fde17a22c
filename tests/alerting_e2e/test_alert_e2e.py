"""The alert funnel end to end on the real broker (Tansu): alerts in
through the API (routed there, onto ``alerts.funnel``) and straight onto
``alerts.raw``, grouped messages out to a
local webhook receiver, every raw alert accounted for on ``alerts.ledger``."""
from __future__ import annotations

import random
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from alert_e2e_support import (AlertApi, Kafka, OtlpReceiver, Receiver, native_alerts, wait_until,
                               write_config)

pytestmark = pytest.mark.integration

FAST = {"timing": {"group_wait": "2s", "group_interval": "3s", "repeat_interval": "1h"},
        "delivery": {"timeout": "3s", "backoff_initial": "0.5s", "backoff_max": "2s"}}


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


@pytest.fixture
def alerting(make_stack, tmp_path):
    """Factory: ``alerting(config_path, **env) -> (stack, api, kafka)`` with the
    funnel running (every funnel partition has published its counters once);
    ``env``: more environment for the stack's processes."""
    made = []

    def make(config_path, **env):
        stack = make_stack(workers=1, PLAIT_ALERTING_CONFIG=str(config_path), **env)
        api, kafka = AlertApi(stack), Kafka(stack)
        made.append((api, kafka))
        wait_until(lambda: api.counters()["partitions"] >= 4, 60, "the funnel worker to run")
        return stack, api, kafka

    yield make
    for api, kafka in made:
        api.stop()
        kafka.close()


def storm(seed: int = 7) -> tuple[list[dict], list[dict]]:
    """500 raw alerts: 20 critical (distinct fingerprints), 10 invalid, and
    470 repeats and noise (warning latency and info heartbeats on 12 assets)."""
    assets = [f"h{i:02d}" for i in range(1, 13)]
    critical = ([{"rule": "NodeDown", "asset": a, "severity": "critical"} for a in assets]
                + [{"rule": "DiskFull", "asset": a, "severity": "critical"} for a in assets[:8]])
    invalid = [{"rule": "Broken", "asset": f"h{i:02d}"} for i in range(10)]  # no severity
    rnd = random.Random(seed)
    noise = [{"rule": rnd.choice(["HighLatency", "Heartbeat"]), "asset": rnd.choice(assets),
              "severity": "warning"} for _ in range(470)]
    for n in noise:
        if n["rule"] == "Heartbeat":
            n["severity"] = "info"
    alerts = critical + invalid + noise
    rnd.shuffle(alerts)
    return alerts, critical


def test_storm_of_500_reaches_the_webhook_as_a_handful_of_messages(alerting, receiver, tmp_path):
    # given a funnel grouping by rule, batch 50, 3 messages at once then one per 3 s
    cfg = write_config(tmp_path / "alerting.yaml",
                       [{"name": "oncall", "url": receiver.url("/storm"), "secret": "s3cret",
                         "bucket": {"burst": 3, "refill_interval": "3s"}}],
                       grouping={"group_by": ["rule"], "batch_size": 50}, **FAST)
    stack, api, kafka = alerting(cfg)
    alerts, critical = storm()
    # when 500 raw alerts arrive over 10 s, half through POST /alerts (in
    # lists; invalid ones alone, to see each refused with a 422) and half
    # produced straight onto alerts.raw
    ids: dict[str, dict] = {}
    start = time.monotonic()
    for i in range(50):
        batch = alerts[i * 10:(i + 1) * 10]
        if i % 2:
            for a, rid in zip(batch, kafka.send_alerts(batch)):
                ids[rid] = a
        else:
            good = [a for a in batch if "severity" in a]
            if good:
                resp = api.post("/alerts", good)
                assert resp.status_code == 202, resp.text
                ids.update(zip(resp.json()["data"]["ids"], good))
            for a in batch:
                if "severity" not in a:
                    resp = api.post("/alerts", a)
                    assert resp.status_code == 422 and "severity" in resp.json()["message"]
                    ids.update(zip(kafka.send_alerts([a]), [a]))  # Kafka takes it: ledger says rejected
        wait_until(lambda: time.monotonic() >= start + 0.2 * (i + 1), 5, "the next send slot", 0.01)
    assert len(ids) == 500

    # then the ledger accounts for every one of the 500, exactly once
    wait_until(lambda: len({e["raw_id"] for e in kafka.read_ledger()} & set(ids)) == 500, 60,
               "500 ledger entries")
    by_id = kafka.ledger_by_id()
    assert all(len(by_id[r]) == 1 for r in ids), [r for r in ids if len(by_id[r]) != 1]
    outcomes = Counter(by_id[r][0]["outcome"] for r in ids)
    assert outcomes["rejected"] == 10
    assert all("severity" in by_id[r][0]["reason"] for r in ids if by_id[r][0]["outcome"] == "rejected")
    assert sum(outcomes.values()) == 500 and outcomes["deduplicated"] > 400, outcomes

    # and a handful of grouped messages carried all 20 critical alerts, none over 50
    hits = receiver.accepted("/storm")
    assert 1 <= len(hits) <= 12, len(hits)
    listed = [a for h in hits for a in native_alerts(h)]
    assert all(h.body["alertCount"] <= 50 for h in hits)
    assert {(c["rule"], c["asset"]) for c in critical} <= {(a["rule"], a["asset"]) for a in listed}
    crit_ids = [r for r, a in ids.items() if a.get("severity") == "critical"]
    assert len(crit_ids) == 20
    sent_ids = {h.headers["x-plait-message-id"] for h in hits}
    assert all(by_id[r][0]["outcome"] in ("delivered", "merged")
               and by_id[r][0]["message_id"] in sent_ids for r in crit_ids)
    assert all(h.headers["x-plait-signature"].startswith("sha256=") for h in hits)

    # and the counters balance: received = delivered + deduplicated + silenced + merged + rejected + pending
    c = wait_until(lambda: (lambda c: c if c["received"] == 500 and c["pending"] == 0 else None)(
        api.counters()), 10, "counters to settle")
    assert c["balanced"] and c["rejected"] == 10
    metrics = httpx.get(f"{api.url}/metrics", timeout=10).text
    assert "plait_alerts_received_total 500.0" in metrics
    assert 'plait_alerts_outcome_total{outcome="rejected"} 10.0' in metrics


def test_receiver_down_then_up_gets_each_message_once_with_everything(alerting, receiver, tmp_path):
    # given a receiver that answers 503 (and the stack exporting its spans over OTLP)
    receiver.status = 503
    otlp = OtlpReceiver().start()
    cfg = write_config(tmp_path / "alerting.yaml",
                       [{"name": "flaky", "url": receiver.url("/flaky")}],
                       grouping={"group_by": ["rule"], "batch_size": 50}, **FAST)
    stack, api, kafka = alerting(cfg, **otlp.env())
    first = [{"rule": "Err", "asset": f"h{i}", "severity": "warning"} for i in range(1, 6)]
    later = [{"rule": "Err", "asset": f"h{i}", "severity": "warning"} for i in range(6, 11)]
    # when 5 alerts fire, the webhook fails a few times, 5 more fire meanwhile
    ids = api.post("/alerts", first).json()["data"]["ids"]
    wait_until(lambda: len(receiver.on("/flaky")) >= 2, 30, "two failed attempts")
    ids += api.post("/alerts", later).json()["data"]["ids"]
    wait_until(lambda: any(len(native_alerts(h)) == 10 for h in receiver.on("/flaky")), 30,
               "a retry carrying all 10 alerts")
    receiver.status = 200  # the receiver comes back
    # then every alert is delivered, in messages each accepted exactly once
    wait_until(lambda: set(ids) <= {e["raw_id"] for e in kafka.read_ledger()
                                     if e["outcome"] in ("delivered", "merged")}, 30,
               "10 delivered ledger entries")
    ok = receiver.accepted("/flaky")
    # (counted from the answers recorded, not read before the switch: an attempt
    # in flight while the receiver came back would otherwise be miscounted)
    failed = sum(1 for h in receiver.on("/flaky") if h.status >= 500)
    assert failed >= 3
    keys = Counter(h.key for h in ok)
    assert all(n == 1 for n in keys.values()), keys
    # and the first accepted message carries everything that arrived meanwhile
    assert {a["asset"] for a in native_alerts(ok[0])} == {f"h{i}" for i in range(1, 11)}
    listed = Counter(a["asset"] for h in ok for a in native_alerts(h))
    assert all(n == 1 for n in listed.values()), listed
    c = wait_until(lambda: (lambda c: c if c["pending"] == 0 and c["received"] == 10 else None)(
        api.counters()), 10, "counters to settle")
    assert c["balanced"] and c["http5xx"] == failed and c["messagesSuperseded"] >= 1
    _one_trace_per_message(otlp, receiver.on("/flaky"))
    otlp.stop()


def _one_trace_per_message(otlp: OtlpReceiver, hits: list) -> None:
    """Issue 15 item 3, read back from what the API and the worker exported:
    the first POST is one trace (ingest, where the API decides the routes ->
    funnel decision ->
    every webhook attempt of the message its alerts opened, retries and the
    superseding message included); the second POST, merged into that
    message, is a trace of its own, linked from the attempts carrying it."""
    def span_of(hit):
        _v, tid, sid, _f = hit.headers["traceparent"].split("-")
        return next((s for s in otlp.trace(tid) if s["span_id"] == sid), None)

    attempts = wait_until(lambda: (lambda got: got if all(got) else None)(
        [span_of(h) for h in hits]), 20, "a webhook.attempt span for every request")
    first = attempts[0]["trace_id"]
    assert {a["trace_id"] for a in attempts} == {first}, "every attempt is in one trace"
    assert {a["name"] for a in attempts} == {"webhook.attempt"}
    spans = otlp.trace(first)
    by_id = {s["span_id"]: s for s in spans}
    [ingest] = [s for s in spans if s["name"] == "alert.ingest"]
    decisions = [s for s in spans if s["name"] == "alert.funnel_decision"]
    assert ingest["service"] == "plait-api"  # (its parent, if any, is the API's request span)
    assert {s["service"] for s in spans} == {"plait-api", "plait-worker"}
    assert not [s for s in spans if s["name"] == "alert.route"]  # no router hop
    assert len(decisions) == 5 and all(d["parent"] == ingest["span_id"] for d in decisions)
    assert all(by_id[a["parent"]]["name"] == "alert.funnel_decision" for a in attempts)
    # the second POST: its own trace (ingest, 5 decisions, no delivery of its own) ...
    ingests = otlp.named("alert.ingest")
    [second] = [s for s in ingests if s["trace_id"] != first]
    theirs = otlp.trace(second["trace_id"])
    assert sorted({s["name"] for s in theirs if s["service"] == "plait-worker"}
                  | {second["name"]}) == ["alert.funnel_decision", "alert.ingest"]
    assert sum(s["name"] == "alert.funnel_decision" for s in theirs) == 5
    # ... linked from every attempt that carried its alerts (and only from those)
    their_decisions = {s["span_id"] for s in theirs if s["name"] == "alert.funnel_decision"}
    for hit, attempt in zip(hits, attempts):
        carried = len(native_alerts(hit)) == 10
        linked = [sid for tid, sid in attempt["links"] if tid == second["trace_id"]]
        assert (len(linked) == 1 and linked[0] in their_decisions) if carried else not linked, \
            (len(native_alerts(hit)), attempt["links"])


def _rfc3339(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a13_alertmanager_in_alertmanager_out_and_the_api_edges(alerting, receiver, tmp_path):
    # given a receiver configured for the Alertmanager webhook payload
    cfg = write_config(tmp_path / "alerting.yaml",
                       [{"name": "am", "url": receiver.url("/am"), "format": "alertmanager"}],
                       grouping={"group_by": ["alertname"], "batch_size": 50},
                       timing={"group_wait": "1s", "group_interval": "2s", "repeat_interval": "1h"})
    stack, api, kafka = alerting(cfg)
    started = _rfc3339(datetime.now(timezone.utc) - timedelta(minutes=1))
    body = [{"labels": {"alertname": "HighCPU", "instance": f"h{i}:9100", "severity": "warning"},
             "annotations": {"summary": f"CPU high on h{i}"}, "startsAt": started}
            for i in (1, 2)]
    # then bad input is Alertmanager's 400 (a JSON string naming the field), and nothing is sent
    bad = api.post("/api/v2/alerts", [{"labels": {"instance": ""}}])
    assert bad.status_code == 400 and "[0].labels: is required" in bad.json()
    bad = api.post("/alerts", [{"rule": "X", "asset": "a", "severity": "loud"}])
    assert bad.status_code == 422 and "[0].severity" in bad.json()["message"]
    # when Prometheus-style alerts are posted
    resp = api.post("/api/v2/alerts", body)
    assert resp.status_code == 200, resp.text
    # then one Alertmanager-format message arrives
    hit = wait_until(lambda: receiver.accepted("/am"), 30, "the alertmanager message")[0]
    msg = hit.body
    assert msg["version"] == "4" and msg["status"] == "firing" and msg["truncatedAlerts"] == 0
    assert msg["groupLabels"] == {"alertname": "HighCPU"}
    assert msg["commonLabels"] == {"alertname": "HighCPU", "severity": "warning"}
    assert sorted(a["labels"]["instance"] for a in msg["alerts"]) == ["h1:9100", "h2:9100"]
    for a in msg["alerts"]:
        assert len(a["fingerprint"]) == 16 and a["startsAt"] == started
        assert a["endsAt"] == "0001-01-01T00:00:00Z"

    # and silences: a broad one is refused unless allowBroad, then it mutes
    broad = {"matchers": ['env!~"prod.*"'],
             "endsAt": _rfc3339(datetime.now(timezone.utc) + timedelta(minutes=10)),
             "createdBy": "ops", "comment": "maintenance"}
    resp = api.post("/silences", broad)
    assert resp.status_code == 422 and "matchers" in resp.json()["message"]
    resp = api.post("/silences", dict(broad, allowBroad=True))
    assert resp.status_code == 201, resp.text
    sid = resp.json()["data"]["silenceId"]
    wait_until(lambda: any(s["id"] == sid for s in httpx.get(f"{api.url}/silences", timeout=10)
                           .json()["data"]["silences"]), 10, "the silence listed")
    # the silence reaches every funnel partition before the alert (same
    # partition, earlier offset), so the alert is silenced
    rid = kafka.send_alerts([{"rule": "Disk", "asset": "h14", "severity": "critical"}])[0]
    entry = wait_until(lambda: kafka.ledger_by_id().get(rid) if kafka.read_ledger() is not None else None,
                       30, "the silenced ledger entry")[0]
    assert entry["outcome"] == "silenced" and entry["silence_id"] == sid
    listed = wait_until(lambda: [s for s in httpx.get(f"{api.url}/silences", timeout=10)
                                 .json()["data"]["silences"] if s["id"] == sid and s["silenced"] == 1],
                        10, "the silence's count")
    assert listed[0]["status"] == "active"
    resp = httpx.delete(f"{api.url}/silences/{sid}", timeout=10)
    assert resp.status_code == 200 and resp.json()["data"]["silence"]["status"] == "expired"
    assert httpx.delete(f"{api.url}/silences/nope", timeout=10).status_code == 404


def test_fire_then_resolve_in_quick_succession_never_stays_firing(alerting, receiver, tmp_path):
    # given ten alerts each fired and resolved ~10 ms apart, in separate requests
    cfg = write_config(tmp_path / "alerting.yaml",
                       [{"name": "oncall", "url": receiver.url("/flap"), "format": "native"}],
                       grouping={"group_by": ["rule"], "batch_size": 50},
                       timing={"group_wait": "2s", "group_interval": "2s", "repeat_interval": "1h"})
    stack, api, kafka = alerting(cfg)
    for i in range(10):
        for status in ("firing", "resolved"):
            resp = api.post("/alerts", {"rule": "Flap", "asset": f"z{i}", "severity": "warning",
                                        "status": status})
            assert resp.status_code in (200, 202), resp.text
    # then the receiver learns that every one of them is resolved (order kept per alert); a
    # resolve the funnel decided after the group's first message left comes one group_interval
    # later, so this waits for the last word on each alert, not for the first message
    seen: dict[str, str] = {}

    def final_states():
        seen.clear()
        for hit in receiver.accepted("/flap"):
            for a in native_alerts(hit):
                seen[a["asset"]] = a["status"]
        return len(seen) == 10 and set(seen.values()) == {"resolved"}

    try:
        wait_until(final_states, 30, "all ten alerts resolved at the webhook")
    except AssertionError as e:
        raise AssertionError(f"{e}; last seen: {seen}") from None
