"""The /schedules routes on the real app and a real Redis (open mode)."""
from __future__ import annotations

import uuid

import pytest
import redis

from api.app import create_api
from plait import keys as K
from plait.settings import Settings

REDIS_URL = "redis://127.0.0.1:6379/0"

EXPORT = {"sysCode": "crm", "bizType": "orders", "userId": "u1",
          "dataConfig": {"dataApiUrl": "http://data.example/rows"}}


@pytest.fixture
def client(tmp_path):
    from fastapi.testclient import TestClient

    prefix = f"plait-schedapi-{uuid.uuid4().hex[:10]}"
    settings = Settings(redis_url=REDIS_URL, redis_prefix=prefix,
                        storage_url=f"file://{tmp_path}/store", broker_url="127.0.0.1:1")
    with TestClient(create_api(settings)) as c:
        c.prefix = prefix
        yield c
    r = redis.Redis.from_url(REDIS_URL)
    for key in r.scan_iter(match=K.everything(prefix), count=1000):
        r.delete(key)


def body(**over):
    return {"name": "weekly", "trigger": {"cron": "0 6 * * 1", "timeZone": "Europe/Berlin"},
            "action": {"export": EXPORT}, **over}


def test_create_get_patch_delete(client):
    resp = client.post("/schedules", json=body(policy={"overlap": "bufferOne", "maxCatchup": 2}))
    assert resp.status_code == 201, resp.text
    sch = resp.json()["data"]
    assert sch["id"].startswith("sch_") and sch["sysCode"] == "crm"
    assert len(sch["nextFireTimes"]) == 5
    assert all(t.endswith("Z") for t in sch["nextFireTimes"])
    assert sch["counters"] == {"fired": 0, "skippedMissed": 0, "skippedOverlap": 0,
                               "skippedPaused": 0, "succeeded": 0, "failed": 0, "cancelled": 0}
    assert sch["policy"]["overlap"] == "bufferOne"
    got = client.get(f"/schedules/{sch['id']}").json()["data"]
    assert got["nextFireTimes"] == sch["nextFireTimes"]
    assert [s["id"] for s in client.get("/schedules").json()["data"]["schedules"]] == [sch["id"]]
    paused = client.patch(f"/schedules/{sch['id']}", json={"paused": True, "note": "holiday"})
    assert paused.status_code == 200 and paused.json()["data"]["paused"] is True
    assert paused.json()["data"]["note"] == "holiday" and paused.json()["data"]["nextFireTimes"] == []
    assert client.delete(f"/schedules/{sch['id']}").status_code == 200
    assert client.get(f"/schedules/{sch['id']}").status_code == 404
    actions = [e["action"] for e in client.get("/audit?sysCode=crm").json()["data"]["entries"]]
    assert actions == ["schedule.deleted", "schedule.updated", "schedule.created"]


def test_interval_grid_next_fire_times_are_on_the_anchor_grid(client):
    sch = client.post("/schedules", json=body(trigger={
        "interval": 300, "anchor": "2026-01-01T00:00:00Z"})).json()["data"]
    minutes = {t[14:16] for t in sch["nextFireTimes"]}
    assert minutes <= {f"{m:02d}" for m in range(0, 60, 5)}


@pytest.mark.parametrize("over, field", [
    ({"trigger": {"cron": "99 * * * *"}}, "trigger"),
    ({"trigger": {"interval": 60, "cron": "* * * * *"}}, "trigger"),
    ({"trigger": {"interval": 60, "timeZone": "Mars/Olympus"}}, "trigger"),
    ({"policy": {"overlap": "sometimes"}}, "policy.overlap"),
    ({"policy": {"maxCatchup": -1}}, "policy.maxCatchup"),
    ({"action": {"probe": {"targets": [{"tcp": "nohost"}]}}, "sysCode": "ops"}, "action.probe.targets"),
    ({"action": {"export": {**EXPORT, "jobConfig": {"timeoutt": 1}}}}, "action.export.jobConfig.timeoutt"),
    ({"trigger": {"interval": 60, "jitterr": 0.1}}, "trigger.jitterr"),
])
def test_invalid_bodies_are_422_naming_the_field(client, over, field):
    resp = client.post("/schedules", json=body(**over))
    assert resp.status_code == 422, resp.text
    fields = [e["field"] for e in resp.json()["data"]["errors"]]
    assert any(f.startswith(field) for f in fields), fields


def test_probe_without_sys_code_in_open_mode_is_422(client):
    resp = client.post("/schedules", json=body(action={"probe": {"targets": [
        {"http": "http://127.0.0.1:1/"}]}}))
    assert resp.status_code == 422 and resp.json()["data"]["errors"][0]["field"] == "sysCode"


def test_trigger_and_backfill_queue_requests(client):
    sid = client.post("/schedules", json=body(trigger={
        "interval": 60, "anchor": "2026-01-01T00:00:00Z"})).json()["data"]["id"]
    t = client.post(f"/schedules/{sid}/trigger")
    assert t.status_code == 202 and t.json()["data"]["slot"].endswith("Z")
    b = client.post(f"/schedules/{sid}/backfill",
                    json={"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:10:00Z"})
    assert b.status_code == 202 and b.json()["data"]["slots"] == 11
    too_many = client.post(f"/schedules/{sid}/backfill",
                           json={"start": "2026-01-01T00:00:00Z", "end": "2026-02-01T00:00:00Z"})
    assert too_many.status_code == 422 and too_many.json()["data"]["errors"][0]["field"] == "end"
    r = redis.Redis.from_url(REDIS_URL)
    assert r.llen(K.schedule_requests(client.prefix, sid)) == 2


def test_metrics_show_schedule_lag(client):
    sid = client.post("/schedules", json=body(trigger={
        "interval": 60, "anchor": "2026-01-01T00:00:00Z"})).json()["data"]["id"]
    text = client.get("/metrics").text
    assert f'plait_schedule_lag_seconds{{schedule="{sid}"}}' in text


@pytest.mark.parametrize("interval", [0.1, 9.5])
def test_interval_below_the_floor_is_422_naming_the_field(client, interval):
    resp = client.post("/schedules", json=body(trigger={"interval": interval}))
    assert resp.status_code == 422, resp.text
    err = resp.json()["data"]["errors"][0]
    assert err["field"] == "trigger.interval" and "10 s" in err["rule"], err
    sid = client.post("/schedules", json=body(trigger={"interval": 10})).json()["data"]["id"]
    patched = client.patch(f"/schedules/{sid}", json={"trigger": {"interval": interval}})
    assert patched.status_code == 422
    assert patched.json()["data"]["errors"][0]["field"] == "trigger.interval"


def test_interval_floor_is_a_setting(tmp_path):
    from fastapi.testclient import TestClient

    prefix = f"plait-schedapi-{uuid.uuid4().hex[:10]}"
    settings = Settings(redis_url=REDIS_URL, redis_prefix=prefix, schedule_min_interval_seconds=1,
                        storage_url=f"file://{tmp_path}/store", broker_url="127.0.0.1:1")
    try:
        with TestClient(create_api(settings)) as c:
            assert c.post("/schedules", json=body(trigger={"interval": 1})).status_code == 201
            assert c.post("/schedules", json=body(trigger={"interval": 0.5})).status_code == 422
    finally:
        r = redis.Redis.from_url(REDIS_URL)
        for key in r.scan_iter(match=K.everything(prefix), count=1000):
            r.delete(key)


@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 0 31 4 *"])
def test_a_cron_that_never_fires_is_422_naming_trigger_cron_and_not_stored(client, cron):
    resp = client.post("/schedules", json=body(trigger={"cron": cron}))
    assert resp.status_code == 422, resp.text
    (err,) = resp.json()["data"]["errors"]
    assert err["field"] == "trigger.cron" and "never fires" in err["rule"], err
    assert client.get("/schedules").json()["data"]["schedules"] == []
    sid = client.post("/schedules", json=body()).json()["data"]["id"]
    patched = client.patch(f"/schedules/{sid}", json={"trigger": {"cron": cron}})
    assert patched.status_code == 422, patched.text
    assert patched.json()["data"]["errors"][0]["field"] == "trigger.cron"
    assert client.get(f"/schedules/{sid}").json()["data"]["trigger"]["cron"] == "0 6 * * 1"


def test_a_stored_definition_that_breaks_a_rule_does_not_break_the_list(client):
    import json

    good = client.post("/schedules", json=body()).json()["data"]["id"]
    # given a definition stored by an older version that let a never-firing cron in
    bad = {"id": "sch_old", "sysCode": "crm", "createdMs": 1767225600000,
           "updatedMs": 1767225600000, "paused": False, "note": None,
           "spec": body(trigger={"cron": "0 0 30 2 *", "timeZone": "UTC", "jitter": 0.0})}
    redis.Redis.from_url(REDIS_URL).hset(K.schedules(client.prefix), "sch_old", json.dumps(bad))
    # then the list, the filtered list and the schedule itself still answer
    for url in ("/schedules", "/schedules?sysCode=crm"):
        resp = client.get(url)
        assert resp.status_code == 200, resp.text
        listed = {s["id"]: s for s in resp.json()["data"]["schedules"]}
        assert set(listed) == {good, "sch_old"}
        assert len(listed[good]["nextFireTimes"]) == 5 and "definitionErrors" not in listed[good]
    one = client.get("/schedules/sch_old")
    assert one.status_code == 200, one.text
    shown = one.json()["data"]
    assert shown["trigger"]["cron"] == "0 0 30 2 *" and shown["nextFireTimes"] == []
    assert [e["field"] for e in shown["definitionErrors"]] == ["trigger.cron"]
    # and what needs the definition answers 422 naming the field, not 500
    resp = client.post("/schedules/sch_old/backfill",
                       json={"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"})
    assert resp.status_code == 422 and resp.json()["data"]["errors"][0]["field"] == "trigger.cron"
    # until the trigger is replaced
    fixed = client.patch("/schedules/sch_old", json={"trigger": {"cron": "0 0 28 2 *"}})
    assert fixed.status_code == 200, fixed.text
    assert "definitionErrors" not in fixed.json()["data"]


@pytest.mark.parametrize("cron", ["* * * * * *", "*/5 * * * * *", "5-1 * * * *",
                                  "0 0 * * SAT-SUN"])
def test_six_fields_and_backward_ranges_are_422_naming_trigger_cron(client, cron):
    resp = client.post("/schedules", json=body(trigger={"cron": cron}))
    assert resp.status_code == 422, resp.text
    (err,) = resp.json()["data"]["errors"]
    assert err["field"] == "trigger.cron", err
    assert err["rule"].startswith("not a valid 5-field cron expression"), err
    sid = client.post("/schedules", json=body()).json()["data"]["id"]
    patched = client.patch(f"/schedules/{sid}", json={"trigger": {"cron": cron}})
    assert patched.status_code == 422, patched.text
    assert patched.json()["data"]["errors"][0]["field"] == "trigger.cron"


@pytest.mark.parametrize("cron", ["@daily", "0 9-17/2 * * MON-FRI", "0 0 * * 5-7",
                                  "0 0 29 2 *"])
def test_five_field_crons_and_macros_are_accepted(client, cron):
    resp = client.post("/schedules", json=body(trigger={"cron": cron}))
    assert resp.status_code == 201, resp.text


@pytest.mark.parametrize("field", ["name", "trigger", "action", "policy", "paused"])
def test_patch_with_null_is_422_naming_the_field_and_changes_nothing(client, field):
    sid = client.post("/schedules", json=body(paused=True, note="frozen")).json()["data"]["id"]
    before = client.get(f"/schedules/{sid}").json()["data"]
    resp = client.patch(f"/schedules/{sid}", json={field: None})
    assert resp.status_code == 422, resp.text
    (err,) = resp.json()["data"]["errors"]
    assert err["field"] == field and "null" in err["rule"], err
    assert client.get(f"/schedules/{sid}").json()["data"] == before


def test_patch_note_null_clears_the_note(client):
    sid = client.post("/schedules", json=body(paused=True, note="frozen")).json()["data"]["id"]
    resp = client.patch(f"/schedules/{sid}", json={"note": None})
    assert resp.status_code == 200, resp.text
    assert resp.json()["data"]["note"] is None and resp.json()["data"]["paused"] is True


def test_a_patch_the_merged_definition_refuses_is_422_naming_the_field(client):
    import json

    # given a definition stored by an older version that let a six-field cron in
    sid = client.post("/schedules", json=body()).json()["data"]["id"]
    r = redis.Redis.from_url(REDIS_URL)
    doc = json.loads(r.hget(K.schedules(client.prefix), sid))
    doc["spec"]["trigger"]["cron"] = "* * * * * *"
    r.hset(K.schedules(client.prefix), sid, json.dumps(doc))
    # when a patch leaves the trigger as it is
    resp = client.patch(f"/schedules/{sid}", json={"name": "renamed"})
    # then the merged definition is refused naming the field, not a 500
    assert resp.status_code == 422, resp.text
    assert [e["field"] for e in resp.json()["data"]["errors"]] == ["trigger.cron"]


def test_a_backfill_ending_in_the_future_is_422_naming_end(client):
    from datetime import datetime, timedelta, timezone

    sid = client.post("/schedules", json=body(trigger={
        "interval": 3600, "anchor": "2026-01-01T00:30:00Z"})).json()["data"]["id"]
    now = datetime.now(timezone.utc)
    resp = client.post(f"/schedules/{sid}/backfill", json={
        "start": (now - timedelta(hours=3)).isoformat(),
        "end": (now + timedelta(hours=3)).isoformat()})
    assert resp.status_code == 422, resp.text
    (err,) = resp.json()["data"]["errors"]
    assert err["field"] == "end" and "future" in err["rule"], err
    r = redis.Redis.from_url(REDIS_URL)
    assert not r.exists(K.schedule_requests(client.prefix, sid))
    past = client.post(f"/schedules/{sid}/backfill", json={
        "start": (now - timedelta(hours=3)).isoformat(), "end": now.isoformat()})
    assert past.status_code == 202 and past.json()["data"]["slots"] in (3, 4), past.text


def test_a_backfill_from_before_year_1_in_the_zone_is_422_naming_start(client):
    trigger = {"cron": "0 6 * * *", "timeZone": "America/New_York"}
    sid = client.post("/schedules", json=body(trigger=trigger)).json()["data"]["id"]
    resp = client.post(f"/schedules/{sid}/backfill", json={
        "start": "0001-01-01T00:00:00Z", "end": "0001-01-03T00:00:00Z"})
    assert resp.status_code == 422, resp.text
    assert [e["field"] for e in resp.json()["data"]["errors"]] == ["start"], resp.text
