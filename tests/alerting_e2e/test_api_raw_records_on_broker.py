"""On the real broker: the records the API writes stay within
plait.records.MAX_RECORD_BYTES (docs/kafka-rules.md #17) whatever a request
carries. A ~16 MB ``POST /alerts`` of thousands of ~2.5 KB alerts is cut
into ``alerts.funnel`` records by encoded size (not 500 alerts a record,
which made 1.2 MB records), every accepted alert is there exactly once
(its first route's command), and nothing goes to ``alerts.raw``; ``POST
/api/v2/alerts`` likewise. Read back with aiokafka."""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import orjson
import pytest

from alert_e2e_support import AlertApi, record_sizes
from api.alerting_deps import MAX_BODY
from plait.records import MAX_RECORD_BYTES

pytestmark = pytest.mark.integration

ALERTING_YAML = Path(__file__).resolve().parents[2] / "examples" / "alerting.yaml"


def _native(i: int) -> dict:
    return {"rule": "BigReport", "asset": f"h{i % 3}", "severity": "warning",
            "labels": {"n": str(i)}, "annotations": {"description": os.urandom(1200).hex()}}


def _funnel_alerts(bootstrap: str) -> tuple[int, list[dict], int]:
    """(largest alerts.funnel record, every alert those records carry, alerts.raw records)."""
    sizes = asyncio.run(record_sizes(bootstrap, lambda t: t.endswith(("alerts.funnel",
                                                                       "alerts.raw")),
                                     keep=lambda t: True))
    funnel = {t: v for t, v in sizes.items() if t.endswith("alerts.funnel")}
    most = max(m for _n, m, _v in funnel.values())
    alerts = [item["alert"] for _n, _m, values in funnel.values() for v in values
              for item in orjson.loads(v)["items"] if not item.get("copy")]
    raw = sum(n for t, (n, _m, _v) in sizes.items() if t.endswith("alerts.raw"))
    return most, alerts, raw


@pytest.mark.timeout(300)
def test_a_16_mb_post_is_cut_into_bounded_records_and_every_alert_arrives(make_stack):
    stack = make_stack(workers=0, PLAIT_ALERTING_CONFIG=str(ALERTING_YAML))
    api = AlertApi(stack)
    try:
        native = [_native(i) for i in range(6300)]
        body = orjson.dumps(native)
        assert 15_000_000 < len(body) <= MAX_BODY
        resp = httpx.post(f"{api.url}/alerts", content=body, timeout=120,
                          headers={"Content-Type": "application/json"})
        assert resp.status_code == 202, resp.text[:500]
        assert resp.json()["data"]["accepted"] == len(native)
        v2 = [{"labels": {"alertname": "BigV2", "instance": "i1", "n": str(i)},
               "annotations": {"description": os.urandom(1200).hex()}} for i in range(600)]
        resp = httpx.post(f"{api.url}/api/v2/alerts", json=v2, timeout=60)
        assert resp.status_code == 200, resp.text[:500]

        most, alerts, raw = _funnel_alerts(stack.env["PLAIT_BROKER_URL"])
        assert most <= MAX_RECORD_BYTES and raw == 0
        got_native = sorted(int(a["labels"]["n"]) for a in alerts if a.get("rule") == "BigReport")
        got_v2 = sorted(int(a["labels"]["n"]) for a in alerts
                        if a.get("labels", {}).get("alertname") == "BigV2")
        assert got_native == list(range(len(native)))
        assert got_v2 == list(range(len(v2)))
    finally:
        api.stop()
