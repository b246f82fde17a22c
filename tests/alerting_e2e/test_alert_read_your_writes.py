"""The API answers from the current state: an alert is listed by
``GET /api/v2/alerts`` (and ``/api/v2/alerts/groups``) as soon as its POST
has been answered, silenced or inhibited as of that moment, as Alertmanager
answers from its own state. No wait between a POST and the GET that checks
it. Real stack: Tansu broker, Redis, one alerting worker, the API."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import httpx
import pytest

from alert_e2e_support import funnel_stack, wait_until, write_config

pytestmark = pytest.mark.integration

#: group_interval 10m: the funnel re-evaluates an open group's members rarely
CONFIG = {"grouping": {"group_by": ["alertname"]},
          "timing": {"group_wait": "1s", "group_interval": "10m", "repeat_interval": "1h"},
          "delivery": {"timeout": "3s", "backoff_initial": "0.5s", "backoff_max": "2s"},
          "inhibit_rules": [{"source_matchers": ['alertname="NodeDown"'],
                             "target_matchers": ['alertname="PodDown"'], "equal": ["node"]}]}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    """The API URL of a stack with an inhibit rule NodeDown -> PodDown (same node)."""
    from pathlib import Path

    from alert_e2e_support import Receiver
    from ops.stack import Stack
    from stack_env import drop_redis_keys, isolated_env

    receiver = Receiver().start()
    d = Path(tmp_path_factory.mktemp("ryw"))
    cfg = write_config(d / "alerting.yaml", [{"name": "am", "url": receiver.url("/am"),
                                              "format": "alertmanager"}], **CONFIG)
    stacks: list[Stack] = []

    def make(workers: int = 1, api_replicas: int = 1, **extra):
        stacks.append(Stack(d / "stack", isolated_env(**extra), api_replicas=api_replicas)
                      .start(workers=workers))
        return stacks[-1]

    try:
        yield funnel_stack(make, cfg).api_url
    finally:
        for s in stacks:
            s.stop()
            drop_redis_keys(s)
        receiver.stop()


def rfc3339(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def post(api: str, *alerts: dict) -> None:
    resp = httpx.post(f"{api}/api/v2/alerts", json=list(alerts), timeout=10)
    assert resp.status_code == 200, resp.text


def listed(api: str, **labels: str) -> dict | None:
    for a in httpx.get(f"{api}/api/v2/alerts", timeout=10).json():
        if all(a["labels"].get(k) == v for k, v in labels.items()):
            return a
    return None


def test_a_posted_alert_is_listed_at_once_with_its_times(api):
    ends = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(minutes=30)
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    post(api, {"labels": {"alertname": "DiskFull", "instance": "db-1"}, "endsAt": rfc3339(ends),
               "annotations": {"summary": "disk full"}})
    got = listed(api, alertname="DiskFull", instance="db-1")
    assert got is not None, "not listed right after its POST was answered"
    assert got["status"] == {"state": "active", "silencedBy": [], "inhibitedBy": []}
    assert got["endsAt"].startswith(rfc3339(ends)[:-1])
    assert datetime.fromisoformat(got["updatedAt"].replace("Z", "+00:00")) >= before
    assert got["annotations"] == {"summary": "disk full"} and len(got["fingerprint"]) == 16
    groups = httpx.get(f"{api}/api/v2/alerts/groups", timeout=10).json()
    assert any(a["labels"].get("instance") == "db-1" for g in groups for a in g["alerts"]
               if g["labels"] == {"alertname": "DiskFull"})


def test_a_posted_alert_matching_a_silence_is_silenced_at_once(api):
    now = datetime.now(timezone.utc)
    resp = httpx.post(f"{api}/api/v2/silences", timeout=10, json={
        "matchers": [{"name": "alertname", "value": "Quiet", "isRegex": False}],
        "startsAt": rfc3339(now), "endsAt": rfc3339(now + timedelta(hours=1)),
        "createdBy": "ops", "comment": "maintenance"})
    assert resp.status_code == 200, resp.text
    sid = resp.json()["silenceID"]
    post(api, {"labels": {"alertname": "Quiet", "instance": "web-1"}})
    got = listed(api, alertname="Quiet")
    assert got is not None, "not listed right after its POST was answered"
    assert got["status"] == {"state": "suppressed", "silencedBy": [sid], "inhibitedBy": []}


def test_an_alert_whose_source_fires_is_inhibited_at_once(api):
    # given NodeDown on n1 firing (published by the funnel)
    post(api, {"labels": {"alertname": "NodeDown", "node": "n1"}})
    source = wait_until(lambda: listed(api, alertname="NodeDown", node="n1"), 20, "NodeDown")
    # when PodDown on n1 is posted, then it shows inhibited by NodeDown at once
    post(api, {"labels": {"alertname": "PodDown", "node": "n1", "pod": "p"}})
    got = listed(api, alertname="PodDown", node="n1")
    assert got is not None, "not listed right after its POST was answered"
    assert got["status"] == {"state": "suppressed", "silencedBy": [],
                             "inhibitedBy": [source["fingerprint"]]}


def test_a_notified_alert_is_inhibited_as_soon_as_its_source_is_posted(api):
    # given PodDown on n2 firing and notified, its group next evaluated in 10 minutes
    post(api, {"labels": {"alertname": "PodDown", "node": "n2", "pod": "q"}})
    wait_until(lambda: listed(api, alertname="PodDown", node="n2"), 20, "PodDown on n2")
    # when NodeDown on n2 is posted, then PodDown shows inhibited at once
    post(api, {"labels": {"alertname": "NodeDown", "node": "n2"}})
    source = listed(api, alertname="NodeDown", node="n2")
    got = listed(api, alertname="PodDown", node="n2")
    assert source is not None and got is not None
    assert got["status"]["state"] == "suppressed"
    assert got["status"]["inhibitedBy"] == [source["fingerprint"]]
