"""The funnel's stages listed once, the one reader of alert command shapes,
and what a tick reports it changed."""
from __future__ import annotations

from alerting.commands import origin, read_alert_command
from alerting.config import parse_config
from alerting.funnel import Funnel
from alerting.model import Alert
from alerting.routing import Decision
from alerting.stages import STAGES

TREE = parse_config({
    "receivers": [{"name": n, "url": f"http://127.0.0.1:9/{n}"} for n in ("a", "dba", "audit")],
    "route": {"receiver": "a", "routes": [
        {"matchers": ['team="db"'], "receiver": "dba", "continue": True},
        {"matchers": ['severity="critical"'], "receiver": "audit"}]},
    "timing": {"group_wait": 30, "group_interval": 30, "repeat_interval": 3600},
})
ALERT = Alert.from_dict({"rule": "Disk", "asset": "db1", "severity": "critical",
                         "labels": {"team": "db"}, "annotations": {}, "status": "firing",
                         "time": 1.0})


def test_the_funnel_is_its_stages_in_pipeline_order():
    names = [s.__module__.rsplit(".", 1)[1] for s in STAGES]
    assert names == ["dedupe", "inhibit", "silence", "group", "bucket", "dispatch"]
    assert Funnel.__mro__[1:1 + len(STAGES)] == STAGES


def test_a_decided_command_is_taken_as_given():
    cmd = {"v": 1, "kind": "alert", "id": "e1:0", "alert": ALERT.to_state(), "received_at": 0.5,
           "receiver": "audit", "fp": "0123456789abcdef", "route": "0.1", "src": [2, 7, 0]}
    read = read_alert_command(TREE, cmd)
    assert read.decisions == [("e1:0", Decision("audit", "0123456789abcdef", "0.1"))]
    assert read.received_at == 0.5 and read.rejected is None
    assert origin(cmd) == (2, 7, 0, 0, "audit")


def test_an_undecided_command_is_routed_by_the_routers_rule_with_its_copies():
    read = read_alert_command(TREE, {"v": 1, "kind": "alert", "id": "e1:0",
                                     "alert": ALERT.to_state()})
    assert [(rid, d.receiver, d.route) for rid, d in read.decisions] == [
        ("e1:0", "dba", "0.0"), ("e1:0~audit", "audit", "0.1")]
    fp = read.fingerprints[0]
    assert read.fingerprints == [fp, f"{fp}~0.1"]


def test_unreadable_commands_are_rejections_naming_why():
    invalid = read_alert_command(TREE, {"id": "e1:0", "reason": "severity: bad"})
    forged = read_alert_command(TREE, {"id": "e1:1", "alert": {"rule": 5}})
    assert (invalid.alert, invalid.rejected) == (None, "severity: bad")
    assert forged.alert is None and forged.rejected.startswith("(alert): unreadable")


def test_a_step_reports_the_groups_a_released_alert_joins():
    f = Funnel(TREE)
    f.add_silence({"matchers": ['asset="db1"'], "author": "ops", "comment": "why",
                   "starts_at": 0, "ends_at": 100}, 0)
    entries = f.ingest(ALERT, 1.0)  # two routes: two copies
    assert [e.outcome for e in entries] == ["silenced", "silenced"]
    assert len(f.muted()) == 2 and f.muted() == set(f.state["episodes"])
    assert f.step(50.0).groups == {}
    step = f.step(101.0)  # the silence ended: each copy joins its group
    assert len(f.state["groups"]) == 2
    assert step.groups == {gid: [] for gid in f.state["groups"]} and f.muted() == set()
