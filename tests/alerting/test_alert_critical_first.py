"""Critical first: when a receiver's tokens are scarce, groups holding
critical alerts go before the others (issue 11, item 7), on the reference
storm: 500 events in 60 s over 20 assets, 20 of them critical, one receiver
with a token bucket of burst 3 (one token per 10 s), group_by [rule], batch 50."""
from __future__ import annotations

import random

import pytest
from alert_harness import case_config, ev, run

ASSETS = [f"h{i:02d}" for i in range(1, 21)]


def storm(seed: int) -> tuple[list[tuple[float, dict]], set[tuple[str, str]]]:
    """500 native events in 60 s: the outage hits in the first 10 s (20
    critical alerts: NodeDown on h01..h12, DiskFull on h13..h20, each first
    fired at a random moment of 0..10 s, then re-sent), buried in warning
    latency and info heartbeat noise from all 20 assets over the whole 60 s."""
    rnd = random.Random(seed)
    critical = [("NodeDown", a) for a in ASSETS[:12]] + [("DiskFull", a) for a in ASSETS[12:]]
    events = [(round(rnd.uniform(0, 10), 2), ev(r, a, "critical")) for r, a in critical]
    events += [(round(rnd.uniform(10, 60), 2), ev(r, a, "critical"))
               for r, a in (rnd.choice(critical) for _ in range(40))]
    for _ in range(500 - len(events)):
        rule = rnd.choice(["HighLatency", "Heartbeat"])
        events.append((round(rnd.uniform(0, 60), 2),
                       ev(rule, rnd.choice(ASSETS), "warning" if rule == "HighLatency" else "info")))
    return sorted(events, key=lambda e: e[0]), set(critical)


@pytest.mark.parametrize("seed, restart", [(0, True)] + [(s, False) for s in range(5)])
def test_reference_storm_ends_in_three_messages_critical_in_the_first(seed, restart):
    events, critical = storm(seed)
    assert len(events) == 500
    # when the storm runs through the funnel (1 s ticks, injected clock) well past its end
    r = run(case_config(), events, 200, restart_every_tick=restart)
    msgs = [m for _, m in r.messages()]
    # then it ends in at most 3 messages, none over the batch size
    assert len(msgs) <= 3, [(t, len(m.alerts())) for t, m in r.messages()]
    assert all(m.alert_count <= 50 for m in msgs)
    # and every critical alert is in the first message
    first = {(a["rule"], a["asset"]) for a in msgs[0].alerts() if a["severity"] == "critical"}
    assert first == critical
    delivered = {(a["rule"], a["asset"]) for m in msgs for a in m.alerts() if a["severity"] == "critical"}
    assert delivered == critical
    # and nothing is lost: every raw alert final, the ledger balanced
    c = r.funnel.counters()
    assert c["pending"] == 0 and c["balanced"] and c["received"] == 500


def test_without_scarcity_the_timers_hold():
    # given two groups, the critical one due 5 s after the other, and 3 tokens
    events = [(0, ev("Lat", "h1")), (5, ev("NodeDown", "h2", "critical"))]
    r = run(case_config(), events, 100)
    # then each is sent on its own group_wait: nothing is pulled forward
    assert [(t, m.alerts()[0]["rule"]) for t, m in r.messages()] == [(30, "Lat"), (35, "NodeDown")]


def test_scarce_tokens_send_the_critical_group_first():
    # given one token left and two groups due at once, the critical one opened last
    cfg = case_config(receiver={"bucket": {"burst": 1, "refill_interval": 10}})
    events = [(0.1, ev("Lat", f"h{i}")) for i in range(1, 41)] + [(0.5, ev("NodeDown", "h9", "critical"))]
    events += [(0.6, ev("Info", f"h{i}", "info")) for i in range(1, 30)]
    r = run(cfg, events, 100)
    (t1, m1), (t2, m2) = r.messages()
    # then the first message leads with the critical group; the rest is merged into the next
    assert m1.alerts()[0]["rule"] == "NodeDown" and m2.merged_groups >= 1
    assert t2 - t1 == 10
