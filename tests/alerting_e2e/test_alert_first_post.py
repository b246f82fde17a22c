"""Ready means ready: once the stack reports the API ready, the first
``POST /api/v2/alerts`` costs what the next ones cost (the API made its Kafka
producer and looked up the funnel's partitions before answering /health).
Real stack: Tansu broker, Redis, one alerting worker, the API."""
from __future__ import annotations

import statistics
import time

import httpx
import pytest

from alert_e2e_support import Receiver, fast_timing, write_config

pytestmark = pytest.mark.integration


def test_first_post_after_ready_is_as_fast_as_the_next(make_stack, tmp_path):
    # given a stack just reported ready (Stack.start waited for the API's /health)
    receiver = Receiver().start()
    try:
        cfg = write_config(tmp_path / "alerting.yaml",
                           [{"name": "am", "url": receiver.url("/am"), "format": "alertmanager"}],
                           **fast_timing())
        stack = make_stack(workers=1, PLAIT_ALERTING_CONFIG=str(cfg))
        # when six alerts are posted one after the other
        took = []
        with httpx.Client(timeout=10) as client:
            for i in range(6):
                started = time.monotonic()
                resp = client.post(f"{stack.api_url}/api/v2/alerts",
                                   json=[{"labels": {"alertname": f"Warm{i}"}}])
                took.append(time.monotonic() - started)
                assert resp.status_code == 200, resp.text
        # then the first is within 3x the median of the next five (or under 100 ms)
        median = statistics.median(took[1:])
        assert took[0] < 0.1 or took[0] <= 3 * median, (
            f"first POST {took[0] * 1000:.0f} ms, next median {median * 1000:.0f} ms")
    finally:
        receiver.stop()
