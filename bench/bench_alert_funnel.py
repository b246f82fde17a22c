"""Throughput of the pure alert funnel (no I/O): raw alerts per second.

100,000 raw alerts over 500 assets x 4 rules (2,000 fingerprints), with repeats, severity changes
and resolves, fed at 200 alerts per simulated second; the funnel is ticked
every simulated second and every message is acknowledged at once. Prints one
JSON object per line:

    {"bench": "alert_funnel_pure", "alerts", "seconds", "alerts_per_s", ...}

Usage: ``python bench/bench_alert_funnel.py [--alerts N] [--assets N] [--repeat K]``
"""
from __future__ import annotations

import argparse
import json
import random
import time

from alerting.config import parse_config
from alerting.funnel import Funnel

CONFIG = {
    "receivers": [{"name": "oncall", "url": "http://127.0.0.1:9/hook", "secret": "s",
                   "bucket": {"burst": 3, "refill_interval": 10}}],
    "route": {"receiver": "oncall"},
    "grouping": {"group_by": ["rule"], "batch_size": 50},
    "timing": {"group_wait": 30, "group_interval": 30, "repeat_interval": 300},
    "dedupe": {"fingerprint_labels": ["rule", "asset"], "cooldown": 300},
}


def workload(n: int, assets: int, rules: int = 4, seed: int = 7) -> list[dict]:
    """``n`` native raw alerts: mostly repeats of firing alerts, some
    escalations and resolves."""
    rng = random.Random(seed)
    sev = ["info", "warning", "critical"]
    out = []
    for _ in range(n):
        out.append({"rule": f"Rule{rng.randrange(rules)}", "asset": f"host{rng.randrange(assets):04d}",
                    "severity": sev[min(2, int(rng.expovariate(1.5)))],
                    "status": "resolved" if rng.random() < 0.05 else "firing",
                    "labels": {"env": "prod", "dc": f"dc{rng.randrange(3)}"},
                    "annotations": {"summary": "benchmark alert"}})
    return out


def run_once(alerts: list[dict], per_second: int) -> dict:
    """Feed ``alerts`` through a fresh funnel; returns the result line."""
    funnel = Funnel(parse_config(CONFIG))
    messages = 0
    t0 = time.perf_counter()
    for i, raw in enumerate(alerts):
        now = i / per_second
        funnel.ingest(raw, now)
        if (i + 1) % per_second == 0:
            for m in funnel.tick(now):
                funnel.delivered(m.id, now)
                messages += 1
    seconds = time.perf_counter() - t0
    c = funnel.counters()
    assert c["balanced"], c
    return {"bench": "alert_funnel_pure", "alerts": len(alerts), "seconds": round(seconds, 3),
            "alerts_per_s": round(len(alerts) / seconds), "messages": messages,
            "delivered": c["delivered"], "merged": c["merged"], "deduplicated": c["deduplicated"],
            "pending": c["pending"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alerts", type=int, default=100_000)
    ap.add_argument("--assets", type=int, default=500)
    ap.add_argument("--per-second", type=int, default=200, help="raw alerts per simulated second")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    alerts = workload(args.alerts, args.assets)
    for _ in range(args.repeat):
        print(json.dumps(run_once(alerts, args.per_second)), flush=True)


if __name__ == "__main__":
    main()
