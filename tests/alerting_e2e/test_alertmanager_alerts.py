"""``/api/v2/alerts`` as Alertmanager has it, through the real stack (Tansu
broker, worker, API): any non-empty label set is an alert (no ``alertname``
needed)."""
from __future__ import annotations

import httpx
import pytest

from alert_e2e_support import Kafka, Receiver, wait_until, write_config

pytestmark = pytest.mark.integration

FAST = {"timing": {"group_wait": "1s", "group_interval": "2s", "repeat_interval": "1h"},
        "delivery": {"timeout": "3s", "backoff_initial": "0.5s", "backoff_max": "2s"}}


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


@pytest.fixture
def plait(make_stack, tmp_path, receiver):
    """A stack whose funnel sends Alertmanager webhooks to ``/am`` (open API)."""
    cfg = write_config(tmp_path / "alerting.yaml",
                       [{"name": "am", "url": receiver.url("/am"), "format": "alertmanager"}],
                       **FAST)
    stack = make_stack(workers=1, PLAIT_ALERTING_CONFIG=str(cfg))
    wait_until(lambda: httpx.get(f"{stack.api_url}/alerts/counters", timeout=5)
               .json()["data"]["partitions"] >= 4, 90, "the funnel to run")
    return stack


def test_an_alert_without_alertname_reaches_the_webhook(plait, receiver):
    api = plait.api_url
    kafka = Kafka(plait)
    try:
        # when an alert whose only label is foo="bar" is posted
        resp = httpx.post(f"{api}/api/v2/alerts", json=[{"labels": {"foo": "bar"}}], timeout=10)
        assert resp.status_code == 200, resp.text
        # then the receiver gets it with its own labels (no alertname invented)
        def delivered():
            return [a for h in receiver.accepted("/am") for a in h.body["alerts"]]
        got = wait_until(delivered, 60, "the alert at the webhook")
        assert [(a["labels"], a["status"]) for a in got] == [({"foo": "bar"}, "firing")]
        # and GET /api/v2/alerts lists it so
        listed = wait_until(lambda: httpx.get(f"{api}/api/v2/alerts", timeout=10).json(), 30,
                            "the alert listed")
        assert [a["labels"] for a in listed] == [{"foo": "bar"}]
        # and the ledger says it was delivered
        fp = listed[0]["fingerprint"]
        wait_until(lambda: any(e["fingerprint"] == fp and e["outcome"] == "delivered"
                               for e in kafka.read_ledger()), 30, "its ledger entry")
        # while an empty label set is still refused, naming labels
        bad = httpx.post(f"{api}/api/v2/alerts", json=[{"labels": {}}], timeout=10)
        assert bad.status_code == 400 and bad.json().startswith("1 of 1 alerts refused")
        assert "[0].labels: is required" in bad.json()
    finally:
        kafka.close()
