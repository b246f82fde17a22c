"""What a tick changes is what a restarted worker reads, and a tick whose
only news was a suppressed transient sends nothing (docs/alerting.md)."""
from __future__ import annotations

from alerting.config import parse_config
from alerting.funnel import Funnel
from alerting.intake import format_time
from alerting.runner import FunnelRunner
from alerting.store import PartitionState
from alerting.wire import RawAlert, route_alert

def _config(group_interval: float):
    return parse_config({
        "receivers": [{"name": "a", "url": "http://127.0.0.1:9/a"}], "route": {"receiver": "a"},
        "dedupe": {"cooldown": 3600, "suppress_transient": True},
        "timing": {"group_wait": 0, "group_interval": group_interval, "repeat_interval": 3600,
                   "resolve_timeout": 86400}})


def _assets(messages) -> list[tuple[bool, list[str]]]:
    return [(s["reminder"], [a["asset"] for a in s["alerts"]]) for m in messages for s in m.sections]


def test_a_group_whose_only_news_was_a_suppressed_transient_sends_no_reminder_early():
    # given a group of h1, notified at 1,000
    f = Funnel(_config(group_interval=60))
    f.ingest({"rule": "Disk", "asset": "h1", "severity": "warning"}, 1_000.0, raw_id="a")
    [sent] = f.tick(1_000.0)
    f.delivered(sent.id, 1_000.5)
    # when h2 joins it and resolves before the group_interval ends (a transient)
    f.ingest({"rule": "Disk", "asset": "h2", "severity": "warning"}, 1_010.0, raw_id="b")
    f.ingest({"rule": "Disk", "asset": "h2", "severity": "warning",
              "status": "resolved"}, 1_020.0, raw_id="c")
    # then the group's next evaluation drops h2 and sends no reminder of h1
    assert [m for t in range(1_021, 1_200, 10) for m in f.tick(float(t))] == []
    assert f.counters()["transient_suppressed"] == 1 and f.counters()["balanced"]
    # and the reminder comes when repeat_interval has passed since h1 was sent
    assert f.tick(1_000.0 + 3_599) == []
    assert _assets(f.tick(1_000.0 + 3_600)) == [(True, ["h1"])]


def test_an_alert_flapping_inside_group_interval_does_not_hold_back_the_reminders():
    f = Funnel(_config(group_interval=60))
    f.ingest({"rule": "Disk", "asset": "h1", "severity": "warning"}, 1_000.0, raw_id="a")
    [sent] = f.tick(1_000.0)
    f.delivered(sent.id, 1_000.0)
    reminders = []
    for t in range(1_001, 1_000 + 2 * 3_600 + 10):  # h2 fires and resolves every 2 minutes
        if t % 120 in (10, 20):
            f.ingest({"rule": "Disk", "asset": "h2", "severity": "warning",
                      "status": "firing" if t % 120 == 10 else "resolved"}, float(t))
        for m in f.tick(float(t)):
            reminders.append((t, _assets([m])))
            f.delivered(m.id, float(t))
    assert reminders == [(4_600, [(True, ["h1"])]), (8_200, [(True, ["h1"])])]
    assert f.counters()["transient_suppressed"] == 60


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_an_alert_released_and_dropped_in_one_tick_leaves_its_group_written():
    clock, table, config = Clock(), {}, _config(group_interval=1)
    runner = FunnelRunner(config, table, clock=clock)
    offsets = iter(range(100))

    def run(cmd):
        return runner.apply_batch(0, [(next(offsets), cmd)])

    def alert(n: int, asset: str, ends_in: float) -> dict:
        body = {"rule": "Disk", "asset": asset, "severity": "warning", "endsAt": format_time(clock.now + ends_in)}
        return route_alert(config, RawAlert(f"e{n}:0", body, clock.now))[1]

    # given a notified group of h1, and h2 (same group) silenced until 1,010
    [sent] = run(alert(0, "h1", 3600)).messages
    run({"kind": "result", "message_id": sent.id, "ok": True})
    run({"kind": "silence", "silence": {"id": "s1", "matchers": ['asset="h2"'], "author": "ops",
                                         "comment": "x", "endsAt": format_time(1_010.0)}})
    clock.now = 1_001.0
    assert [e["outcome"] for e in run(alert(1, "h2", 9)).ledger] == ["silenced"]
    # when one tick releases h2 into the group and ends it (its end passed too)
    clock.now = 1_011.0
    run({"kind": "tick"})
    live = runner.state(0).funnel.state
    assert live["counters"]["transient_suppressed"] == 1
    # then a restarted worker reads the group the tick left
    reloaded = PartitionState(0, table, config).funnel.state
    assert reloaded["groups"] == live["groups"]
    assert reloaded["episodes"] == live["episodes"]


def test_an_alert_firing_again_under_a_silence_keeps_its_episode_and_is_sent_when_it_ends():
    config = parse_config({
        "receivers": [{"name": "a", "url": "http://127.0.0.1:9/a"}], "route": {"receiver": "a"},
        "timing": {"group_wait": 1, "group_interval": 1, "repeat_interval": 3600,
                   "resolve_timeout": 86400},
        "inhibit_rules": [{"source_matchers": ['rule="Down"'], "target_matchers": ['rule="Disk"'],
                           "equal": ["dc"]}]})
    f = Funnel(config)
    down = {"rule": "Down", "asset": "h2", "severity": "critical", "labels": {"dc": "a"}}
    # given Down on h2 fired and resolved inside group_wait (its resolve is pending)
    f.ingest(down, 1_000.0, raw_id="r1")
    f.ingest(dict(down, status="resolved"), 1_000.0, raw_id="r2")
    # when it fires again under a silence, and the group is evaluated
    f.add_silence({"matchers": ['asset="h2"'], "author": "ops", "comment": "x",
                   "endsAt": format_time(1_010.0)}, 1_000.5, silence_id="s1")
    assert [e.outcome for e in f.ingest(down, 1_000.5, raw_id="r3")] == ["silenced"]
    assert f.tick(1_001.0) == []
    # then it is still firing: it inhibits its targets, and it is sent once the silence ends
    disk = {"rule": "Disk", "asset": "h9", "severity": "warning", "labels": {"dc": "a"}}
    assert [e.outcome for e in f.ingest(disk, 1_002.0, raw_id="r4")] == ["inhibited"]
    sent = [a["asset"] for t in range(1_011, 1_015) for m in f.tick(float(t))
            for s in m.sections for a in s["alerts"] if a["status"] == "firing"]
    assert sent == ["h2"]


def test_an_alert_firing_again_while_inhibited_keeps_its_episode_when_its_resolve_is_transient():
    config = parse_config({
        "receivers": [{"name": "a", "url": "http://127.0.0.1:9/a"}], "route": {"receiver": "a"},
        "timing": {"group_wait": 1, "group_interval": 1, "repeat_interval": 3600,
                   "resolve_timeout": 86400},
        "dedupe": {"suppress_transient": True},
        "inhibit_rules": [{"source_matchers": ['rule="Down"'], "target_matchers": ['rule="Disk"'],
                           "equal": ["dc"]}]})
    f = Funnel(config)
    down = {"rule": "Down", "asset": "h1", "severity": "critical", "labels": {"dc": "b"}}
    disk = {"rule": "Disk", "asset": "h1", "severity": "warning", "labels": {"dc": "a"}}
    # given Down firing in dc b, and Disk (dc a: not inhibited) fired and resolved unsent
    f.ingest(down, 1_000.0, raw_id="r1")
    f.ingest(disk, 1_000.0, raw_id="r2")
    f.ingest(dict(disk, status="resolved"), 1_000.0, raw_id="r3")
    # when Disk fires again in dc b (inhibited) and its group drops the transient resolve
    again = dict(disk, labels={"dc": "b"})
    assert [e.outcome for e in f.ingest(again, 1_000.5, raw_id="r4")] == ["inhibited"]
    sent = _delivered(f, 1_001, 1_002)
    assert f.counters()["transient_suppressed"] == 1 and ("Disk", "firing") not in sent
    # then once Down resolves, Disk (still firing) is delivered
    f.ingest(dict(down, status="resolved"), 1_002.0, raw_id="r5")
    assert ("Disk", "firing") in _delivered(f, 1_003, 1_008)


def _delivered(f: Funnel, start: int, stop: int) -> list[tuple[str, str]]:
    """(rule, status) of the alerts sent by ticks each second in [start, stop),
    every message acknowledged at once."""
    out = []
    for t in range(start, stop):
        for m in f.tick(float(t)):
            out += [(a["rule"], a["status"]) for s in m.sections for a in s["alerts"]]
            f.delivered(m.id, float(t))
    return out


def test_an_episode_a_ticked_group_drops_is_deleted_from_the_table_too():
    clock, table, config = Clock(), {}, _config(group_interval=2)
    runner = FunnelRunner(config, table, clock=clock)
    offsets = iter(range(100))

    def run(cmd):
        return runner.apply_batch(0, [(next(offsets), cmd)])

    def alert(n: int, asset: str, status: str = "firing") -> dict:
        body = {"rule": "Disk", "asset": asset, "severity": "warning", "status": status}
        return route_alert(config, RawAlert(f"e{n}:0", body, clock.now))[1]

    def silence(sid: str, asset: str, until: float) -> dict:
        return {"kind": "silence", "silence": {"id": sid, "matchers": [f'asset="{asset}"'],
                                               "author": "ops", "comment": "x",
                                               "endsAt": format_time(until)}}

    # given h2 sent and acknowledged, then its resolve in flight
    [first] = run(alert(0, "h2")).messages
    run({"kind": "result", "message_id": first.id, "ok": True})
    clock.now = 1_001.0
    run(alert(1, "h2", "resolved"))
    clock.now = 1_002.0
    assert len(run({"kind": "tick"}).messages) == 1
    # and h2 silenced for good, h3 silenced until 1,003.5 and firing (never grouped)
    clock.now = 1_002.5
    run(silence("s2", "h2", 2_000.0))
    run(silence("s3", "h3", 1_003.5))
    clock.now = 1_003.0
    assert [e["outcome"] for e in run(alert(2, "h3")).ledger] == ["silenced"]
    # when a tick releases h3 into the group, whose evaluation drops h2 (silenced)
    clock.now = 1_004.0
    run({"kind": "tick"})
    # then h2's episode is gone from the table as from the live state
    live = runner.state(0).funnel.state
    reloaded = PartitionState(0, table, config).funnel.state
    assert sorted(reloaded["episodes"]) == sorted(live["episodes"]) and len(live["episodes"]) == 1
