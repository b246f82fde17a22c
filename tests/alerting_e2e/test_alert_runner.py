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
