"""What cannot fit one Kafka record is refused at the API naming the field
and the limit (plait.records.MAX_RECORD_BYTES, docs/kafka-rules.md #17),
before anything is answered as accepted: an alert (by its index; the other
alerts of the request go on), a silence (``comment``, ``matchers``) and an
export request or a schedule's export (``dataConfig.queryConditions``:
plait.spec.MAX_SPEC_BYTES).
The real app on a real Redis; the records it would send are recorded."""
from __future__ import annotations

import pytest

from plait.records import MAX_RECORD_BYTES
from plait.spec import MAX_SPEC_BYTES

#: Valid for intake (40 annotations of 8,000 characters), ~320 KB of JSON.
HUGE = {f"note{i}": "x" * 8000 for i in range(40)}
SPEC = {"sysCode": "crm", "bizType": "orders", "userId": "alice",
        "dataConfig": {"dataApiUrl": "http://data.example/export"}}


def _native(i: int, annotations: dict | None = None) -> dict:
    return {"rule": "Disk", "asset": f"h{i}", "severity": "warning",
            "annotations": annotations or {"summary": "s"}}


def _entries(resp) -> dict[str, dict]:
    return {e["field"]: e for e in resp.json()["data"]["errors"]}


def _record_sizes_ok(sent) -> None:
    assert sent and all(len(key) + len(value) <= MAX_RECORD_BYTES
                        for _t, key, value, _p in sent)


def test_an_alert_too_large_for_a_record_is_refused_by_index_and_the_others_go_on(client, sent):
    resp = client.post("/alerts", json=[_native(0), _native(1, HUGE), _native(2)])
    assert resp.status_code == 202, resp.text
    data = resp.json()["data"]
    assert data["accepted"] == 2 and len(data["ids"]) == 2
    [refused] = data["rejected"]
    assert refused["index"] == 1 and refused["field"] == "[1]" and refused["code"] == "size"
    assert str(MAX_RECORD_BYTES) in refused["rule"] + (refused.get("accepted") or "")
    _record_sizes_ok(sent)


def test_a_lone_alert_too_large_is_422_naming_the_body(client, sent):
    resp = client.post("/alerts", json=_native(0, HUGE))
    assert resp.status_code == 422, resp.text
    assert "body" in _entries(resp) and str(MAX_RECORD_BYTES) in resp.text
    assert sent == []


def test_an_alertmanager_alert_too_large_is_400_naming_its_index(client, sent):
    alerts = [{"labels": {"alertname": "A", "instance": f"i{i}"}} for i in range(3)]
    alerts[2]["annotations"] = HUGE
    resp = client.post("/api/v2/alerts", json=alerts)
    assert resp.status_code == 400, resp.text
    assert "[2]" in resp.json() and str(MAX_RECORD_BYTES) in resp.json()
    assert resp.json().startswith("1 of 3 alerts refused, 2 accepted")
    _record_sizes_ok(sent)


@pytest.mark.parametrize("change, field", [
    ({"comment": "c" * (MAX_RECORD_BYTES + 10)}, "comment"),
    ({"matchers": [f'asset="{"h" * 200}{i}"' for i in range(2000)]}, "matchers"),
])
def test_a_silence_too_large_for_a_record_is_422_naming_the_field(client, sent, change, field):
    body = {"matchers": ['asset="h1"'], "endsAt": "2999-01-01T00:00:00Z",
            "createdBy": "ops", "comment": "maintenance"} | change
    resp = client.post("/silences", json=body)
    assert resp.status_code == 422, resp.text
    assert list(_entries(resp)) == [field] and str(MAX_RECORD_BYTES) in resp.text
    assert sent == [] and client.get("/silences").json()["data"]["silences"] == []


def test_an_alertmanager_silence_too_large_is_400_and_keeps_the_one_it_updates(client, sent):
    body = {"matchers": [{"name": "alertname", "value": "A", "isRegex": False}],
            "startsAt": "2026-01-01T00:00:00Z", "endsAt": "2999-01-01T00:00:00Z",
            "createdBy": "ops", "comment": "ok"}
    sid = client.post("/api/v2/silences", json=body).json()["silenceID"]
    sent.clear()
    changed = body | {"id": sid, "comment": "c" * (MAX_RECORD_BYTES + 10),
                      "matchers": [{"name": "alertname", "value": "B", "isRegex": False}]}
    resp = client.post("/api/v2/silences", json=changed)
    assert resp.status_code == 400, resp.text
    assert resp.json().startswith("comment") and str(MAX_RECORD_BYTES) in resp.json()
    assert sent == []
    assert client.get(f"/api/v2/silence/{sid}").json()["status"]["state"] == "active"


#: A spec whose queryConditions alone are ~200 KB of JSON.
BIG_SPEC = SPEC | {"dataConfig": SPEC["dataConfig"] | {
    "queryConditions": {f"k{i}": "v" * 1000 for i in range(200)}}}


def test_an_export_request_too_large_is_422_naming_the_field_and_the_limit(client):
    resp = client.post("/export/tasks", json=BIG_SPEC)
    assert resp.status_code == 422, resp.text
    entry = _entries(resp)["dataConfig.queryConditions"]
    assert str(MAX_SPEC_BYTES) in entry["rule"]


def test_a_schedule_whose_export_is_too_large_is_422_naming_the_field(client):
    resp = client.post("/schedules", json={"name": "big", "trigger": {"interval": 3600},
                                           "action": {"export": BIG_SPEC}})
    assert resp.status_code == 422, resp.text
    entry = _entries(resp)["action.export.dataConfig.queryConditions"]
    assert str(MAX_SPEC_BYTES) in entry["rule"]
    assert client.get("/schedules").json()["data"]["schedules"] == []
