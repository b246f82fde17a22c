"""Issue 9.5: the router decides receiver and fingerprint once and carries
them in the funnel command; route matchers are compiled at config load."""
from __future__ import annotations

import alerting.config
import alerting.matchers as matchers
from alerting.config import parse_config
from alerting.funnel import Funnel
from alerting.routing import Decision, decide
from alerting.wire import RawAlert, route_alert

CONFIG = parse_config({
    "receivers": [{"name": "a", "url": "http://127.0.0.1:9/a"},
                  {"name": "db", "url": "http://127.0.0.1:9/db"}],
    "route": {"receiver": "a", "routes": [{"matchers": ['team="db"'], "receiver": "db"}]},
})


def test_route_matchers_are_not_parsed_per_alert(monkeypatch):
    calls = []
    real = matchers.parse_matcher
    for module in (matchers, alerting.config):
        monkeypatch.setattr(module, "parse_matcher", lambda m: calls.append(m) or real(m))
    for i in range(50):
        receiver, cmd = route_alert(CONFIG, RawAlert(f"e{i}:0", {
            "rule": "Disk", "asset": f"h{i}", "severity": "warning", "labels": {"team": "db"}}, 1.0))
        assert receiver == "db" and cmd["receiver"] == "db" and len(cmd["fp"]) == 16
    assert calls == []


def test_the_funnel_takes_the_carried_decision():
    _r, cmd = route_alert(CONFIG, RawAlert("e1:0", {"rule": "Disk", "asset": "h1",
                                                   "severity": "warning"}, 1.0))
    from alerting.model import Alert

    alert = Alert.from_dict(cmd["alert"])
    assert decide(CONFIG, alert) == [Decision("a", cmd["fp"], "0")]
    f = Funnel(CONFIG)
    # a decision the funnel would not have made itself is taken as given
    f.ingest(alert, 1.0, raw_id="e1:0", decision=Decision("db", "0123456789abcdef"))
    assert set(f.state["episodes"]) == {"0123456789abcdef"}
    assert [g["receiver"] for g in f.state["groups"].values()] == ["db"]


TREE = parse_config({
    "receivers": [{"name": n, "url": f"http://127.0.0.1:9/{n}"} for n in ("a", "dba", "audit")],
    "route": {"receiver": "a", "routes": [
        {"matchers": ['team="db"'], "receiver": "dba", "continue": True,
         "routes": [{"matchers": ['severity="critical"'], "group_wait": 5}]},
        {"matchers": ['severity="critical"'], "receiver": "audit"}]},
    "timing": {"group_wait": 30, "group_interval": 30, "repeat_interval": 3600},
})


def test_continue_routes_get_one_command_each_with_the_alertmanager_fingerprint():
    from alerting.dedupe import fingerprint
    from alerting.model import Alert
    from alerting.wire import route_alerts

    am = {"labels": {"alertname": "Disk", "instance": "db1", "severity": "critical", "team": "db"},
          "startsAt": "2026-11-30T03:00:00Z"}
    got = route_alerts(TREE, RawAlert("e1:0", am, 1_796_007_660.0))  # a minute after startsAt
    assert [(k, c["receiver"], c["route"], c.get("copy", 0)) for k, c in got] == [
        ("dba", "dba", "0.0.0", 0), ("audit", "audit", "0.1", 1)]
    alert = Alert.from_dict(got[0][1]["alert"])
    fp = fingerprint(alert, TREE.dedupe.fingerprint_labels)  # Alertmanager's identity (labelset)
    assert [c["fp"] for _k, c in got] == [fp, f"{fp}~0.1"]
    assert [c["id"] for _k, c in got] == ["e1:0", "e1:0~audit"]


def _state(f):
    return ({fp: (ep["group"], ep.get("route")) for fp, ep in f.state["episodes"].items()},
            {gid: (g["receiver"], g.get("route"), g.get("timing")) for gid, g in f.state["groups"].items()})


def test_carried_decisions_give_what_the_funnel_decides_itself():
    from alerting.runner import FunnelRunner
    from alerting.wire import route_alerts

    am = {"rule": "Disk", "asset": "db1", "severity": "critical", "labels": {"team": "db"}}
    local = Funnel(TREE)
    local.ingest(am, 1.0, raw_id="e1:0")  # no decision: the funnel walks the tree itself
    runner = FunnelRunner(TREE, {}, lambda: 1.0)
    # both receivers' commands on ONE funnel partition: neither is taken for a replay
    for off, (_k, cmd) in enumerate(route_alerts(TREE, RawAlert("e1:0", am, 1.0))):
        cmd["src"] = [0, 7, 0]
        assert runner.apply(0, off, command_roundtrip(cmd)).skipped is False
    assert _state(runner.state(0).funnel) == _state(local)
    # a replay of both is recognised
    for off, (_k, cmd) in enumerate(route_alerts(TREE, RawAlert("e1:0", am, 1.0)), start=2):
        cmd["src"] = [0, 7, 0]
        assert runner.apply(0, off, command_roundtrip(cmd)).skipped is True


def test_receivers_sharing_a_partition_keep_their_own_raw_watermark():
    from alerting.runner import FunnelRunner
    from alerting.wire import route_alerts

    runner = FunnelRunner(TREE, {}, lambda: 1.0)
    # the router sends receiver a's alert (index 1) before receiver audit's (index 0)
    cmds = []
    for i, a in enumerate([{"rule": "X", "asset": "h", "severity": "critical"},
                           {"rule": "Y", "asset": "h", "severity": "warning"}]):
        for _k, cmd in route_alerts(TREE, RawAlert(f"e:{i}", a, 1.0)):
            cmds.append(dict(cmd, src=[0, 3, i]))
    cmds.sort(key=lambda c: c["receiver"] != "a")
    assert [c["receiver"] for c in cmds] == ["a", "audit"]
    for off, cmd in enumerate(cmds):
        assert runner.apply(0, off, command_roundtrip(cmd)).skipped is False
    assert runner.state(0).funnel.counters()["received"] == 2


def command_roundtrip(cmd):
    from alerting.wire import command, parse_command
    return parse_command(command(**cmd))
