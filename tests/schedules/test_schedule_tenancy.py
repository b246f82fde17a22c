"""/schedules under a caller registry: signed calls only, a schedule belongs
to the caller's sysCode (others get 404), its export passes the caller's
allowances (notifyUrl under notifyUrlPrefixes), errors name the field."""
from __future__ import annotations

import uuid

import pytest
import redis
import yaml

from api.app import create_api
from plait import keys as K
from plait.settings import Settings
from producers.schedules import ScheduleClient, ScheduleError
from producers.signing import PlaitAuth

REDIS_URL = "redis://127.0.0.1:6379/0"
CRM_SECRET = "crm-" + "s" * 40
OPS_SECRET = "ops-" + "o" * 40


@pytest.fixture
def app_client(tmp_path):
    from fastapi.testclient import TestClient

    base = dict(bizTypes=["orders"], fileFormats=["csv"], maxRows=1000,
                dataApiPrefixes=["https://data.example/export/"])
    reg = tmp_path / "callers.yaml"
    reg.write_text(yaml.safe_dump({"callers": {
        "crm": dict(base, appKey="crm-app", appSecret=CRM_SECRET,
                    notifyUrlPrefixes=["https://hooks.crm.example/plait/"]),
        "ops": dict(base, appKey="ops-app", appSecret=OPS_SECRET)}}))
    prefix = f"plait-schedsec-{uuid.uuid4().hex[:10]}"
    settings = Settings(redis_url=REDIS_URL, redis_prefix=prefix, callers_file=str(reg),
                        storage_url=f"file://{tmp_path}/store", broker_url="127.0.0.1:1")
    with TestClient(create_api(settings)) as c:
        yield c
    r = redis.Redis.from_url(REDIS_URL)
    for key in r.scan_iter(match=K.everything(prefix), count=1000):
        r.delete(key)


def sdk(client, key, secret):
    client.auth = PlaitAuth(key, secret)
    return ScheduleClient("http://testserver", client=client)


def body(**job):
    return {"name": "weekly", "trigger": {"interval": 3600},
            "action": {"export": {"sysCode": "crm", "bizType": "orders", "userId": "u1",
                                  "dataConfig": {"dataApiUrl": "https://data.example/export/a"},
                                  "documentConfig": {"fileFormat": "csv"},
                                  "jobConfig": job}}}


def test_unsigned_calls_are_401(app_client):
    assert app_client.get("/schedules").status_code == 401
    assert app_client.post("/schedules", json=body()).status_code == 401


def test_a_schedule_belongs_to_its_caller(app_client):
    crm = sdk(app_client, "crm-app", CRM_SECRET)
    sid = crm.create(body(notifyUrl="https://hooks.crm.example/plait/done"))["id"]
    assert crm.get(sid)["sysCode"] == "crm"
    ops = sdk(app_client, "ops-app", OPS_SECRET)
    assert ops.list() == []
    for call in (lambda: ops.get(sid), lambda: ops.trigger(sid), lambda: ops.delete(sid)):
        with pytest.raises(ScheduleError) as err:
            call()
        assert err.value.status == 404


@pytest.mark.parametrize("job, spec_over, field", [
    ({"notifyUrl": "https://evil.example/x"}, {}, "action.export.jobConfig.notifyUrl"),
    ({}, {"bizType": "payroll"}, "action.export.bizType"),
    ({}, {"sysCode": "ops"}, "action.export.sysCode"),
])
def test_the_export_must_pass_the_callers_allowances(app_client, job, spec_over, field):
    crm = sdk(app_client, "crm-app", CRM_SECRET)
    b = body(**job)
    b["action"]["export"].update(spec_over)
    with pytest.raises(ScheduleError) as err:
        crm.create(b)
    assert err.value.status in (403, 422)
    assert err.value.body["data"]["errors"][0]["field"] == field
