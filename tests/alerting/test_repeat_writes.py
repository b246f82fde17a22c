"""A repeat writes its episode at most every ``SEEN_PERSIST_EVERY`` seconds
(docs/alerting.md, "On Kafka"): the funnel applies it at once, the table's
``last_seen`` lags by less than the bound, and outcomes do not change."""
from __future__ import annotations

import orjson

from alerting.config import parse_config
from alerting.model import Severity
from alerting.runner import SEEN_PERSIST_EVERY, FunnelRunner
from alerting.store import PartitionState
from alerting.wire import RawAlert, route_alert

CONFIG = parse_config({
    "receivers": [{"name": "a", "url": "http://127.0.0.1:9/a"}],
    "route": {"receiver": "a"},
    "timing": {"group_wait": 0, "group_interval": 1, "repeat_interval": 3600},
    "dedupe": {"cooldown": 3600},
})


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _runner() -> tuple[FunnelRunner, dict, Clock]:
    table: dict = {}
    clock = Clock()
    return FunnelRunner(CONFIG, table, clock=clock), table, clock


def _cmd(n: int, severity: str = "warning", asset: str = "h1") -> dict:
    _r, cmd = route_alert(CONFIG, RawAlert(f"e{n}:0", {"rule": "Disk", "asset": asset,
                                                      "severity": severity}, 1_000.0))
    return cmd


def _stored(table: dict, fp: str) -> dict:
    return orjson.loads(table[f"0|ep|{fp}"])


def test_repeats_inside_the_bound_do_not_rewrite_the_episode_and_one_past_it_does():
    runner, table, clock = _runner()
    first = _cmd(0)
    fp = first["fp"]
    assert runner.apply_batch(0, [(0, first)]).ledger == []  # new: grouped, written
    assert _stored(table, fp)["last_seen"] == 1_000.0
    offset = 1
    for step in range(1, 6):  # repeats every 5 s, all inside the bound
        clock.now = 1_000.0 + 5 * step
        fx = runner.apply_batch(0, [(offset, _cmd(offset))])
        offset += 1
        assert [e["outcome"] for e in fx.ledger] == ["deduplicated"]
        assert _stored(table, fp)["last_seen"] == 1_000.0  # not rewritten
        assert runner.state(0).funnel.state["episodes"][fp]["last_seen"] == clock.now  # applied
    clock.now = 1_000.0 + SEEN_PERSIST_EVERY
    runner.apply_batch(0, [(offset, _cmd(offset))])
    assert _stored(table, fp)["last_seen"] == clock.now  # the bound reached: written
    assert _stored(table, fp)["expires_at"] == clock.now + CONFIG.timing.resolve_timeout


def test_after_a_reload_last_seen_lags_by_less_than_the_bound_and_the_ledger_balances():
    runner, table, clock = _runner()
    fp = _cmd(0)["fp"]
    offset = 0
    for step in range(40):  # a repeat every 2 s for 80 s
        clock.now = 1_000.0 + 2 * step
        runner.apply_batch(0, [(offset, _cmd(offset))])
        offset += 1
    live = runner.state(0).funnel.state["episodes"][fp]["last_seen"]
    reloaded = PartitionState(0, table, CONFIG).funnel
    lag = live - reloaded.state["episodes"][fp]["last_seen"]
    assert 0 <= lag < SEEN_PERSIST_EVERY
    counters = runner.counters(0)
    assert counters["received"] == 40 and counters["deduplicated"] == 39 and counters["balanced"]


def test_anything_but_a_repeat_writes_the_episode_at_once():
    runner, table, clock = _runner()
    fp = _cmd(0)["fp"]
    runner.apply_batch(0, [(0, _cmd(0))])
    clock.now = 1_005.0
    runner.apply_batch(0, [(1, _cmd(1, severity="critical"))])  # escalated: passes
    stored = _stored(table, fp)
    assert stored["last_seen"] == 1_005.0 and stored["severity"] == int(Severity.CRITICAL)
    clock.now = 1_010.0
    runner.apply_batch(0, [(2, _cmd(2, severity="info"))])  # deescalation: seen_severity moves
    assert _stored(table, fp)["seen_severity"] == int(Severity.INFO) and _stored(table, fp)["last_seen"] == 1_010.0
