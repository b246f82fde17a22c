"""Inhibition rules as Alertmanager has them (issue 11, item 3): a firing
source mutes its targets while it fires; inhibited raw alerts are counted
(their own ledger outcome) and released when the source resolves."""
from __future__ import annotations

import json

import pytest
from alert_harness import case_config, ev, run

from alerting.config import ConfigError, load_config
from alerting.dedupe import labelset_fingerprint
from alerting.funnel import Funnel
from alerting.intake import format_time

RULE = {"source_matchers": ['severity="critical"'], "target_matchers": ['severity="warning"'],
        "equal": ["instance"]}


def cfg(*rules, **over):
    return case_config(inhibit_rules=list(rules or [RULE]), **over)


def am(name: str, instance: str, severity: str, t: float, resolved_at: float | None = None) -> dict:
    """A Prometheus-form alert sent at ``t`` (resolved when ``resolved_at`` is given)."""
    return {"labels": {"alertname": name, "instance": instance, "severity": severity},
            "startsAt": format_time(0.0),
            # a long evaluation window: the alerts stay firing through the test
            # unless resolved (a firing alert resolves at its endsAt)
            "endsAt": format_time(resolved_at if resolved_at is not None else t + 600)}


def fp(alert: dict) -> str:
    return labelset_fingerprint(alert["labels"])


@pytest.mark.parametrize("restart", [False, True], ids=["live", "restart"])
def test_source_fires_targets_muted_and_counted_then_delivered_when_it_resolves(restart):
    # given NodeDown (critical) firing on n1 at 0, then warnings on n1 (targets)
    # and a warning on n2 (other instance: not a target of that source)
    src = am("NodeDown", "n1", "critical", 0)
    events = [(0, src)]
    events += [(t, am(name, "n1", "warning", t)) for t in (5, 20, 40) for name in ("HighLatency", "ErrorRate")]
    events += [(5, am("HighLatency", "n2", "warning", 5))]
    # and the source resolves at 100
    events += [(100, am("NodeDown", "n1", "critical", 100, resolved_at=100))]
    r = run(cfg(), events, 300, restart_every_tick=restart)
    # then while the source fires only it and the n2 warning are sent
    before = [(a["labels"]["alertname"], a["labels"]["instance"], a["status"])
              for t, m in r.messages() if t < 100 for a in m.alerts()]
    assert sorted(before) == [("HighLatency", "n2", "firing"), ("NodeDown", "n1", "firing")]
    # and the 6 target raw alerts are each ledgered inhibited, naming the source
    inhibited = [e for e in r.ledger if e.outcome == "inhibited"]
    assert len(inhibited) == 6 and all(e.inhibited_by == [fp(src)] for e in inhibited)
    c = r.funnel.counters()
    assert c["inhibited"] == 6 and c["inhibited_by_rule"] == {"0": 6} and c["balanced"]
    # and once the source resolved, both targets are delivered (with the resolve)
    after = [(a["labels"]["alertname"], a["status"]) for t, m in r.messages() if t >= 100
             for a in m.alerts() if a["labels"]["instance"] == "n1"]
    assert sorted(after) == [("ErrorRate", "firing"), ("HighLatency", "firing"), ("NodeDown", "resolved")]
    assert all(t <= 130 for t, m in r.messages() if t >= 100)


def test_inhibited_alerts_show_in_the_open_alerts_with_inhibited_by():
    f = Funnel(cfg())
    src, tgt = am("NodeDown", "n1", "critical", 0), am("HighLatency", "n1", "warning", 0)
    f.ingest(src, 0)
    [entry] = f.ingest(tgt, 1)
    assert (entry.outcome, entry.inhibited_by) == ("inhibited", [fp(src)])
    views = {v["fingerprint"]: v for v in f.open_alerts(2)}
    assert views[fp(tgt)]["status"] == {"state": "suppressed", "silencedBy": [], "inhibitedBy": [fp(src)]}
    assert views[fp(src)]["status"]["state"] == "active"
    assert views[fp(tgt)]["labels"] == tgt["labels"] and views[fp(tgt)]["receivers"] == [{"name": "oncall"}]
    # when the source resolves, the target is released at the next tick
    f.ingest(am("NodeDown", "n1", "critical", 3, resolved_at=3), 3)
    f.tick(4)
    assert f.open_alerts(4)[0]["status"] == {"state": "active", "silencedBy": [], "inhibitedBy": []}


def test_a_target_already_notified_is_muted_when_its_source_fires():
    # given a warning on n1 notified at 30, then the critical source fires at 60
    # and the warning resolves at 90 while muted
    events = [(0, am("HighLatency", "n1", "warning", 0)), (60, am("NodeDown", "n1", "critical", 60)),
              (90, am("HighLatency", "n1", "warning", 90, resolved_at=90))]
    r = run(cfg(), events, 200)
    msgs = [(t, a["labels"]["alertname"], a["status"]) for t, m in r.messages() for a in m.alerts()]
    # then the source is told, the muted target's resolve is not (Alertmanager mutes it too)
    assert (30, "HighLatency", "firing") in msgs and any(n == "NodeDown" for _, n, _ in msgs)
    assert not any(n == "HighLatency" and s == "resolved" for _, n, s in msgs)
    assert [e.outcome for e in r.ledger if e.outcome == "inhibited"] == ["inhibited"]
    assert r.funnel.counters()["balanced"] and r.funnel.counters()["pending"] == 0


def test_an_alert_matching_both_sides_does_not_inhibit_itself_nor_its_peers():
    # given a rule whose source and target sides both match any Lat alert
    rule = {"source_matchers": ['alertname="Lat"'], "target_matchers": ['alertname="Lat"'], "equal": []}
    events = [(0, am("Lat", "n1", "warning", 0)), (1, am("Lat", "n2", "warning", 1))]
    r = run(cfg(rule), events, 60)
    # then neither mutes the other (Alertmanager's two-sided exclusion)
    assert r.outcomes() == {"delivered": 2}


def test_equal_labels_must_agree_and_absent_counts_as_empty():
    rule = dict(RULE, equal=["cluster"])
    f = Funnel(cfg(rule))
    f.ingest({"labels": {"alertname": "Down", "severity": "critical", "cluster": "a"}}, 0)
    # another cluster: not inhibited; no cluster label on either side: equal ("" == "")
    assert f.ingest({"labels": {"alertname": "Lat", "severity": "warning", "cluster": "b"}}, 1) == []
    f.ingest({"labels": {"alertname": "Down2", "severity": "critical"}}, 2)
    [e] = f.ingest({"labels": {"alertname": "Lat", "severity": "warning"}}, 3)
    assert e.outcome == "inhibited"


def test_native_alerts_inhibit_by_vocabulary_labels():
    rule = {"source_matchers": ['rule="NodeDown"'], "target_matchers": ['severity!="critical"'],
            "equal": ["asset"]}
    events = [(0, ev("NodeDown", "h1", "critical")), (1, ev("Disk", "h1")), (1, ev("Disk", "h2"))]
    r = run(cfg(rule), events, 60)
    assert r.outcomes() == {"delivered": 2, "inhibited": 1}


def test_memory_is_bounded_nothing_left_after_everything_resolved():
    # given 200 sources and 200 targets that fire, then all resolve
    f = Funnel(cfg())
    for i in range(200):
        f.ingest(am("NodeDown", f"n{i}", "critical", 0), 0)
        f.ingest(am("Lat", f"n{i}", "warning", 0), 0)
    assert len(f._inhibited) == 200 and sum(len(b) for b in f._sources[0].values()) == 200
    for i in range(200):
        f.ingest(am("NodeDown", f"n{i}", "critical", 10, resolved_at=10), 10)
        f.ingest(am("Lat", f"n{i}", "warning", 10, resolved_at=10), 10)
    for t in range(10, 400):
        for m in f.tick(t):
            f.delivered(m.id, t)
    # then no index entry, mark or episode remains
    assert f._inhibited == set() and f._sources == [{}] and f._source_keys == {}
    assert f.state["episodes"] == {} and f.state["groups"] == {} and f.state["silenced"] == {}
    assert f.counters()["balanced"] and f.counters()["pending"] == 0


def test_inhibit_rules_are_validated_at_start_up_naming_the_key(tmp_path):
    base = {"receivers": [{"name": "r", "url": "http://x/h"}], "route": {"receiver": "r"}}
    for rules, key in [
        ([{"source_matchers": ['sev=~"("'], "target_matchers": ['a="b"']}], "inhibit_rules.0.source_matchers"),
        ([{"source_matchers": ['a="b"'], "target_matchers": []}], "inhibit_rules.0.target_matchers"),
        ([{"source_match": {"a": "b"}, "target_matchers": ['a="b"']}], "inhibit_rules.0.source_match"),
        ([{"source_matchers": ['a="b"'], "target_matchers": ['a="c"'], "equal": "x"}], "inhibit_rules.0.equal"),
    ]:
        path = tmp_path / "a.yaml"
        path.write_text(json.dumps(dict(base, inhibit_rules=rules)))
        with pytest.raises(ConfigError) as err:
            load_config(path)
        assert key in str(err.value), str(err.value)
    path.write_text(json.dumps(dict(base, inhibit_rules=[RULE])))
    assert load_config(path).inhibit_rules[0].equal == ["instance"]


def test_a_repeat_with_other_labels_leaves_the_source_as_a_restarted_worker_reads_it():
    # given a native source firing in dc "a", then a repeat of it (same rule and
    # asset, inside the cooldown) that says dc "b": the episode keeps the first alert
    rule = {"source_matchers": ['rule="NodeDown"'], "target_matchers": ['rule="Disk"'],
            "equal": ["dc"]}
    live = Funnel(cfg(rule))
    for t, dc in [(0, "a"), (1, "b")]:
        live.ingest({"rule": "NodeDown", "asset": "h1", "severity": "critical",
                     "labels": {"dc": dc}}, t)
    restarted = Funnel(cfg(rule), state=json.loads(json.dumps(live.state)))
    # when targets in either dc arrive, then the live worker and a restarted one agree
    for asset, dc in [("h2", "a"), ("h3", "b")]:
        target = {"rule": "Disk", "asset": asset, "severity": "warning", "labels": {"dc": dc}}
        assert ([e.outcome for e in live.ingest(target, 2)]
                == [e.outcome for e in restarted.ingest(target, 2)]
                == (["inhibited"] if dc == "a" else []))


def test_a_reload_without_inhibit_rules_frees_the_inhibited_at_the_next_tick():
    # given a target inhibited under its source
    f = Funnel(cfg())
    src, tgt = am("NodeDown", "n1", "critical", 0), am("HighLatency", "n1", "warning", 0)
    f.ingest(src, 0)
    assert f.ingest(tgt, 1)[0].outcome == "inhibited"
    # when the file in use loses its inhibit rules (a reload rebuilds the funnel from its state)
    g = Funnel(case_config(), f.state)
    g.tick(2)
    # then the target is active again and goes out with its group, as Alertmanager sends it
    assert {v["fingerprint"]: v["status"]["state"] for v in g.open_alerts(2)}[fp(tgt)] == "active"
    sent = [a["labels"]["alertname"] for t in (40, 80) for m in g.tick(t) for a in m.alerts()]
    assert "HighLatency" in sent
