"""The funnel runner and its table image without a broker: replays are
skipped, a new process resumes from the table, poison is refused."""
from __future__ import annotations

import pytest

from alerting.config import parse_config
from alerting.runner import FunnelRunner
from alerting.wire import RawAlert, parse_command, parse_raw, raw_envelope, route_alert
from plait.errors import PoisonError

CONFIG = parse_config({
    "receivers": [{"name": "oncall", "url": "http://127.0.0.1:9/hook"}],
    "route": {"receiver": "oncall"},
    "timing": {"group_wait": 5, "group_interval": 5, "repeat_interval": 300},
})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def feed(runner, offset, alert, rid, src):
    _receiver, cmd = route_alert(CONFIG, RawAlert(rid, alert, runner.clock()))
    cmd["src"] = src
    return runner.apply(0, offset, cmd)


def test_replays_are_skipped_and_a_new_runner_resumes_from_the_table():
    # given two alerts ingested and a message sent
    table, clock = {}, Clock()
    r = FunnelRunner(CONFIG, table, clock)
    feed(r, 0, {"rule": "Disk", "asset": "h1", "severity": "critical"}, "e1:0", [0, 10, 0])
    feed(r, 1, {"rule": "Disk", "asset": "h2", "severity": "critical"}, "e2:0", [0, 11, 0])
    clock.now += 6
    msg = r.apply(0, 2, {"kind": "tick"}).messages[0]
    # when a new runner (a restarted worker) reads the same table
    r2 = FunnelRunner(CONFIG, table, clock)
    # then replayed offsets and replayed raw positions change nothing
    assert r2.apply(0, 1, {"kind": "tick"}).skipped
    again = feed(r2, 3, {"rule": "Disk", "asset": "h1", "severity": "critical"}, "e1:0", [0, 10, 0])
    assert again.skipped and again.ledger == []
    # and the message in flight is known: its delivery settles both alerts once
    fx = r2.apply(0, 4, {"kind": "result", "message_id": msg.id, "ok": True})
    assert sorted(e["raw_id"] for e in fx.ledger) == ["e1:0", "e2:0"]
    assert r2.apply(0, 5, {"kind": "result", "message_id": msg.id, "ok": True}).ledger == []
    c = r2.counters(0)
    assert c["received"] == 2 and c["delivered"] == 2 and c["balanced"]


def test_invalid_alert_is_ledgered_rejected_naming_the_field():
    r = FunnelRunner(CONFIG, {}, Clock())
    fx = feed(r, 0, {"rule": "Disk", "asset": "h1"}, "e9:0", [1, 5, 0])
    assert fx.ledger[0]["outcome"] == "rejected" and fx.ledger[0]["reason"].startswith("severity")


def test_raw_events_poison_and_ids():
    eid, value = raw_envelope([{"rule": "A", "asset": "b", "severity": "info"}] * 2)
    assert [r.raw_id for r in parse_raw(value, 0, 7, 1.0)] == [f"{eid}:0", f"{eid}:1"]
    assert [r.raw_id for r in parse_raw(b'{"rule": "A"}', 2, 9, 1.0)] == ["2@9:0"]
    for bad in (b"not json", b'"a string"', None):
        with pytest.raises(PoisonError):
            parse_raw(bad, 0, 0, 1.0)
    with pytest.raises(PoisonError):
        parse_command(b'{"kind": "nope"}')


def one_group_config(group_interval: float):
    """One group per message (Alertmanager's way), group_wait 5 s."""
    return parse_config(dict(CONFIG.model_dump(), grouping={"group_by": ["rule"],
                                                            "merge_groups": False},
                             timing={"group_wait": 5, "group_interval": group_interval,
                                     "repeat_interval": 300}))


def alert_at(runner, offset: int, rule: str, asset: str, rid: str):
    """Apply raw alert ``rid`` (``rule`` on ``asset``) at ``alerts.funnel`` offset ``offset``."""
    _receiver, cmd = route_alert(runner.config, RawAlert(rid, {"rule": rule, "asset": asset,
                                                               "severity": "critical"},
                                                         runner.clock()))
    cmd["src"] = [0, offset, 0]
    return runner.apply(0, offset, cmd)


def test_a_refused_group_goes_back_to_its_group_and_the_receiver_goes_on():
    # given one group per message, group_interval 30 s
    config = one_group_config(30)
    table, clock = {}, Clock()
    r = FunnelRunner(config, table, clock)
    alert_at(r, 0, "Poison", "h1", "e1:0")
    clock.now += 5
    [poison] = r.apply(0, 1, {"kind": "tick"}).messages
    alert_at(r, 2, "Good", "h1", "e2:0")
    # when the receiver refuses Poison with a 400
    r.apply(0, 3, {"kind": "result", "message_id": poison.id, "ok": False, "status": 400})
    # then Good leaves at its group_wait, and a restarted worker (a new runner on the same
    # table) tells Poison again at its group's next flush, with its raw alert
    clock.now += 5
    [good] = r.apply(0, 4, {"kind": "tick"}).messages
    assert [a["rule"] for a in good.alerts()] == ["Good"]
    r2 = FunnelRunner(config, table, clock)
    r2.apply(0, 5, {"kind": "result", "message_id": good.id, "ok": True})
    clock.now += 24.9
    assert r2.apply(0, 6, {"kind": "tick"}).messages == []
    clock.now += 0.1
    [again] = r2.apply(0, 7, {"kind": "tick"}).messages
    assert [a["rule"] for a in again.alerts()] == ["Poison"] and again.id != poison.id
    fx = r2.apply(0, 8, {"kind": "result", "message_id": again.id, "ok": True})
    assert [e["raw_id"] for e in fx.ledger] == ["e1:0"]
    assert r2.counters(0)["pending"] == 0 and r2.counters(0)["balanced"]


def test_a_refusal_with_news_queued_behind_it_survives_a_restart():
    # given a group's message in flight, its news queued behind it in its lane, then refused
    config = one_group_config(10)
    table, clock = {}, Clock()
    r = FunnelRunner(config, table, clock)
    offsets = iter(range(100))

    def apply(runner, cmd):
        return runner.apply(0, next(offsets), cmd)

    alert_at(r, next(offsets), "X", "h0", "e0:0")
    clock.now += 5
    [m1] = apply(r, {"kind": "tick"}).messages
    alert_at(r, next(offsets), "X", "h1", "e1:0")
    clock.now += 10
    assert apply(r, {"kind": "tick"}).messages == []
    apply(r, {"kind": "result", "message_id": m1.id, "ok": False, "status": 400})
    # when a worker restarts on the table, then both raw alerts are still pending and are told
    r2 = FunnelRunner(config, table, clock)
    counted = r2.state(0).funnel.counters()
    assert counted["pending"] == 2 and counted["balanced"]
    ended = []
    for _ in range(3):
        clock.now += 10
        for m in apply(r2, {"kind": "tick"}).messages:
            ended += apply(r2, {"kind": "result", "message_id": m.id, "ok": True}).ledger
    assert sorted(e["raw_id"] for e in ended) == ["e0:0", "e1:0"]


def test_a_repeat_held_in_its_member_is_written():
    # given no dedupe cooldown: the same alert twice at one instant, the repeat's raw id held by
    # its member until the group is told
    config = parse_config(dict(CONFIG.model_dump(), dedupe={"fingerprint_labels": ["rule", "asset"],
                                                            "cooldown": 0}))
    table, clock = {}, Clock()
    r = FunnelRunner(config, table, clock)
    for i in range(2):
        feed(r, i, {"rule": "Disk", "asset": "h1", "severity": "critical"}, f"e{i}:0", [0, i, 0])
    # when a worker restarts on the table, then both raw alerts are still pending
    r2 = FunnelRunner(config, table, clock)
    counted = r2.state(0).funnel.counters()
    assert counted["received"] == 2 and counted["pending"] == 2 and counted["balanced"]
