"""Identity: Alertmanager-form alerts are identified by their whole label set
(Alertmanager's fingerprint); native alerts by rule + asset (issue 11, item 1)."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from alert_harness import case_config, ev, run

from alerting.dedupe import fingerprint, labelset_fingerprint
from alerting.intake import format_time, from_alertmanager_alert, from_native


@pytest.mark.parametrize("labels, expected", [
    # the vectors of prometheus/common model/signature_test.go (decimal there)
    ({}, 14695981039346656037),
    ({"name": "garland, briggs", "fear": "love is not enough"}, 5799056148416392346),
    ({"first-label": "first-label-value"}, 5146282821936882169),
    ({"first-label": "first-label-value", "second-label": "second-label-value"}, 3195800080984914717),
    ({"first-label": "first-label-value", "second-label": "second-label-value",
      "third-label": "third-label-value"}, 13843036195897128121),
])
def test_labelset_fingerprint_is_alertmanagers(labels, expected):
    assert labelset_fingerprint(labels) == f"{expected:016x}"


def _fnv_by_hand(labels):
    """The rule spelt out once more, byte by byte."""
    h = 14695981039346656037
    for name in sorted(labels):
        for part in (name, labels[name]):
            for b in part.encode("utf-8", "surrogatepass") + b"\xff":
                h = ((h ^ b) * 1099511628211) & (2**64 - 1)
    return f"{h:016x}"


@given(st.dictionaries(st.text(min_size=1), st.text(), max_size=8))
def test_labelset_fingerprint_is_the_byte_rule(labels):
    assert labelset_fingerprint(labels) == _fnv_by_hand(labels)


def test_labelset_fingerprint_of_odd_and_long_labels():
    for labels in ({"alertname": "PodDown", "pod": "api-\u00e9", "cut": "x\ud83d",
                    "id": uuid.uuid4().hex}, {"alertname": "PodDown", "blob": "v" * 8192}):
        assert labelset_fingerprint(labels) == _fnv_by_hand(labels)


def prom(pod: str, t: float, **labels: str) -> dict:
    """What Prometheus POSTs on each evaluation: endsAt in the future."""
    return {"labels": {"alertname": "PodDown", "instance": "10.0.0.7:9100", "pod": pod, **labels},
            "annotations": {"summary": f"{pod} down"}, "startsAt": format_time(0.0),
            "endsAt": format_time(t + 60), "generatorURL": "http://prom/graph"}


def test_alertmanager_alert_fingerprint_is_its_whole_label_set():
    a = from_alertmanager_alert(prom("api-1", 0), 0)
    b = from_alertmanager_alert(prom("api-2", 0), 0)
    # rule and asset (alertname, instance) agree; the label sets do not
    assert (a.rule, a.asset) == (b.rule, b.asset)
    assert fingerprint(a) == labelset_fingerprint(a.labels) != fingerprint(b)
    # fingerprint_labels is for native alerts only
    assert fingerprint(a, ["rule"]) == fingerprint(a)
    # native alerts keep rule + asset: a label that changes is not a new alert
    n1 = from_native({"rule": "PodDown", "asset": "h1", "severity": "warning", "labels": {"pod": "1"}}, 0)
    n2 = from_native({"rule": "PodDown", "asset": "h1", "severity": "warning", "labels": {"pod": "2"}}, 0)
    assert fingerprint(n1) == fingerprint(n2)


@pytest.mark.parametrize("restart", [False, True], ids=["live", "restart"])
def test_two_pods_of_one_rule_are_two_alerts(restart):
    # given Prometheus firing PodDown for pod api-1 and api-2 (same alertname
    # and instance), re-sent every 15 s for 3 minutes (the failing case)
    events = [(t, prom(pod, t)) for t in range(0, 181, 15) for pod in ("api-1", "api-2")]
    # when the funnel runs
    r = run(case_config(), events, 240, restart_every_tick=restart)
    # then both pods reach the receiver as separate alerts in the first message
    msgs = r.messages()
    first = msgs[0][1].alerts()
    assert sorted(a["labels"]["pod"] for a in first) == ["api-1", "api-2"]
    assert len({a["fingerprint"] for a in first}) == 2
    assert {a["fingerprint"] for a in first} == {labelset_fingerprint(prom(p, 0)["labels"])
                                                 for p in ("api-1", "api-2")}
    # and only each pod's own re-sends are repeats, never the other pod
    c = r.funnel.counters()
    assert r.outcomes() == {"delivered": 2, "deduplicated": 24}
    assert c["dedupe_reasons"] == {"repeat": 24}


def test_one_pod_resolving_leaves_the_other_firing():
    # given both pods firing, then api-2 resolved by Prometheus (endsAt in the past)
    resolved = dict(prom("api-2", 0), endsAt=format_time(90))
    # (Prometheus re-sends the firing api-1 on every evaluation, each time a later endsAt)
    events = [(0, prom("api-1", 0)), (0, prom("api-2", 0)), (100, resolved)]
    events += [(t, prom("api-1", t)) for t in range(30, 200, 30)]
    events.sort(key=lambda e: e[0])
    r = run(case_config(), events, 200)
    # then the second message tells api-2 resolved, api-1 still firing
    (_, m1), (_, m2) = r.messages()
    assert len(m1.alerts()) == 2
    [view] = m2.alerts()
    assert (view["labels"]["pod"], view["status"]) == ("api-2", "resolved")
    assert m2.sections[0]["counts"]["still_firing"] == 1


def test_native_alerts_keep_rule_and_asset_identity():
    # given native alerts for one rule and asset whose labels differ
    events = [(0, ev("Disk", "h1", labels={"mount": "/"})), (5, ev("Disk", "h1", labels={"mount": "/var"}))]
    r = run(case_config(), events, 100)
    # then they are one alert: the second is a repeat
    assert r.outcomes() == {"delivered": 1, "deduplicated": 1}
    assert len(r.messages()[0][1].alerts()) == 1


def test_the_alert_view_shows_alertmanagers_fingerprint_on_every_route():
    from alerting.config import AlertingConfig
    from alerting.view import alert_view

    config = AlertingConfig.model_validate({"receivers": [{"name": "hook", "url": "http://127.0.0.1:9/"}],
                                            "route": {"receiver": "hook"}})
    alert = from_alertmanager_alert(prom("api-1", 0), 0)
    fp = fingerprint(alert)
    for identity in (fp, f"{fp}~1", f"{fp}~1~2"):  # the first route, a continue route, a copy
        ep = {"fp": identity, "alert": alert.to_dict(), "last_seen": 0.0, "started_at": 0.0}
        assert alert_view(ep, config, {})["fingerprint"] == labelset_fingerprint(alert.labels) == fp
