"""Issue 11.6 without a broker: a storm of distinct alerts never makes a table
value (one Kafka record of the changelog) grow with the number of open groups,
and a batch of commands is decided once and saved once."""
from __future__ import annotations

import pytest

from alerting.config import parse_config
from alerting.runner import SEEN_PERSIST_EVERY, FunnelRunner
from alerting.wire import RawAlert, pack_alerts, command, parse_command, route_alert

#: what a record may carry, well below the broker's 1 MB max.message.bytes
RECORD_LIMIT = 300 * 1024

CONFIG = parse_config({
    "receivers": [{"name": "oncall", "url": "http://127.0.0.1:9/hook",
                   "bucket": {"burst": 1, "refill_interval": "1h"}}],
    "route": {"receiver": "oncall"},
    "grouping": {"group_by": ["rule", "asset"], "batch_size": 50},
    "timing": {"group_wait": 0, "group_interval": 5, "repeat_interval": 300},
})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def storm(n: int) -> list[dict]:
    out = []
    for i in range(n):
        raw = RawAlert(f"e{i}:0", {"rule": f"R{i % 10}", "asset": f"host-{i:06d}",
                                   "severity": "warning",
                                   "annotations": {"summary": "disk almost full " * 8}}, 1000.0)
        _r, cmd = route_alert(CONFIG, raw)
        cmd["src"] = [0, i, 0]
        out.append(cmd)
    return out


@pytest.mark.parametrize("n", [4000, 20000])
def test_a_storm_never_makes_a_table_value_grow_with_open_groups(n):
    # given a receiver whose tokens are gone, so every group queues in its outbox
    table, clock = {}, Clock()
    runner = FunnelRunner(CONFIG, table, clock)
    cmds = storm(n)
    # when the router's alerts commands arrive and ticks evaluate the groups
    values = pack_alerts([(c, command(**c)) for c in cmds])
    assert all(len(v) <= 300 * 1024 for v in values)  # the router's records are bounded too
    off = 0
    for v in values:
        runner.apply(0, off, parse_command(v))
        off += 1
    for _ in range(3):
        clock.now += 1
        runner.apply(0, off, {"kind": "tick"})
        off += 1
    # then the funnel holds every alert, balanced ...
    c = runner.counters(0)
    assert c["received"] == n and c["balanced"] and c["pending"] == n
    assert len(runner.state(0).funnel.state["receivers"]["oncall"]["outbox"]) > 0.9 * n
    # ... and no table value comes near the broker's record limit
    biggest = max(len(v) for v in table.values())
    assert biggest < RECORD_LIMIT, f"a table value of {biggest} bytes"
    # and a restarted worker reads back the same outbox, in order
    again = FunnelRunner(CONFIG, table, clock)
    a = again.state(0).funnel.state["receivers"]["oncall"]["outbox"]
    b = runner.state(0).funnel.state["receivers"]["oncall"]["outbox"]
    assert [s["group_id"] for s in a] == [s["group_id"] for s in b]
    assert again.counters(0)["pending"] == n


SMALL = parse_config({
    "receivers": [{"name": "a", "url": "http://127.0.0.1:9/a", "bucket": {"burst": 2, "refill_interval": 3}},
                  {"name": "b", "url": "http://127.0.0.1:9/b"}],
    "route": {"receiver": "a", "routes": [{"matchers": ['rule="R1"'], "receiver": "b"}]},
    "grouping": {"group_by": ["rule"], "batch_size": 3},
    "timing": {"group_wait": 1, "group_interval": 2, "repeat_interval": 20},
    "dedupe": {"cooldown": 5, "suppress_transient": True},
})


def _with_repeat_lag(live: dict, again: dict) -> dict:
    """``live`` with the one difference a restart may show (docs/alerting.md,
    "On Kafka", repeats): an episode whose persisted ``last_seen`` is behind
    by less than ``SEEN_PERSIST_EVERY`` and whose ``expires_at`` is no later
    (both checked whenever either differs) takes those two persisted values;
    anything else must match as written."""
    import copy

    out = copy.deepcopy(live)
    for fp, ep in out["episodes"].items():
        got = again["episodes"].get(fp)
        if got is None or (got.get("last_seen"), got.get("expires_at")) == (
                ep.get("last_seen"), ep.get("expires_at")):
            continue
        assert 0 <= ep["last_seen"] - got["last_seen"] < SEEN_PERSIST_EVERY, fp
        stored, held = got.get("expires_at"), ep.get("expires_at")
        assert (stored is None) == (held is None) and (held is None or stored <= held), fp
        ep["last_seen"], ep["expires_at"] = got["last_seen"], stored
    return out


@pytest.mark.parametrize("seed", range(6))
def test_what_a_batch_saves_is_what_a_restarted_worker_reads(seed):
    """Ticks and results save only the entities they touched (not every open
    group): after every batch a worker started from the table holds exactly
    the state of the one that wrote it."""
    import json
    import random

    rnd = random.Random(seed)
    table, clock = {}, Clock()
    runner = FunnelRunner(SMALL, table, clock)
    off, sent = 0, []
    for step in range(120):
        batch = []
        for _ in range(rnd.randrange(1, 4)):
            roll = rnd.random()
            if roll < 0.6:
                raw = RawAlert(f"e{off}-{len(batch)}:0", {
                    "rule": f"R{rnd.randrange(3)}", "asset": f"h{rnd.randrange(6)}",
                    "severity": rnd.choice(["info", "warning", "critical"]),
                    "status": rnd.choice(["firing", "firing", "resolved"])}, clock.now)
                _r, cmd = route_alert(SMALL, raw)
                cmd["src"] = [0, off * 10 + len(batch), 0]
            elif roll < 0.8 or not sent:
                cmd = {"kind": "tick"}
            else:
                m = sent.pop(rnd.randrange(len(sent)))
                ok = rnd.random() < 0.7
                cmd = {"kind": "result", "message_id": m.id, "ok": ok,
                       "status": 200 if ok else 503}
            batch.append((off, json.loads(command(**cmd))))
            off += 1
        fx = runner.apply_batch(0, batch)
        sent += fx.messages
        clock.now += rnd.choice([0.3, 1, 2.5])
        again = FunnelRunner(SMALL, table, clock).state(0).funnel.state
        assert again == _with_repeat_lag(runner.state(0).funnel.state, again), f"step {step}"
