"""A batch of events reaches the router's and the funnel's batch handlers in
runs of about ``MAX_RUN_BYTES`` of record values (whole events, each run
decoded only when its turn comes), so what a batch decodes and builds is
bounded by the bytes, not by how many alerts its events carry; the funnel
saves each run with its own last offset, so a batch that fails half way is
replayed from the table without applying a run twice."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from alerting.agents import AlertingService, FunnelHooks, _decode_command, _decode_raw
from alerting.config import parse_config
from alerting.runner import FunnelRunner
from alerting.wire import FUNNEL_TOPIC, RawAlert, command, pack_alerts, parse_command, raw_envelope, route_alert
from plait import agent as runtime
from plait.agent import Agent, AgentRuntime

CFG = parse_config({
    "receivers": [{"name": "a", "url": "http://127.0.0.1:9/hook"},
                  {"name": "b", "url": "http://127.0.0.1:9/hook"}],
    "route": {"receiver": "a", "routes": [{"matchers": ['rule="B"'], "receiver": "b"}]},
    "grouping": {"group_by": ["rule"]},
    "timing": {"group_wait": 30, "group_interval": 30},
})


def _event(offset: int, value: bytes) -> SimpleNamespace:
    return SimpleNamespace(value=value, message=SimpleNamespace(
        partition=0, offset=offset, topic="t", headers=None))


def _runtime(hooks=()) -> AgentRuntime:
    rt = object.__new__(AgentRuntime)
    rt.hooks, rt.exit_when_lost = list(hooks), False
    return rt


def _funnel_commands(n_alerts: int, per_command: int) -> list[bytes]:
    cmds = []
    for i in range(n_alerts):
        _r, cmd = route_alert(CFG, RawAlert(f"e{i}:0", {"rule": "R", "asset": f"h{i:05d}",
                                                        "severity": "warning"}, 1000.0))
        cmd["src"] = [0, i, 0]
        cmds.append((cmd, command(**cmd)))
    return [b for k in range(0, n_alerts, per_command) for b in pack_alerts(cmds[k:k + per_command])]


async def test_the_funnel_gets_a_batch_in_runs_decoded_in_turn_and_saved_each(monkeypatch):
    values = _funnel_commands(2800, 400)
    assert len(values) == 7
    # runs of about three commands
    monkeypatch.setattr(runtime, "MAX_RUN_BYTES", sum(map(len, values[:3])) - 1)
    svc = object.__new__(AlertingService)
    svc.runner = FunnelRunner(CFG, {}, lambda: 1000.0)
    decoded, runs = [], []

    def decode(event):
        decoded.append(event.message.offset)
        return _decode_command(event)

    async def effects(results):
        [(partition, _fx)] = results
        ps = svc.runner.state(partition)
        runs.append((list(decoded), ps.funnel.state["counters"]["received"], ps.offset))
    svc._effects_all = effects
    agent = Agent(FUNNEL_TOPIC, "plait.alerts.funnel", svc.apply, decode)
    # when the runtime hands one batch of 7 commands (400 alerts each) to the funnel
    await _runtime().process_batch(agent, svc.apply_batch,
                                   [_event(off, v) for off, v in enumerate(values)])
    # then it came in three runs of whole events, each decoded only when its turn came
    # and saved with its own last offset
    assert runs == [([0, 1, 2], 1200, 2), ([0, 1, 2, 3, 4, 5], 2400, 5),
                    ([0, 1, 2, 3, 4, 5, 6], 2800, 6)]
    assert svc.runner.counters(0)["balanced"]


async def test_a_batch_that_fails_half_way_is_replayed_without_applying_a_run_twice(monkeypatch):
    values = _funnel_commands(2800, 400)
    monkeypatch.setattr(runtime, "MAX_RUN_BYTES", sum(map(len, values[:3])) - 1)
    table, committed = {}, {}
    svc = object.__new__(AlertingService)
    svc.runner = FunnelRunner(CFG, table, lambda: 1000.0)
    calls, applied = [0], []

    async def effects(results):
        # what reached the changelog: the table as it was when a run's records were acked
        calls[0] += 1
        applied.append(len(results))
        if calls[0] == 2:
            raise Crash  # the worker exits when its records cannot be sent (fatal)
        committed.clear()
        committed.update(table)
    svc._effects_all = effects
    agent = Agent(FUNNEL_TOPIC, "plait.alerts.funnel", svc.apply, _decode_command)
    events = [_event(off, v) for off, v in enumerate(values)]
    # given a batch whose second run's records cannot be sent
    with pytest.raises(Crash):
        await _runtime([FunnelHooks(svc.runner)]).process_batch(agent, svc.apply_batch, events)
    # when the worker restarts, recovers the table from its changelog and the batch comes again
    table.clear()
    table.update(committed)
    svc.runner.forget(0)
    assert svc.runner.state(0).funnel.state["counters"]["received"] == 1200
    await _runtime([FunnelHooks(svc.runner)]).process_batch(agent, svc.apply_batch, events)
    # then the first run is recognised as applied and every alert is counted once
    c = svc.runner.counters(0)
    assert c["received"] == 2800 and c["balanced"]
    assert svc.runner.state(0).offset == 6
    assert applied[2:] == [0, 1, 1]  # run 1 skipped as seen, runs 2 and 3 carried out


class Crash(BaseException):
    """Stands for ``os._exit`` in ``AgentRuntime.fatal``: nothing after it runs."""


async def test_the_router_gets_a_batch_in_runs_and_forwards_in_raw_order(monkeypatch):
    raws = []
    for off in range(6):
        _eid, value = raw_envelope([{"rule": "B" if i % 3 == 0 else "R", "asset": f"h{off}-{i}",
                                     "severity": "warning"} for i in range(300)])
        raws.append(value)
    monkeypatch.setattr(runtime, "MAX_RUN_BYTES", sum(map(len, raws[:4])) - 1)
    svc = object.__new__(AlertingService)
    svc.config = CFG
    sent, handled = [], []

    async def send(key, value, **kw):
        sent.append((key, value))
    svc.funnel = SimpleNamespace(send=send)

    async def route_batch(items):
        handled.append(len(items))
        await AlertingService.route_batch(svc, items)
    agent = Agent("alerts.raw", "plait.alerts.router", svc.route, _decode_raw)
    # when the runtime hands a batch of 6 raw events of 300 alerts each to the router
    await _runtime().process_batch(agent, route_batch, [_event(off, v) for off, v in enumerate(raws)])
    # then it routed them in runs of whole events, every alert once, each receiver's in raw order
    assert handled == [4, 2]
    positions = {b"a": [], b"b": []}
    for key, value in sent:
        positions[key] += [tuple(item["src"]) for item in parse_command(value)["items"]]
    assert len(positions[b"a"]) == 1200 and len(positions[b"b"]) == 600
    for key, got in positions.items():
        assert got == sorted(got), key


async def test_a_run_whose_handler_fails_is_taken_one_event_at_a_time_and_only_the_culprit_is_kept(monkeypatch):
    values = _funnel_commands(2800, 400)
    monkeypatch.setattr(runtime, "MAX_RUN_BYTES", sum(map(len, values[:3])) - 1)
    svc = object.__new__(AlertingService)
    svc.runner = FunnelRunner(CFG, {}, lambda: 1000.0)

    async def effects(results):
        pass
    svc._effects_all = effects
    real, calls = svc.runner.apply_batch, []

    def apply_batch(partition, commands):
        calls.append([offset for offset, _cmd in commands])
        if any(offset == 4 for offset, _cmd in commands):  # a bug met by the command at offset 4
            raise KeyError("bug")
        return real(partition, commands)
    svc.runner.apply_batch = apply_batch
    rt = _runtime([FunnelHooks(svc.runner)])
    dead = []

    async def dead_letter(event, exc, *detail):
        dead.append(event.message.offset)
    rt.dead_letter = dead_letter
    agent = Agent(FUNNEL_TOPIC, "plait.alerts.funnel", svc.apply, _decode_command)
    # when the runtime hands the funnel a batch whose second run meets the bug
    await rt.process_batch(agent, svc.apply_batch, [_event(off, v) for off, v in enumerate(values)])
    # then the partition was reloaded, that run's events taken one at a time, only the
    # culprit kept as a dead letter, and every other alert counted once
    assert dead == [4]
    assert calls == [[0, 1, 2], [3, 4, 5], [3], [4], [5], [6]]  # runs 1 and 3 as batches
    c = svc.runner.counters(0)
    assert c["received"] == 2400 and c["balanced"]
    assert svc.runner.state(0).offset == 6
