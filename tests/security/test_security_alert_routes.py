"""Alert and silence routes under the caller registry (issue 10.6): the native
routes need a signed request from a caller holding the allowance; the
Alertmanager-compatible routes need a bearer token. Kafka is replaced by a
recorder (what the routes would send); Redis is real (nonces, silences)."""
from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import yaml
from fastapi import FastAPI
from security_helpers import SECRET

from api.app import install_alerting
from api.envelope import install_error_handlers
from plait.callers import CallerConfigError, load_callers
from plait.settings import Settings
from producers.signing import PlaitAuth

REDIS_URL = "redis://127.0.0.1:6379/0"
SHARED_TOKEN = "shared-am-token-" + "t" * 32
OPS_TOKEN = "ops-am-token-" + "o" * 32
CRM_TOKEN = "crm-am-token-" + "c" * 32
OTHER_SECRET = "other-" + "q" * 40
ALERT = {"rule": "DiskFull", "asset": "h1", "severity": "critical"}
SILENCE = {"matchers": ['asset="h1"'], "endsAt": "2999-01-01T00:00:00Z",
           "createdBy": "ops", "comment": "maintenance"}
AM_ALERTS = [{"labels": {"alertname": "HighCPU", "instance": "h1:9100"}}]


def _write_registry(path: Path) -> Path:
    base = dict(bizTypes=["orders"], fileFormats=["csv"], maxRows=1000)
    path.write_text(yaml.safe_dump({"callers": {
        "ops": dict(base, appKey="ops-app", appSecret=SECRET, alertIngest=True,
                    silenceManage=True, alertmanagerToken=OPS_TOKEN),
        "crm": dict(base, appKey="crm-app", appSecret=OTHER_SECRET,
                    alertmanagerToken=CRM_TOKEN),
    }}))
    return path


@pytest.fixture
async def http(redis_prefix, tmp_path, sent):
    """An httpx client on an app with the alerting routes, a registry of
    ``ops`` (alertIngest, silenceManage, a token) and ``crm`` (a token, no
    allowances), and a shared Alertmanager token."""
    _, prefix = redis_prefix
    settings = Settings(redis_url=REDIS_URL, redis_prefix=prefix,
                        callers_file=str(_write_registry(tmp_path / "callers.yaml")),
                        alertmanager_token=SHARED_TOKEN)
    app = FastAPI()
    install_error_handlers(app)
    install_alerting(app, settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://plait") as client:
        yield client


OPS = PlaitAuth("ops-app", SECRET)
CRM = PlaitAuth("crm-app", OTHER_SECRET)


# -- POST /alerts -----------------------------------------------------------------

async def test_post_alerts_unsigned_is_401(http, sent):
    resp = await http.post("/alerts", json=ALERT)
    assert resp.status_code == 401 and "missing header X-Plait-AppKey" in resp.json()["message"]
    assert sent == []


async def test_post_alerts_signed_without_alert_ingest_is_403(http, sent):
    resp = await http.post("/alerts", json=ALERT, auth=CRM)
    assert resp.status_code == 403, resp.text
    assert "alertIngest: true" in resp.json()["message"] and sent == []


async def test_post_alerts_signed_with_alert_ingest_is_accepted(http, sent):
    resp = await http.post("/alerts", json=ALERT, auth=OPS)
    assert resp.status_code == 202, resp.text
    assert resp.json()["data"]["accepted"] == 1 and len(sent) == 1


async def test_post_alerts_badly_signed_is_401(http, sent):
    resp = await http.post("/alerts", json=ALERT, auth=PlaitAuth("ops-app", OTHER_SECRET))
    assert resp.status_code == 401 and "bad signature" in resp.json()["message"]


# -- POST /silences, DELETE /silences/{id} ---------------------------------------------

async def test_post_silence_unsigned_is_401(http):
    assert (await http.post("/silences", json=SILENCE)).status_code == 401


async def test_post_silence_signed_without_silence_manage_is_403(http):
    resp = await http.post("/silences", json=SILENCE, auth=CRM)
    assert resp.status_code == 403 and "silenceManage: true" in resp.json()["message"]


async def test_post_and_delete_silence_signed_with_silence_manage(http, sent):
    resp = await http.post("/silences", json=SILENCE, auth=OPS)
    assert resp.status_code == 201, resp.text
    sid = resp.json()["data"]["silenceId"]
    # every funnel partition got the command
    assert [r[3] for r in sent] == [0, 1]
    # unsigned and not-allowed expiries are refused, the allowed one works
    assert (await http.delete(f"/silences/{sid}")).status_code == 401
    assert (await http.delete(f"/silences/{sid}", auth=CRM)).status_code == 403
    resp = await http.delete(f"/silences/{sid}", auth=OPS)
    assert resp.status_code == 200 and resp.json()["data"]["silence"]["status"] == "expired"
    assert (await http.delete("/silences/s-nope", auth=OPS)).status_code == 404


# -- /api/v2 under a bearer token -----------------------------------------------------------

@pytest.mark.parametrize("headers, reason", [
    ({}, "missing header Authorization"),
    ({"Authorization": "Bearer wrong-token"}, "not accepted"),
    ({"Authorization": f"Basic {SHARED_TOKEN}"}, "Bearer <token>"),
    ({"Authorization": "Bearer "}, "Bearer <token>"),
])
async def test_alertmanager_route_without_a_valid_bearer_is_401(http, sent, headers, reason):
    resp = await http.post("/api/v2/alerts", json=AM_ALERTS, headers=headers)
    assert resp.status_code == 401 and reason in resp.json()["message"], resp.text
    assert SHARED_TOKEN not in resp.text and sent == []


@pytest.mark.parametrize("token", [SHARED_TOKEN, OPS_TOKEN])
async def test_alertmanager_route_with_a_valid_bearer_is_accepted(http, sent, token):
    resp = await http.post("/api/v2/alerts", json=AM_ALERTS,
                           headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200, resp.text
    assert len(sent) == 1


async def test_alertmanager_token_of_a_caller_without_alert_ingest_is_403(http, sent):
    resp = await http.post("/api/v2/alerts", json=AM_ALERTS,
                           headers={"Authorization": f"Bearer {CRM_TOKEN}"})
    assert resp.status_code == 403 and sent == []


async def test_without_registry_or_token_the_routes_stay_open(redis_prefix, sent):
    _, prefix = redis_prefix
    app = FastAPI()
    install_error_handlers(app)
    install_alerting(app, Settings(redis_url=REDIS_URL, redis_prefix=prefix))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://plait") as client:
        assert (await client.post("/alerts", json=ALERT)).status_code == 202
        assert (await client.post("/api/v2/alerts", json=AM_ALERTS)).status_code == 200


def test_registry_refuses_short_or_shared_alertmanager_tokens(tmp_path):
    base = dict(bizTypes=["orders"], fileFormats=["csv"], maxRows=1)
    short = tmp_path / "short.yaml"
    short.write_text(yaml.safe_dump({"callers": {"a": dict(base, appKey="a-app", appSecret=SECRET,
                                                           alertmanagerToken="short")}}))
    with pytest.raises(CallerConfigError, match="callers.a.alertmanagerToken") as err:
        load_callers(short)
    assert "short" not in str(err.value).split(":", 1)[1].replace("short.yaml", "")
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({"callers": {
        "a": dict(base, appKey="a-app", appSecret=SECRET, alertmanagerToken=OPS_TOKEN),
        "b": dict(base, appKey="b-app", appSecret=SECRET, alertmanagerToken=OPS_TOKEN)}}))
    with pytest.raises(CallerConfigError, match="tokens must be unique") as err:
        load_callers(twice)
    assert OPS_TOKEN not in str(err.value)
