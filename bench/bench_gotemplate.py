"""What Alertmanager templates cost to load and render (``alerting/gotemplate.py``).
Prints one JSON object:

    {"bench": "gotemplate", "alerts", "load_ms", "data_ms", "subject_ms", "description_ms"}

``load_ms``: ``load_templates([])`` (Alertmanager's default.tmpl and
email.tmpl), warm; ``data_ms``: ``alertmanager_data`` of one section of
``--alerts`` firing alerts; ``subject_ms``: ``{{ template "__subject" . }}``
(a title); ``description_ms``: ``{{ template "opsgenie.default.description"
. }}``, which lists every alert's labels and annotations. Each the mean of
``--repeat`` runs.

Usage: ``python bench/bench_gotemplate.py [--alerts 1000] [--repeat 20]``
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable

from alerting.gotemplate import alertmanager_data, load_templates


def _view(i: int) -> dict[str, Any]:
    return {"fingerprint": f"{i:016x}", "rule": "ExportFailed", "asset": f"BILL/{i}",
            "severity": "critical", "status": "firing", "change": "new", "escalated_from": None,
            "labels": {"instance": f"n{i}", "team": "billing"},
            "annotations": {"summary": f"export {i} failed"}, "starts_at": 1.7e9 + i,
            "ends_at": None, "duration": None, "transient": False,
            "generator_url": "http://prom/g", "source": "native"}


def _mean_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return round((time.perf_counter() - start) / repeat * 1000, 3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--alerts", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    sections = [{"group_id": "g", "group_labels": {"rule": "ExportFailed"}, "part": 1,
                 "parts": 1, "merged": False, "reminder": False, "counts": {},
                 "alerts": [_view(i) for i in range(args.alerts)]}]
    ts = load_templates([])
    data = alertmanager_data(sections, "oncall", "https://plait.example")
    print(json.dumps({
        "bench": "gotemplate", "alerts": args.alerts,
        "load_ms": _mean_ms(lambda: load_templates([]), args.repeat),
        "data_ms": _mean_ms(lambda: alertmanager_data(sections, "oncall", ""), args.repeat),
        "subject_ms": _mean_ms(lambda: ts.render('{{ template "__subject" . }}', data),
                               args.repeat),
        "description_ms": _mean_ms(
            lambda: ts.render('{{ template "opsgenie.default.description" . }}', data),
            args.repeat),
    }))


if __name__ == "__main__":
    main()
