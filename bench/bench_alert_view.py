"""What one publish of the alert view (``alerting/view.py``) costs as firing
alerts grow on one partition, in process (no Redis; CPU seconds of this
thread). Prints one JSON object per open count:

    {"bench": "alert_view", "firing", "limit", "changed", "walk_ms", "step_ms", "walk_over_step"}

For each count N: N groups of one delivered firing alert each are opened
through the funnel runner (``bench_alert_runner.open_groups``) and
published once; then ``--rounds`` times, ``--changed`` of them are seen
again (a new ``last_seen``, so they move to the top of the view) and the
view is brought up to date twice from the same state: by ``walk`` (every
episode ranked and sorted afresh, what each publish did above
``MAX_VIEW_ALERTS`` before the kept ranks) and by ``step`` (only the
changes and what they moved across the floor). ``walk_ms`` and
``step_ms`` are medians over the rounds; the ratio is the figure that
holds across machines.

Usage: ``python bench/bench_alert_view.py [--open 1000,10000,50000] [--changed 1000] [--rounds 3]``
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from alerting.view import MAX_VIEW_ALERTS, ViewPublisher
from bench_alert_runner import CONFIG, open_groups


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--open", default="1000,10000,50000")
    ap.add_argument("--changed", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for n in [int(x) for x in args.open.split(",") if x]:
        state = open_groups(n).state(0).funnel.state
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
