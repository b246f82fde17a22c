"""The router and the funnel carry out a batch of events in pieces of about
``MAX_BATCH_ALERTS`` alerts (cut at event boundaries), so what a batch holds
in memory is bounded by the piece, not by how many alerts its events carry;
a piece's state is saved with its own last offset, so a batch that fails half
way is replayed from the table without applying a piece twice."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from alerting import agents
from alerting.agents import AlertingService
from alerting.config import parse_config
from alerting.runner import FunnelRunner
from alerting.wire import RawAlert, command, pack_alerts, parse_command, parse_raw, raw_envelope, route_alert

CFG = parse_config({
    "receivers": [{"name": "a", "url": "http://127.0.0.1:9/hook"},
                  {"name": "b", "url": "http://127.0.0.1:9/hook"}],
    "route": {"receiver": "a", "routes": [{"matchers": ['rule="B"'], "receiver": "b"}]},
    "grouping": {"group_by": ["rule"]},
    "timing": {"group_wait": 30, "group_interval": 30},
})


def _event(offset: int) -> SimpleNamespace:
    return SimpleNamespace(message=SimpleNamespace(partition=0, offset=offset, topic="t", headers=None))


def _funnel_events(n_alerts: int, per_command: int) -> list[tuple]:
    cmds = []
    for i in range(n_alerts):
        _r, cmd = route_alert(CFG, RawAlert(f"e{i}:0", {"rule": "R", "asset": f"h{i:05d}",
                                                        "severity": "warning"}, 1000.0))
        cmd["src"] = [0, i, 0]
        cmds.append((cmd, command(**cmd)))
    values = [b for k in range(0, n_alerts, per_command) for b in pack_alerts(cmds[k:k + per_command])]
    return [(_event(off), {}, parse_command(v)) for off, v in enumerate(values)]


async def test_the_funnel_applies_a_batch_in_pieces_and_saves_each(monkeypatch):
    monkeypatch.setattr(agents, "MAX_BATCH_ALERTS", 1000)
    svc = object.__new__(AlertingService)
    svc.runner = FunnelRunner(CFG, {}, lambda: 1000.0)
    pieces = []

    async def effects(results):
        [(partition, _fx)] = results
        ps = svc.runner.state(partition)
        pieces.append((ps.funnel.state["counters"]["received"], ps.offset))
    svc._effects_all = effects
    # given one batch of 7 events of 400 alerts each
    items = _funnel_events(2800, 400)
    assert [len(c["items"]) for _e, _a, c in items] == [400] * 7
    # when the funnel handles it
    await svc.apply_batch(items)
    # then it went in three pieces of whole events, each saved with its own last offset
    assert pieces == [(1200, 2), (2400, 5), (2800, 6)]
    assert svc.runner.counters(0)["balanced"]


async def test_a_batch_that_fails_half_way_is_replayed_without_applying_a_piece_twice(monkeypatch):
    monkeypatch.setattr(agents, "MAX_BATCH_ALERTS", 1000)
    table: dict = {}
    committed: dict = {}
    svc = object.__new__(AlertingService)
    svc.runner = FunnelRunner(CFG, table, lambda: 1000.0)
    fail = [2]

    async def effects(results):
        # what reached the changelog: the table as it was when a piece's records were acked
        fail[0] -= 1
        if fail[0] == 0:
            raise RuntimeError("the broker went away")
        committed.clear()
        committed.update(table)
    svc._effects_all = effects
    items = _funnel_events(2800, 400)
    # given a batch whose second piece's records cannot be sent
    with pytest.raises(RuntimeError):
        await svc.apply_batch(items)
    # when the worker recovers the table from its changelog and the batch comes again
    table.clear()
    table.update(committed)
    svc.runner.forget(0)
    assert svc.runner.state(0).funnel.state["counters"]["received"] == 1200
    await svc.apply_batch(items)
    # then the first piece is recognised as applied and every alert is counted once
    c = svc.runner.counters(0)
    assert c["received"] == 2800 and c["balanced"]
    assert svc.runner.state(0).offset == 6


async def test_the_router_forwards_a_batch_in_pieces_in_raw_order(monkeypatch):
    monkeypatch.setattr(agents, "MAX_BATCH_ALERTS", 1000)
    svc = object.__new__(AlertingService)
    svc.config = CFG
    sent, forwards = [], []

    async def send(key, value, **kw):
        sent.append((key, value))
    svc.funnel = SimpleNamespace(send=send)
    real = svc._forward

    async def forward(per_receiver):
        forwards.append(sum(len(v) for v in per_receiver.values()))
        await real(per_receiver)
    svc._forward = forward
    # given a batch of 6 raw events of 300 alerts each, two receivers
    events = []
    for off in range(6):
        _eid, value = raw_envelope([{"rule": "B" if i % 3 == 0 else "R", "asset": f"h{off}-{i}",
                                     "severity": "warning"} for i in range(300)])
        events.append((_event(off), {}, parse_raw(value, 0, off, 1000.0)))
    # when the router routes it
    await svc.route_batch(events)
    # then it forwarded pieces of whole events (4 x 300 >= 1,000: cut there), every alert once
    assert forwards == [1200, 600]
    positions = {b"a": [], b"b": []}
    for key, value in sent:
        positions[key] += [tuple(item["src"]) for item in parse_command(value)["items"]]
    assert len(positions[b"a"]) == 1200 and len(positions[b"b"]) == 600
    for key, got in positions.items():  # each receiver's commands in raw order
        assert got == sorted(got), key
