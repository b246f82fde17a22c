"""The API decides each alert's routes and writes the commands straight to
``alerts.funnel``: one ``alerts`` record per funnel partition per POST, each
command at its receiver's partition, carrying the configuration version it
was decided with; a reload (``POST /-/reload``) reaches the next decision,
and a worker on another version routes the alert again
(``alerting.commands.read_alert_command``)."""
from __future__ import annotations

import json
import uuid

import pytest
import redis

from alerting.commands import read_alert_command
from alerting.config import load_config
from alerting.routing import routing_version
from alerting.wire import funnel_partition
from api.app import create_api
from plait.records import MAX_RECORD_BYTES
from plait.settings import Settings

REDIS_URL = "redis://127.0.0.1:6379/0"


def _records(sent) -> list[tuple[bytes, dict, int]]:
    return [(key, json.loads(value), p) for topic, key, value, p in sent]


def test_one_record_per_partition_each_command_at_its_receivers_partition(client, sent):
    alerts = [{"labels": {"alertname": "A", "instance": f"h{i}", "team": "db" if i % 2 else "web"}}
              for i in range(40)]
    resp = client.post("/api/v2/alerts", json=alerts)
    assert resp.status_code == 200, resp.text
    records = _records(sent)
    assert all(t.endswith("alerts.funnel") for t, *_ in sent)  # nothing on alerts.raw
    assert sorted(p for _k, _d, p in records) == sorted({p for _k, _d, p in records})
    config = client.app.state.alerting.config
    items = [(item, p) for _k, doc, p in records for item in doc["items"]]
    assert len(items) == 40 and {i["receiver"] for i, _p in items} == {"dba", "oncall"}
    for item, p in items:
        assert p == funnel_partition(item["receiver"], 2)
        assert item["cfg"] == routing_version(config) and item["source"] == "plait-api-v2"
        read = read_alert_command(config, item)  # the funnel takes the API's decision
        assert [d.receiver for _r, d in read.decisions] == [item["receiver"]]
    assert len({i["id"].split(":")[0] for i, _p in items}) == 1  # one request id


def test_a_large_post_is_cut_into_records_within_the_bound(client, sent):
    alerts = [{"rule": "Big", "asset": f"h{i}", "severity": "warning",
               "annotations": {"d": "x" * 4000}} for i in range(300)]
    resp = client.post("/alerts", json=alerts)
    assert resp.status_code == 202 and resp.json()["data"]["accepted"] == 300
    assert len(sent) > 1 and all(len(k) + len(v) <= MAX_RECORD_BYTES for _t, k, v, _p in sent)
    ids = [i["id"] for _k, doc, _p in _records(sent) for i in doc["items"]]
    assert ids == resp.json()["data"]["ids"]  # every alert once, in order


def test_a_worker_on_another_config_routes_the_first_copy_again_and_drops_the_others():
    from alerting.intake import normalize
    from alerting.wire import decided_commands

    api_config = load_config_text(CONTINUED)
    worker_config = load_config_text(CONTINUED.replace("receiver: b, continue: true",
                                                       "receiver: c, continue: true"))
    alert = normalize({"rule": "R", "asset": "h", "severity": "critical"}, 1.0)
    cmds = [c for _r, c in decided_commands(api_config, alert, {
        "v": 1, "kind": "alert", "id": "e:0", "received_at": 1.0,
        "cfg": routing_version(api_config)})]
    assert [c["receiver"] for c in cmds] == ["b", "a"]
    first, second = (read_alert_command(worker_config, c) for c in cmds)
    assert [(rid, d.receiver) for rid, d in first.decisions] == [("e:0", "c"), ("e:0~a", "a")]
    assert second.decisions == [] and second.alert is not None
    same = read_alert_command(api_config, cmds[1])  # same version: taken as decided
    assert [(rid, d.receiver) for rid, d in same.decisions] == [("e:0~a", "a")]


CONTINUED = """
receivers:
  - {name: a, url: "http://127.0.0.1:1/a"}
  - {name: b, url: "http://127.0.0.1:1/b"}
  - {name: c, url: "http://127.0.0.1:1/c"}
route:
  receiver: a
  routes:
    - {matchers: ['severity="critical"'], receiver: b, continue: true}
    - {matchers: ['severity="critical"'], receiver: a}
"""


def load_config_text(text: str):
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(text)
        f.flush()
        return load_config(f.name)


@pytest.fixture
def own_client(sent, tmp_path):
    """A TestClient of the API on a config file of its own (``tmp_path/alerting.yaml``)."""
    from fastapi.testclient import TestClient

    path = tmp_path / "alerting.yaml"
    path.write_text(CONTINUED)
    prefix = f"plait-apitest-{uuid.uuid4().hex[:12]}"
    settings = Settings(redis_url=REDIS_URL, redis_prefix=prefix, alerting_config=str(path),
                        storage_url=f"file://{tmp_path}/store", broker_url="127.0.0.1:1")
    with TestClient(create_api(settings)) as c:
        yield c, path
    r = redis.Redis.from_url(REDIS_URL)
    for key in r.scan_iter(match=f"{prefix}:*", count=500):
        r.delete(key)


def test_a_reload_reaches_the_apis_decision(own_client, sent):
    client, path = own_client
    alert = [{"labels": {"alertname": "R", "severity": "critical"}}]
    assert client.post("/api/v2/alerts", json=alert).status_code == 200
    before = {i["receiver"]: i["cfg"] for _k, d, _p in _records(sent) for i in d["items"]}
    path.write_text(CONTINUED.replace("receiver: b, continue: true", "receiver: c, continue: true"))
    assert client.post("/-/reload").status_code == 200
    sent.clear()
    assert client.post("/api/v2/alerts", json=alert).status_code == 200
    after = {i["receiver"]: i["cfg"] for _k, d, _p in _records(sent) for i in d["items"]}
    assert set(before) == {"b", "a"} and set(after) == {"c", "a"}
    assert len(set(before.values()) | set(after.values())) == 2
