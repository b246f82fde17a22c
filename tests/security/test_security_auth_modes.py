"""Authentication is all or nothing: with any credential configured (a caller
registry, the shared Alertmanager token, or both) every route that changes
alerting state, native and Alertmanager-compatible, refuses a request without
one and takes the right one; with none configured they stay open. Kafka is
replaced by a recorder; Redis is real (nonces, silences)."""
from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml
from fastapi import FastAPI
from security_helpers import SECRET

from api.app import install_alerting
from api.envelope import install_error_handlers
from plait.settings import Settings
from producers.signing import PlaitAuth

REDIS_URL = "redis://127.0.0.1:6379/0"
SHARED_TOKEN = "shared-am-token-" + "t" * 32
OPS_TOKEN = "ops-am-token-" + "o" * 32
OPS = PlaitAuth("ops-app", SECRET)
MODES = ("open", "token", "registry", "both")

NATIVE_SILENCE = {"matchers": ['asset="h1"'], "endsAt": "2999-01-01T00:00:00Z",
                  "createdBy": "ops", "comment": "maintenance"}
AM_SILENCE = {"matchers": [{"name": "asset", "value": "h1", "isRegex": False, "isEqual": True}],
              "startsAt": "2026-01-01T00:00:00Z", "endsAt": "2999-01-01T00:00:00Z",
              "createdBy": "ops", "comment": "maintenance"}


def settings_for(mode: str, prefix: str, tmp_path: Path) -> Settings:
    extra = {}
    if mode in ("registry", "both"):
        path = tmp_path / "callers.yaml"
        path.write_text(yaml.safe_dump({"callers": {"ops": dict(
            bizTypes=["orders"], fileFormats=["csv"], maxRows=1000, appKey="ops-app",
            appSecret=SECRET, alertIngest=True, silenceManage=True,
            alertmanagerToken=OPS_TOKEN)}}))
        extra["callers_file"] = str(path)
    if mode in ("token", "both"):
        extra["alertmanager_token"] = SHARED_TOKEN
    return Settings(redis_url=REDIS_URL, redis_prefix=prefix, **extra)


def credential(mode: str, api: str) -> dict:
    """The request arguments carrying the credential a route takes in ``mode``:
    native routes a signed request (registry) or the shared token as bearer;
    ``/api/v2`` a bearer token (shared, else the caller's)."""
    if mode == "open":
        return {}
    if api == "native" and mode in ("registry", "both"):
        return {"auth": OPS}
    token = SHARED_TOKEN if mode in ("token", "both") else OPS_TOKEN
    return {"headers": {"Authorization": f"Bearer {token}"}}


@pytest.fixture
async def http_for(redis_prefix, tmp_path, sent):
    clients = []

    async def make(mode: str) -> httpx.AsyncClient:
        app = FastAPI()
        install_error_handlers(app)
        install_alerting(app, settings_for(mode, redis_prefix[1], tmp_path))
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://plait")
        clients.append(client)
        return client

    yield make
    for c in clients:
        await c.aclose()


async def _silence(http, api: str, cred: dict) -> str:
    """Create a silence with ``cred``; its id."""
    if api == "native":
        resp = await http.post("/silences", json=NATIVE_SILENCE, **cred)
        assert resp.status_code == 201, resp.text
        return resp.json()["data"]["silenceId"]
    resp = await http.post("/api/v2/silences", json=AM_SILENCE, **cred)
    assert resp.status_code == 200, resp.text
    return resp.json()["silenceID"]


#: route -> (API, method, path, JSON body, success status); "{sid}": a silence made first
ROUTES = {
    "POST /alerts": ("native", "POST", "/alerts",
                     {"rule": "DiskFull", "asset": "h1", "severity": "critical"}, 202),
    "POST /silences": ("native", "POST", "/silences", NATIVE_SILENCE, 201),
    "DELETE /silences/{id}": ("native", "DELETE", "/silences/{sid}", None, 200),
    "POST /api/v2/alerts": ("am", "POST", "/api/v2/alerts",
                            [{"labels": {"alertname": "HighCPU", "instance": "h1"}}], 200),
    "POST /api/v2/silences": ("am", "POST", "/api/v2/silences", AM_SILENCE, 200),
    "DELETE /api/v2/silence/{id}": ("am", "DELETE", "/api/v2/silence/{sid}", None, 200),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("route", list(ROUTES))
async def test_state_changing_routes_need_a_credential_once_any_is_configured(
        http_for, sent, mode, route):
    api, method, path, body, ok = ROUTES[route]
    http = await http_for(mode)
    cred = credential(mode, api)
    if "{sid}" in path:
        path = path.replace("{sid}", await _silence(http, api, cred))
    before = len(sent)
    kwargs = {"json": body} if body is not None else {}
    # without a credential: refused whenever one is configured, nothing sent
    bare = await http.request(method, path, **kwargs)
    if mode == "open":
        assert bare.status_code == ok, bare.text
    else:
        assert bare.status_code == 401, (mode, route, bare.status_code, bare.text)
        assert len(sent) == before
        # with the right credential: done
        good = await http.request(method, path, **kwargs, **cred)
        assert good.status_code == ok, (mode, route, good.text)
        assert len(sent) > before


@pytest.mark.parametrize("mode", ("token", "both"))
async def test_a_wrong_bearer_token_is_refused_on_the_native_routes(http_for, sent, mode):
    http = await http_for(mode)
    resp = await http.post("/silences", json=NATIVE_SILENCE,
                           headers={"Authorization": "Bearer not-the-token"})
    assert resp.status_code == 401 and "not accepted" in resp.json()["message"]
    assert SHARED_TOKEN not in resp.text and sent == []
