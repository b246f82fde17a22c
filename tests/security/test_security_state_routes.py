"""Every route that changes state needs a credential once any is configured (README,
"Security"): with ``PLAIT_ALERTMANAGER_TOKEN`` alone, the export and schedule routes that
change state take it as a bearer token, and reads stay open; with a caller registry, a probe
schedule (its failures are alerts) needs ``alertIngest``. The real app on a real Redis; Kafka
is replaced by a recorder of what the routes would send."""
from __future__ import annotations

import json
import time
import uuid

import pytest
import redis
import yaml
from fastapi.testclient import TestClient
from security_helpers import SECRET

from api.app import create_api
from api.services import Services
from plait import keys as K
from plait.settings import Settings
from producers.signing import PlaitAuth

REDIS_URL = "redis://127.0.0.1:6379/0"
TOKEN = "shared-am-token-" + "t" * 32
SPEC = {"sysCode": "crm", "bizType": "orders", "userId": "alice",
        "dataConfig": {"dataApiUrl": "http://127.0.0.1:9/export"},
        "documentConfig": {"fileFormat": "csv"}}
PROBE = {"name": "p", "sysCode": "crm", "trigger": {"interval": 3600}, "paused": True,
         "action": {"probe": {"targets": [{"tcp": "127.0.0.1:1"}]}}}
EXPORT_SCHEDULE = {"name": "e", "sysCode": "crm", "trigger": {"interval": 3600}, "paused": True,
                   "action": {"export": SPEC}}
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def emitted(monkeypatch):
    """What the export routes would send to Kafka, recorded instead."""
    out: list[tuple] = []

    async def emit(self, topic, key, payload):
        out.append((topic, key, payload))

    monkeypatch.setattr(Services, "emit", emit)
    return out


@pytest.fixture
def api_for(tmp_path, emitted, sent):
    """``make(**settings)``: a TestClient of the whole API on its own Redis key prefix."""
    r = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
    prefix = f"plait-sectest-{uuid.uuid4().hex[:12]}"
    clients = []

    def make(**extra) -> TestClient:
        settings = Settings(redis_url=REDIS_URL, redis_prefix=prefix, broker_url="127.0.0.1:1",
                            storage_url=f"file://{tmp_path}/store", **extra)
        client = TestClient(create_api(settings))
        client.__enter__()
        clients.append(client)
        return client

    make.prefix = prefix
    yield make
    for c in clients:
        c.__exit__(None, None, None)
    for key in r.scan_iter(match=f"{prefix}:*", count=500):
        r.delete(key)
    r.close()


def test_token_alone_guards_every_export_and_schedule_change(api_for):
    http = api_for(alertmanager_token=TOKEN)
    assert http.post("/export/tasks", json=SPEC).status_code == 401
    wrong = {"Authorization": "Bearer " + "x" * 40}
    assert http.post("/export/tasks", json=SPEC, headers=wrong).status_code == 401
    created = http.post("/export/tasks", json=SPEC, headers=BEARER)
    assert created.status_code == 202, created.text
    task = created.json()["data"]["taskId"]
    assert http.post(f"/export/tasks/{task}/cancel").status_code == 401
    assert http.post(f"/export/tasks/{task}/cancel", headers=BEARER).status_code != 401

    assert http.post("/schedules", json=EXPORT_SCHEDULE).status_code == 401
    made = http.post("/schedules", json=EXPORT_SCHEDULE, headers=BEARER)
    assert made.status_code == 201, made.text
    sid = made.json()["data"]["id"]
    for method, path, body in [("PATCH", f"/schedules/{sid}", {"note": "x", "paused": True}),
                               ("POST", f"/schedules/{sid}/trigger", None),
                               ("POST", f"/schedules/{sid}/backfill",
                                {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T01:00:00Z"}),
                               ("DELETE", f"/schedules/{sid}", None)]:
        refused = http.request(method, path, json=body)
        assert refused.status_code == 401, (method, path, refused.text)
        assert "Authorization" in refused.json()["message"]
        taken = http.request(method, path, json=body, headers=BEARER)
        assert taken.status_code in (200, 202), (method, path, taken.text)


def test_token_alone_leaves_reads_open_and_no_token_leaves_changes_open(api_for):
    guarded = api_for(alertmanager_token=TOKEN)
    assert guarded.get("/export/tasks", params={"sysCode": "crm"}).status_code == 200
    assert guarded.get("/schedules", params={"sysCode": "crm"}).status_code == 200
    open_api = api_for()
    assert open_api.post("/export/tasks", json=SPEC).status_code == 202
    assert open_api.post("/schedules", json=PROBE).status_code == 201


def stored_schedule(prefix: str, sid: str, sys_code: str, spec: dict, paused: bool) -> None:
    """Store schedule ``sid`` of ``sys_code`` as the API stores one, by another way in than
    the API (its rules at that time are not checked)."""
    r = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
    now = int(time.time() * 1000)
    r.hset(K.schedules(prefix), sid, json.dumps({
        "id": sid, "sysCode": sys_code, "createdMs": now, "updatedMs": now,
        "paused": paused, "note": None, "spec": spec}))
    r.close()


@pytest.fixture
def registry(tmp_path):
    """A registry: ``ops`` may send alerts, ``plain`` (sysCode ``plain``) may not."""
    path = tmp_path / "callers.yaml"
    common = dict(bizTypes=["orders"], fileFormats=["csv"], maxRows=1000, appSecret=SECRET,
                  dataApiPrefixes=["http://127.0.0.1:9/"])
    path.write_text(yaml.safe_dump({"callers": {
        "ops": dict(common, appKey="ops-app", alertIngest=True),
        "plain": dict(common, appKey="plain-app")}}))
    return str(path)


def test_a_probe_schedule_needs_alert_ingest(api_for, registry):
    http = api_for(callers_file=registry)
    plain, ops = PlaitAuth("plain-app", SECRET), PlaitAuth("ops-app", SECRET)
    probe = {k: v for k, v in PROBE.items() if k != "sysCode"}
    refused = http.post("/schedules", json=probe, auth=plain)
    assert refused.status_code == 403, refused.text
    assert "alertIngest" in refused.json()["message"]
    assert http.post("/schedules", json=probe, auth=ops).status_code == 201

    export = dict(EXPORT_SCHEDULE, action={"export": dict(SPEC, sysCode="plain")})
    del export["sysCode"]
    made = http.post("/schedules", json=export, auth=plain)
    assert made.status_code == 201, made.text
    sid = made.json()["data"]["id"]
    turned = http.patch(f"/schedules/{sid}", json={"action": probe["action"]}, auth=plain)
    assert turned.status_code == 403, turned.text

    # a probe schedule stored for plain's sysCode (another way in than this API) is not run
    # at plain's request either
    stored_schedule(api_for.prefix, "stored-probe", "plain", probe, paused=True)
    assert http.post("/schedules/stored-probe/trigger", auth=plain).status_code == 403
    # but its owner may still pause it, which stops its alerts
    paused = http.patch("/schedules/stored-probe", json={"paused": True, "note": "stop"},
                        auth=plain)
    assert paused.status_code == 200, paused.text
    backfill = {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T01:00:00Z"}
    assert http.post("/schedules/stored-probe/backfill", json=backfill,
                     auth=plain).status_code == 403


def test_pausing_is_allowed_whatever_rule_changed_since_the_definition(api_for, registry):
    # given a probe schedule of plain's, defined when 3600 s was allowed, now 7200 s the least
    http = api_for(callers_file=registry, schedule_min_interval_seconds=7200)
    probe = {k: v for k, v in PROBE.items() if k != "sysCode"}
    stored_schedule(api_for.prefix, "old-probe", "plain", probe, paused=False)
    plain = PlaitAuth("plain-app", SECRET)
    # then its owner may pause, note and resume it, not change it
    for body in ({"paused": True, "note": "stop"}, {"note": "why"}, {"paused": False}):
        resp = http.patch("/schedules/old-probe", json=body, auth=plain)
        assert resp.status_code == 200, (body, resp.text)
    assert http.patch("/schedules/old-probe", json={"name": "x"}, auth=plain).status_code == 403
