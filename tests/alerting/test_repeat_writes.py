"""A repeat writes its episode at most every ``SEEN_PERSIST_EVERY`` seconds
(docs/alerting.md, "On Kafka", repeats): the funnel applies it at once; the
table lags only in ``last_seen`` (less than the bound) and ``expires_at``
(never later than live, more than half the remaining lifetime ahead)."""
from __future__ import annotations

import orjson

from alerting.config import parse_config
from alerting.intake import format_time
from alerting.model import Severity
from alerting.runner import SEEN_PERSIST_EVERY, FunnelRunner
from alerting.store import PartitionState
from alerting.wire import RawAlert, route_alert

def _single(**timing: float):
    """One receiver, a cooldown of an hour, group_wait 0 unless ``timing`` says."""
    return parse_config({"receivers": [{"name": "a", "url": "http://127.0.0.1:9/a"}],
                         "route": {"receiver": "a"}, "dedupe": {"cooldown": 3600},
                         "timing": {"group_wait": 0, "group_interval": 1, "repeat_interval": 3600,
                                    **timing}})


CONFIG = _single()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _runner() -> tuple[FunnelRunner, dict, Clock]:
    table: dict = {}
    clock = Clock()
    return FunnelRunner(CONFIG, table, clock=clock), table, clock


def _alert(n: int, now: float = 1_000.0, severity: str = "warning", ends_in: float | None = None,
           config=CONFIG) -> dict:
    """The funnel command of raw alert ``n`` (Disk on h1) received at ``now``."""
    body = {"rule": "Disk", "asset": "h1", "severity": severity}
    if ends_in is not None:
        body["endsAt"] = format_time(now + ends_in)
    return route_alert(config, RawAlert(f"e{n}:0", body, now))[1]


def _stored(table: dict, fp: str) -> dict:
    return orjson.loads(table[f"0|ep|{fp}"])


def test_repeats_inside_the_bound_do_not_rewrite_the_episode_and_one_past_it_does():
    runner, table, clock = _runner()
    first = _alert(0)
    fp = first["fp"]
    assert runner.apply_batch(0, [(0, first)]).ledger == []  # new: grouped, written
    assert _stored(table, fp)["last_seen"] == 1_000.0
    offset = 1
    for step in range(1, 6):  # repeats every 5 s, all inside the bound
        clock.now = 1_000.0 + 5 * step
        fx = runner.apply_batch(0, [(offset, _alert(offset))])
        offset += 1
        assert [e["outcome"] for e in fx.ledger] == ["deduplicated"]
        assert _stored(table, fp)["last_seen"] == 1_000.0  # not rewritten
        assert runner.state(0).funnel.state["episodes"][fp]["last_seen"] == clock.now  # applied
    clock.now = 1_000.0 + SEEN_PERSIST_EVERY
    runner.apply_batch(0, [(offset, _alert(offset))])
    assert _stored(table, fp)["last_seen"] == clock.now  # the bound reached: written
    assert _stored(table, fp)["expires_at"] == clock.now + CONFIG.timing.resolve_timeout


def test_after_a_reload_last_seen_lags_by_less_than_the_bound_and_the_ledger_balances():
    runner, table, clock = _runner()
    fp = _alert(0)["fp"]
    offset = 0
    for step in range(40):  # a repeat every 2 s for 80 s
        clock.now = 1_000.0 + 2 * step
        runner.apply_batch(0, [(offset, _alert(offset))])
        offset += 1
    live = runner.state(0).funnel.state["episodes"][fp]["last_seen"]
    reloaded = PartitionState(0, table, CONFIG).funnel
    lag = live - reloaded.state["episodes"][fp]["last_seen"]
    assert 0 <= lag < SEEN_PERSIST_EVERY
    counters = runner.counters(0)
    assert counters["received"] == 40 and counters["deduplicated"] == 39 and counters["balanced"]


def test_anything_but_a_repeat_writes_the_episode_at_once():
    runner, table, clock = _runner()
    fp = _alert(0)["fp"]
    runner.apply_batch(0, [(0, _alert(0))])
    clock.now = 1_005.0
    runner.apply_batch(0, [(1, _alert(1, severity="critical"))])  # escalated: passes
    stored = _stored(table, fp)
    assert stored["last_seen"] == 1_005.0 and stored["severity"] == int(Severity.CRITICAL)
    clock.now = 1_010.0
    runner.apply_batch(0, [(2, _alert(2, severity="info"))])  # deescalation: seen_severity moves
    assert _stored(table, fp)["seen_severity"] == int(Severity.INFO) and _stored(table, fp)["last_seen"] == 1_010.0


ROUTED = parse_config({
    "receivers": [{"name": "a", "url": "http://127.0.0.1:9/a"}, {"name": "c", "url": "http://127.0.0.1:9/c"}],
    "route": {"receiver": "a", "routes": [{"matchers": ['rule="R"'], "receiver": "c", "routes": [
        {"matchers": ['severity="critical"'], "receiver": "a"}]}]},
    "dedupe": {"cooldown": 3600},
})


def test_a_repeat_that_changes_the_episode_route_is_written():
    # given an alert whose severity picks a child route (warning -> 0.0, critical -> 0.0.0)
    clock, table = Clock(), {}
    runner = FunnelRunner(ROUTED, table, clock=clock)
    for i, sev in enumerate(["warning", "critical", "warning", "critical"]):
        clock.now = 1_000.0 + i
        _r, cmd = route_alert(ROUTED, RawAlert(f"e{i}:0", {"rule": "R", "asset": "h",
                                                           "severity": sev}, clock.now))
        fx = runner.apply_batch(0, [(i, cmd)])
    # when the last one is a repeat that moves the episode back to the critical route
    assert [e["reason"] for e in fx.ledger] == ["repeat"]
    # then a restarted worker reads that route
    live = runner.state(0).funnel.state["episodes"][cmd["fp"]]
    assert live["route"] == cmd["route"] == "0.0.0"
    assert _stored(table, cmd["fp"])["route"] == "0.0.0"


def test_an_earlier_ends_at_is_written_at_once_and_a_later_one_keeps_half_the_lifetime():
    runner, table, clock = _runner()
    fp = _alert(0)["fp"]
    runner.apply_batch(0, [(0, _alert(0, clock.now, ends_in=3600))])
    # an endsAt moved earlier: a restarted worker must not keep the alert longer
    clock.now = 1_001.0
    runner.apply_batch(0, [(1, _alert(1, clock.now, ends_in=40))])
    assert _stored(table, fp)["expires_at"] == 1_041.0
    # an endsAt moved later: the stored end may stay behind, but not below half
    # of the live alert's remaining lifetime
    for n in range(2, 12):
        clock.now = 1_000.0 + n
        runner.apply_batch(0, [(n, _alert(n, clock.now, ends_in=40 + 10 * n))])
        live = runner.state(0).funnel.state["episodes"][fp]["expires_at"]
        stored = _stored(table, fp)["expires_at"]
        assert clock.now + (live - clock.now) / 2 < stored <= live


def test_an_alert_re_sent_within_half_its_resolve_timeout_never_resolves_after_a_restart():
    """Restart at every second: the restarted worker sends what the live one sends."""
    def trial(rt: float, restart_at: int) -> dict:
        cfg = _single(resolve_timeout=rt)
        clock, table = Clock(), {}
        runners = {"live": FunnelRunner(cfg, table, clock=clock)}
        sent: dict = {"live": [], "restarted": []}
        off = 0
        for t in range(1_000, 1_050):
            clock.now = float(t)
            if t == restart_at:
                runners["restarted"] = FunnelRunner(cfg, dict(table), clock=clock)
            batches = [[{"kind": "tick"}]]
            if (t - 1_000) % 10 == 0:  # re-sent every 10 s, after the tick of its second
                batches.append([_alert(t, clock.now, config=cfg)])
            for batch in batches:
                for name, runner in runners.items():
                    fx = runner.apply_batch(0, [(off + i, c) for i, c in enumerate(batch)])
                    for m in fx.messages:
                        if t >= restart_at:
                            sent[name].append((t, [a["status"] for s in m.sections for a in s["alerts"]]))
                        runner.apply_batch(0, [(off + 50, {"kind": "result", "message_id": m.id,
                                                           "ok": True})])
                off += 100
        return sent

    for rt in (21.0, 25.0, 60.0):
        for restart_at in range(1_001, 1_031):
            got = trial(rt, restart_at)
            assert got["restarted"] == got["live"], (rt, restart_at)


CONTINUED = parse_config({
    "receivers": [{"name": "a", "url": "http://127.0.0.1:9/a"}, {"name": "b", "url": "http://127.0.0.1:9/b"}],
    "route": {"receiver": "a", "routes": [
        {"matchers": ['rule="R"'], "receiver": "a", "continue": True},
        {"matchers": ['rule="R"'], "receiver": "b"}]},
    "timing": {"group_wait": 0, "group_interval": 1, "repeat_interval": 3600},
    "dedupe": {"cooldown": 3600},
})


def test_each_copy_of_an_older_command_is_judged_on_its_own_episode():
    """An older command (no decision) under ``continue`` routes: one copy a
    repeat, the other escalated; the escalated copy is written."""
    from alerting.wire import route_alerts

    clock, table = Clock(), {}
    runner = FunnelRunner(CONTINUED, table, clock=clock)
    off = [0]

    def old_alert(n: int, sev: str, status: str = "firing") -> dict:
        cmd = route_alerts(CONTINUED, RawAlert(f"e{n}:0", {"rule": "R", "asset": "h", "severity": sev,
                                                          "status": status}, clock.now))[0][1]
        for k in ("receiver", "fp", "route", "copy"):
            cmd.pop(k, None)
        return cmd

    def run(*cmds):
        batch = [(off[0] + i, c) for i, c in enumerate(cmds)]
        off[0] += len(cmds)
        return runner.apply_batch(0, batch)

    def deliver(fx, ok_for):
        for m in fx.messages:
            ok = m.receiver in ok_for
            run({"kind": "result", "message_id": m.id, "ok": ok, "status": 200 if ok else 503})

    deliver(run(old_alert(0, "critical"), {"kind": "tick"}), {"a", "b"})
    clock.now = 1_005.0
    deliver(run(old_alert(1, "critical", "resolved"), {"kind": "tick"}), {"a"})  # b's resolve fails
    clock.now = 1_010.0
    run(old_alert(2, "warning"))  # copy a: new (warning); copy b: refire (critical)
    clock.now = 1_015.0
    fx = run(old_alert(3, "critical"))  # copy a: escalated; copy b: repeat
    assert [e["reason"] for e in fx.ledger] == ["repeat"]
    again = PartitionState(0, dict(table), CONTINUED).funnel
    live = runner.state(0).funnel
    for fp, ep in live.state["episodes"].items():
        assert again.state["episodes"][fp]["severity"] == ep["severity"], fp
    assert again.counters()["balanced"] and again.pending() == live.pending()


def test_an_ends_at_moved_earlier_after_a_tick_wrote_the_episode_is_written():
    """A tick stores the live end of its time without marking it: a later,
    earlier endsAt must still reach the table (a restarted worker would
    otherwise keep the alert open longer)."""
    cfg = _single(repeat_interval=5)
    clock, table = Clock(), {}
    runner = FunnelRunner(cfg, table, clock=clock)

    def ends(n: int, ends_in: float) -> dict:
        return _alert(n, clock.now, ends_in=ends_in, config=cfg)

    fx = runner.apply_batch(0, [(0, ends(0, 100))])  # written, end 1100
    for m in fx.messages:
        runner.apply_batch(0, [(1, {"kind": "result", "message_id": m.id, "ok": True})])
    fp = ends(0, 1)["fp"]
    clock.now = 1_010.0
    # a repeat moving the end later (1150), not marked; the run's tick (the
    # repeat_interval message) writes the episode with the live end
    fx = runner.apply_batch(0, [(2, ends(1, 140))])
    assert [e["reason"] for e in fx.ledger] == ["repeat"] and len(fx.messages) == 1
    assert runner.state(0).funnel.state["episodes"][fp]["exp_saved"] == 1_100.0
    assert _stored(table, fp)["expires_at"] == 1_150.0
    runner.apply_batch(0, [(3, {"kind": "result", "message_id": fx.messages[0].id, "ok": True})])
    clock.now = 1_020.0
    runner.apply_batch(0, [(4, ends(2, 90))])  # the end moved earlier, to 1110
    assert runner.state(0).funnel.state["episodes"][fp]["expires_at"] == 1_110.0
    assert _stored(table, fp)["expires_at"] == 1_110.0


def test_a_repeat_not_written_still_asks_for_the_tick_of_its_due_group():
    cfg = _single(group_wait=5, group_interval=60)
    clock = Clock()
    runner = FunnelRunner(cfg, {}, clock=clock)

    def alert(n: int) -> dict:
        return _alert(n, clock.now, config=cfg)

    assert runner.apply_batch(0, [(0, alert(0))]).wake_at == 1_005.0
    clock.now = 1_004.5
    fx = runner.apply_batch(0, [(1, alert(1))])
    assert [e["reason"] for e in fx.ledger] == ["repeat"] and fx.wake_at == 1_005.0
    clock.now = 1_005.2  # the group is due: the run ticks at its end
    assert len(runner.apply_batch(0, [(2, alert(2))]).messages) == 1
