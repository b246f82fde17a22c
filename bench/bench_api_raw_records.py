"""What cutting a request's alerts into ``alerts.raw`` records by size
costs at the API (``api.alerting_edge.sized_alert`` then
``alerting.wire.pack_raw``) against cutting 500 alerts a record
(``alerting.wire.raw_envelope`` per chunk), for ~16 MB of alerts
(``--alerts`` of ~2.5 KB on three ordering keys). Prints one JSON object
per way, the best of ``--runs``:

    {"bench": "api_raw_records", "way", "alerts", "seconds", "records", "largest"}

Usage: ``python bench/bench_api_raw_records.py [--alerts 6300] [--runs 3]``
"""
from __future__ import annotations

import argparse
import json
import os
import time

from alerting.wire import ordering_key, pack_raw, raw_envelope
from api.alerting_edge import sized_alert


def by_key(alerts: list) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, a in enumerate(alerts):
        out.setdefault(ordering_key(a), []).append(i)
    return out


def by_count(alerts: list) -> list[bytes]:
    return [raw_envelope([alerts[i] for i in pos[s:s + 500]], "plait-api", 1.0)[1]
            for pos in by_key(alerts).values() for s in range(0, len(pos), 500)]


def by_size(alerts: list) -> list[bytes]:
    good = [sized_alert(a, f"[{i}].", "plait-api", 1.0) for i, a in enumerate(alerts)]
    return [value for key, pos in by_key(alerts).items()
            for _eid, _n, value in pack_raw([good[i][1] for i in pos], key.encode(),
                                            "plait-api", 1.0, 500)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--alerts", type=int, default=6300)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    alerts = [{"rule": "BigReport", "asset": f"h{i % 3}", "severity": "warning",
               "labels": {"n": str(i)}, "annotations": {"description": os.urandom(1200).hex()}}
              for i in range(args.alerts)]
    for way, cut in (("500 a record", by_count), ("by size", by_size)):
        best, values = float("inf"), []
        for _ in range(args.runs):
            t = time.perf_counter()
            values = cut(alerts)
            best = min(best, time.perf_counter() - t)
        print(json.dumps({"bench": "api_raw_records", "way": way, "alerts": len(alerts),
                          "seconds": round(best, 3), "records": len(values),
                          "largest": max(len(v) for v in values)}))


if __name__ == "__main__":
    main()
