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
    # and the reminder comes at the first flush (every 60 s from 1,000) after
    # repeat_interval has passed since h1 was sent
    assert f.tick(1_000.0 + 3_600) == []
    assert _assets(f.tick(1_000.0 + 3_660)) == [(True, ["h1"])]


def test_an_alert_flapping_inside_group_interval_does_not_hold_back_the_reminders():
    f = Funnel(_config(group_interval=60))
    f.ingest({"rule": "Disk", "asset": "h1", "severity": "warning"}, 1_000.0, raw_id="a")
    [sent] = f.tick(1_000.0)
    f.delivered(sent.id, 1_000.0)
    reminders = []
    for t in range(1_001, 1_000 + 2 * 3_600 + 130):  # h2 fires and resolves every 2 minutes
        if t % 120 in (10, 20):
            f.ingest({"rule": "Disk", "asset": "h2", "severity": "warning",
                      "status": "firing" if t % 120 == 10 else "resolved"}, float(t))
        for m in f.tick(float(t)):
            reminders.append((t, _assets([m])))
            f.delivered(m.id, float(t))
    # (at the flushes every 60 s from 1,000 strictly after repeat_interval)
    assert reminders == [(4_660, [(True, ["h1"])]), (8_320, [(True, ["h1"])])]
    assert f.counters()["transient_suppressed"] == 61  # one flap every 120 s to 8,330


class Rig:
    """A runner on a dict table with a settable clock (``now``, epoch s),
    fed one command per batch at increasing offsets."""

    def __init__(self, config) -> None:
        self.now, self.config, self.table = 1_000.0, config, {}
        self.runner = FunnelRunner(config, self.table, clock=lambda: self.now)
        self.offsets = iter(range(10_000))

    def run(self, cmd: dict):
        return self.runner.apply_batch(0, [(next(self.offsets), cmd)])

    def alert(self, n: int, asset: str, status: str = "firing",
              ends_in: float | None = None, rule: str = "Disk") -> dict:
        body = {"rule": rule, "asset": asset, "severity": "warning", "status": status}
        if ends_in is not None:
            body["endsAt"] = format_time(self.now + ends_in)
        return route_alert(self.config, RawAlert(f"e{n}:0", body, self.now))[1]

    @staticmethod
    def silence(sid: str, asset: str, until: float) -> dict:
        return {"kind": "silence", "silence": {"id": sid, "matchers": [f'asset="{asset}"'],
                                               "author": "ops", "comment": "x",
                                               "endsAt": format_time(until)}}

    def states(self) -> tuple[dict, dict]:
        """(live state, state a restarted worker loads from the table)."""
        return (self.runner.state(0).funnel.state,
                PartitionState(0, self.table, self.config).funnel.state)


def test_an_alert_released_and_dropped_in_one_tick_leaves_its_group_written():
    rig = Rig(_config(group_interval=1))
    # given a notified group of h1, and h2 (same group) silenced until 1,010
    [sent] = rig.run(rig.alert(0, "h1", ends_in=3600)).messages
    rig.run({"kind": "result", "message_id": sent.id, "ok": True})
    rig.run(rig.silence("s1", "h2", 1_010.0))
    rig.now = 1_001.0
    assert [e["outcome"] for e in rig.run(rig.alert(1, "h2", ends_in=9)).ledger] == ["silenced"]
    # when one tick releases h2 into the group and ends it (its end passed too)
    rig.now = 1_011.0
    rig.run({"kind": "tick"})
    live, reloaded = rig.states()
    assert live["counters"]["transient_suppressed"] == 1
    # then a restarted worker reads the group the tick left
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
    rig = Rig(_config(group_interval=2))
    # given h2 sent and acknowledged, then its resolve in flight
    [first] = rig.run(rig.alert(0, "h2")).messages
    rig.run({"kind": "result", "message_id": first.id, "ok": True})
    rig.now = 1_001.0
    rig.run(rig.alert(1, "h2", "resolved"))
    rig.now = 1_002.0
    assert len(rig.run({"kind": "tick"}).messages) == 1
    # and h2 silenced for good, h3 silenced until 1,003.5 and firing (never grouped)
    rig.now = 1_002.5
    rig.run(rig.silence("s2", "h2", 2_000.0))
    rig.run(rig.silence("s3", "h3", 1_003.5))
    rig.now = 1_003.0
    assert [e["outcome"] for e in rig.run(rig.alert(2, "h3")).ledger] == ["silenced"]
    # when a tick releases h3 into the group, whose evaluation drops h2 (silenced)
    rig.now = 1_004.0
    rig.run({"kind": "tick"})
    # then h2's episode is gone from the table as from the live state
    live, reloaded = rig.states()
    assert sorted(reloaded["episodes"]) == sorted(live["episodes"]) and len(live["episodes"]) == 1


def test_a_resolve_while_its_firing_message_is_in_flight_is_sent_after_it():
    f = Funnel(_config(group_interval=5))
    # given h1's firing message sent and not yet acknowledged
    f.ingest({"rule": "Disk", "asset": "h1", "severity": "warning"}, 1_000.0, raw_id="a")
    [firing] = f.tick(1_000.0)
    # when h1 resolves and its group is evaluated before the acknowledgement
    f.ingest({"rule": "Disk", "asset": "h1", "severity": "warning",
              "status": "resolved"}, 1_002.0, raw_id="b")
    assert f.tick(1_005.0) == []  # the receiver is busy with the firing message
    f.delivered(firing.id, 1_006.0)
    # then the resolve is not dropped as a transient: it follows the firing message
    assert _delivered(f, 1_006, 1_020) == [("Disk", "resolved")]
    assert f.counters()["transient_suppressed"] == 0 and f.counters()["balanced"]


def test_a_message_sent_by_a_later_tick_leaves_its_groups_written():
    rig = Rig(_config(group_interval=5))
    # given Disk's message in flight and Cpu's section queued behind it
    [first] = rig.run(rig.alert(0, "h1")).messages
    assert rig.run(rig.alert(1, "h1", rule="Cpu")).messages == []
    # when the acknowledgement's batch sends the queued section
    assert len(rig.run({"kind": "result", "message_id": first.id, "ok": True}).messages) == 1
    # then a restarted worker reads Cpu's group as the live one has it
    live, reloaded = rig.states()
    assert reloaded["groups"] == live["groups"]


def test_runner_asks_for_a_tick_at_the_next_flush_of_any_group():
    """A flush happens on the group's timer (Alertmanager's ``aggrGroup.run``,
    dispatch/dispatch.go), not at the next 1 s timer tick: after each batch
    the runner wants a tick at the partition's next due time, and a silence
    command ticks at once (its release may be due at the next flush)."""
    rig = Rig(parse_config({
        "receivers": [{"name": "a", "url": "http://127.0.0.1:9/a"}], "route": {"receiver": "a"},
        "timing": {"group_wait": 30, "group_interval": 60, "repeat_interval": 3600}}))
    # given Disk opened at 1,000 and Net at 1,010 (groups by rule)
    assert rig.run(rig.alert(0, "h1")).wake_at == 1_030.0
    rig.now = 1_010.0
    rig.run(rig.alert(1, "h1", rule="Net"))
    # when the tick at 1,030 sends Disk's group
    rig.now = 1_030.0
    fx = rig.run({"kind": "tick"})
    # then the runner wants the next tick at Net's first flush, 1,040
    assert [s["group_labels"] for m in fx.messages for s in m.sections] == [{"rule": "Disk"}]
    assert fx.wake_at == 1_040.0


def test_an_expired_silence_releases_its_alerts_in_the_same_batch():
    """silence_test.go TestSilenceDelete: alerts go out at the first flush
    after the silence is deleted, so the release must not wait for the next
    1 s timer tick (which may come after that flush)."""
    rig = Rig(_config(group_interval=1))
    rig.run(rig.silence("s1", "h1", 1_100.0))
    assert [e["outcome"] for e in rig.run(rig.alert(0, "h1")).ledger] == ["silenced"]
    rig.now = 1_003.5
    rig.run({"kind": "expire", "id": "s1"})
    assert rig.states()[0]["silenced"] == {}
