"""What one publish of the alert view (``alerting/view.py``) costs as firing
alerts grow on one partition, in process (no Redis; CPU seconds of this
thread). Prints one JSON object per open count:

    {"bench": "alert_view", "firing", "limit", "changed", "walk_ms", "step_ms", "walk_over_step"}

For each count N: N groups of one firing alert each are opened through the
funnel runner and published once; then ``--rounds`` times, ``--changed``
of them are seen again (a new ``last_seen``, so they move to the top of the
view) and the view is brought up to date twice from the same state: by
``walk`` (every episode ranked and sorted afresh, what each publish did
above ``MAX_VIEW_ALERTS`` before the kept ranks) and by ``step`` (only the
changes and what they moved across the floor). ``walk_ms`` and
``step_ms`` are medians over the rounds; the ratio is the figure that holds
across machines.

Usage: ``python bench/bench_alert_view.py [--open 1000,10000,50000] [--changed 1000] [--rounds 3]``
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from alerting.changelog import BatchedTable
from alerting.runner import FunnelRunner
from alerting.view import MAX_VIEW_ALERTS, ViewPublisher
from alerting.wire import pack_alerts, parse_command, raw_envelope
from bench_alert_runner import CONFIG, _Store, routed


def opened(n: int) -> dict:
    """A funnel partition's state with ``n`` firing alerts, one group each."""
    table = BatchedTable(_Store())
    runner = FunnelRunner(CONFIG, table, clock=lambda: 1_000_000.0)
    offset = 0
    for start in range(0, n, 500):
        cmds = []
        for i in range(start, min(n, start + 500)):
            _eid, value = raw_envelope([{"rule": "Storm0", "asset": f"g{i:07d}", "severity": "info"}])
            cmds += [(cmd, data) for _r, cmd, data in routed(CONFIG, value, i, 1_000_000.0 + i / 1000)]
        for value in pack_alerts(cmds):
            runner.apply_batch(0, [(offset, parse_command(value))])
            offset += 1
        table.drain()
    return runner.state(0).funnel.state


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--open", default="1000,10000,50000")
    ap.add_argument("--changed", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for n in [int(x) for x in args.open.split(",") if x]:
        state = opened(n)
        pub = ViewPublisher(None, "bench", CONFIG)
        shown, _writes, _removed = pub.walk(state, None)
        fps = list(state["episodes"])
        walks, steps = [], []
        for r in range(args.rounds):
            changed = set(fps[(r * args.changed) % n:][:args.changed])
            for fp in changed:
                state["episodes"][fp]["last_seen"] = 2_000_000.0 + r
            t0 = time.thread_time()
            pub.walk(state, shown)
            t1 = time.thread_time()
            pub.step(state, shown, (changed, set()))
            t2 = time.thread_time()
            walks.append(t1 - t0)
            steps.append(t2 - t1)
        walk, step = statistics.median(walks) * 1e3, statistics.median(steps) * 1e3
        print(json.dumps({"bench": "alert_view", "firing": len(shown.order), "limit": MAX_VIEW_ALERTS,
                          "changed": args.changed, "walk_ms": round(walk, 1), "step_ms": round(step, 1),
                          "walk_over_step": round(walk / step, 1) if step else None}), flush=True)


if __name__ == "__main__":
    main()
