"""What the API spends per POST between validating alerts and handing
records to the producer, two ways, on the same requests (no broker):

- ``raw``: the alerts as ``alerts.raw`` events per ordering key
  (``alerting.wire.raw_envelope``), the router deciding later;
- ``funnel``: the routed commands (``alerting.wire.decided_commands``, each
  encoded once) packed per ``alerts.funnel`` partition
  (``alerting.wire.pack_alerts``), as ``api.ingest.AlertIngest.publish`` does.

Shapes: ``big``: one ~16 MB ``POST /alerts`` (``--alerts`` of ~2.5 KB on three
ordering keys); ``storm``: ``--alerts`` Alertmanager alerts (20 alertnames x
instances, 5 labels, 2 annotations) in POSTs of 64, each alert its own
ordering key. Both validate with intake first. Prints one JSON object per
way, the best of ``--runs``:

    {"bench": "api_raw_records", "shape", "way", "alerts", "seconds", "records", "largest"}

Usage: ``python bench/bench_api_raw_records.py [--shape big|storm] [--alerts N] [--runs 3]``
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from alerting.config import load_config
from alerting.intake import normalize
from alerting.routing import routing_version
from alerting.wire import (command, decided_commands, funnel_partition, normalize_options,
                           ordering_key, pack_alerts, raw_envelope)

CONFIG = load_config(Path(__file__).resolve().parents[1] / "examples" / "alerting.yaml")
OPTIONS = normalize_options(CONFIG)
PARTITIONS = 12
NOW = time.time()


def raw_way(post: list) -> list[bytes]:
    for a in post:
        normalize(a, NOW, **OPTIONS)
    by_key: dict[str, list] = {}
    for a in post:
        by_key.setdefault(ordering_key(a), []).append(a)
    return [raw_envelope(alerts[i:i + 500], "plait-api", NOW)[1]
            for alerts in by_key.values() for i in range(0, len(alerts), 500)]


def funnel_way(post: list) -> list[bytes]:
    base = {"v": 1, "kind": "alert", "received_at": NOW, "source": "plait-api",
            "cfg": routing_version(CONFIG)}
    by_partition: dict[int, list[tuple[None, bytes]]] = {}
    for pos, a in enumerate(post):
        alert = normalize(a, NOW, **OPTIONS)
        for r, c in decided_commands(CONFIG, alert, dict(base, id=f"e:{pos}")):
            by_partition.setdefault(funnel_partition(r, PARTITIONS), []).append((None, command(**c)))
    return [v for p, items in by_partition.items() for v in pack_alerts(items, str(p).encode())]


def posts(shape: str, n: int) -> list[list]:
    if shape == "big":
        return [[{"rule": "BigReport", "asset": f"h{i % 3}", "severity": "warning",
                  "labels": {"n": str(i)}, "annotations": {"description": os.urandom(1200).hex()}}
                 for i in range(n)]]
    alerts = [{"labels": {"alertname": f"Storm{i % 20}", "instance": f"host-{i // 20:05d}",
                          "job": "node", "severity": "warning", "team": "sre"},
               "annotations": {"summary": f"disk {i} full", "runbook": "http://r/x"},
               "startsAt": "2026-12-04T00:00:00Z", "generatorURL": "http://prom/graph"}
              for i in range(n)]
    return [alerts[i:i + 64] for i in range(0, n, 64)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=("big", "storm"), default="big")
    ap.add_argument("--alerts", type=int, default=6300)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    requests = posts(args.shape, args.alerts)
    for way, cut in (("raw", raw_way), ("funnel", funnel_way)):
        best, values = float("inf"), []
        for _ in range(args.runs):
            t = time.perf_counter()
            values = [v for post in requests for v in cut(post)]
            best = min(best, time.perf_counter() - t)
        print(json.dumps({"bench": "api_raw_records", "shape": args.shape, "way": way,
                          "alerts": args.alerts, "seconds": round(best, 3),
                          "records": len(values), "largest": max(len(v) for v in values)}))


if __name__ == "__main__":
    main()
