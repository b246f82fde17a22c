"""The security boundary on a running stack with a caller registry: every
attack from the issue fails, and the legitimate path still works."""
from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from producers.signing import PlaitAuth, signed_headers
from producers.token import verify_data_token
from support import seq_spec, start_with_registry

pytestmark = pytest.mark.integration
ACME_SECRET = "acme-secret-" + "a" * 32
GLOBEX_SECRET = "globex-secret-" + "g" * 32


@pytest.fixture(scope="module")
def secure(tmp_path_factory, request):
    """A stack whose API requires signed requests from two registered callers."""
    from ops.stack import Stack
    from stack_env import isolated_env

    data_dir = tmp_path_factory.mktemp("secure")
    stack = Stack(data_dir, isolated_env())
    # the registry names the demo data API's URL, known once it runs: start it first
    stack.start(workers=0, api=False)
    callers = {"callers": {
        name: {"appKey": f"{name}-key", "appSecret": secret, "bizTypes": ["seq"],
               "dataApiPrefixes": [f"{stack.demo_data_api}/data"],
               "fileFormats": ["csv", "xlsx"], "maxRows": 100_000, "linkTtlSeconds": 600}
        for name, secret in (("acme", ACME_SECRET), ("globex", GLOBEX_SECRET))}}
    start_with_registry(stack, data_dir, callers)
    yield stack
    stack.stop()
    from stack_env import drop_redis_keys

    drop_redis_keys(stack)


def client(stack, name: str) -> httpx.Client:
    secret = ACME_SECRET if name == "acme" else GLOBEX_SECRET
    return httpx.Client(base_url=stack.api_url, auth=PlaitAuth(f"{name}-key", secret), timeout=10)


def acme_spec(stack, **over) -> dict:
    spec = seq_spec(stack.demo_data_api, "csv", 200, 100, sys_code="acme")
    spec["bizType"] = "seq"
    for key, value in over.items():
        spec[key] = value
    return spec


def create(stack, spec) -> str:
    resp = client(stack, "acme").post("/export/tasks", json=spec)
    assert resp.status_code == 202, resp.text
    return resp.json()["data"]["taskId"]


def test_unsigned_badly_signed_stale_and_replayed_requests_are_401(secure):
    body = json.dumps(acme_spec(secure)).encode()
    url = f"{secure.api_url}/export/tasks"
    hdrs = {"content-type": "application/json"}
    unsigned = httpx.post(url, content=body, headers=hdrs)
    assert unsigned.status_code == 401
    bad = signed_headers("acme-key", "wrong-secret-" + "x" * 32, "POST", "/export/tasks", "", body)
    assert httpx.post(url, content=body, headers={**hdrs, **bad}).status_code == 401
    stale = signed_headers("acme-key", ACME_SECRET, "POST", "/export/tasks", "", body,
                           timestamp=time.time() - 3600)
    resp = httpx.post(url, content=body, headers={**hdrs, **stale})
    assert resp.status_code == 401 and "Timestamp" in resp.json()["message"]
    good = signed_headers("acme-key", ACME_SECRET, "POST", "/export/tasks", "", body)
    assert httpx.post(url, content=body, headers={**hdrs, **good}).status_code == 202
    replay = httpx.post(url, content=body, headers={**hdrs, **good})
    assert replay.status_code == 401 and "nonce" in replay.json()["message"]
    for resp in (unsigned, replay):
        assert ACME_SECRET not in resp.text


def test_another_tenants_task_is_404_on_every_endpoint(secure):
    task_id = create(secure, acme_spec(secure))
    acme, globex = client(secure, "acme"), client(secure, "globex")
    assert acme.get(f"/export/tasks/{task_id}", params={"userId": "alice"}).status_code == 200
    attempts = [
        globex.get(f"/export/tasks/{task_id}", params={"userId": "alice"}),
        globex.post(f"/export/tasks/{task_id}/cancel", params={"userId": "alice"}),
        globex.get(f"/export/tasks/{task_id}/events", params={"userId": "alice"}),
        acme.get(f"/export/tasks/{task_id}", params={"userId": "bob"}),
        acme.post(f"/export/tasks/{task_id}/cancel", params={"userId": "bob"}),
        acme.get(f"/export/tasks/{task_id}"),
    ]
    unknown = acme.get("/export/tasks/does-not-exist", params={"userId": "alice"})
    for resp in attempts:
        assert resp.status_code == 404, resp.text
        assert resp.json()["message"] == f"task {task_id} not found"
    assert unknown.status_code == 404
    listed = globex.get("/export/tasks", params={"userId": "alice", "sysCode": "acme"})
    assert task_id not in json.dumps(listed.json())


@pytest.mark.parametrize("url, words", [
    ("http://127.0.0.1:6379/", "dataApiUrl"),
    ("file:///etc/passwd", "dataApiUrl"),
    ("http://user:pw@127.0.0.1/data", "dataApiUrl"),
])
def test_data_api_urls_outside_the_allowlist_are_refused(secure, url, words):
    spec = acme_spec(secure)
    spec["dataConfig"]["dataApiUrl"] = url
    resp = client(secure, "acme").post("/export/tasks", json=spec)
    assert resp.status_code == 422 and words in resp.json()["message"]


def test_redirect_to_a_foreign_host_is_not_followed(secure):
    spec = acme_spec(secure)
    spec["dataConfig"]["dataApiUrl"] += "?redirect_to=http://169.254.169.254/latest/meta-data"
    task = wait_signed(secure, create(secure, spec))
    assert task["status"] == "FAILED" and "redirect" in task["errorMessage"]


def wait_signed(stack, task_id: str, timeout: float = 60) -> dict:
    acme = client(stack, "acme")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = acme.get(f"/export/tasks/{task_id}", params={"userId": "alice"}).json()["data"]
        if task["status"] in ("SUCCESS", "FAILED", "CANCELLED", "TIMEOUT"):
            return task
        time.sleep(0.2)
    raise AssertionError(task)


def test_data_api_gets_a_verifiable_token_bound_to_the_task(secure):
    task_id = create(secure, acme_spec(secure))
    assert wait_signed(secure, task_id)["status"] == "SUCCESS"
    token = httpx.get(f"{secure.demo_data_api}/tokens").json()[task_id]
    verify_data_token(ACME_SECRET, token, task_id, "alice", time.time())
    with pytest.raises(ValueError, match="wrong task"):
        verify_data_token(ACME_SECRET, token, "another-task", "alice", time.time())
    with pytest.raises(ValueError, match="expired"):
        verify_data_token(ACME_SECRET, token, task_id, "alice", time.time() + 10**6)


def test_a_300_character_file_name_is_refused_naming_the_field(secure):
    spec = acme_spec(secure)
    spec["documentConfig"]["fileName"] = "x" * 300
    resp = client(secure, "acme").post("/export/tasks", json=spec)
    assert resp.status_code == 422 and "documentConfig.fileName" in resp.json()["message"]


@pytest.mark.parametrize("name, check", [
    ("../../etc/passwd", lambda n: "/" not in n and not n.startswith(".")),
    ("航班" * 120, lambda n: len(n.encode()) <= 210),
    ("CON", lambda n: n.split(".")[0].upper() != "CON"),
])
def test_hostile_file_names_are_sanitized(secure, name, check):
    spec = acme_spec(secure)
    spec["documentConfig"]["fileName"] = name
    task = wait_signed(secure, create(secure, spec))
    assert task["status"] == "SUCCESS", task
    assert check(task["file"]["fileName"]) and "/" not in task["file"]["key"].split("/", 2)[2]
    resp = httpx.get(task["file"]["url"])
    assert resp.status_code == 200
    assert "attachment" in resp.headers["content-disposition"]


def test_audit_trail_records_who_did_what_and_logs_hold_no_secret(secure):
    task_id = create(secure, acme_spec(secure))
    task = wait_signed(secure, task_id)
    httpx.get(task["file"]["url"])
    entries = client(secure, "acme").get("/audit", params={"taskId": task_id}).json()["data"]
    actions = {e["action"] for e in entries["entries"]}
    assert {"task.created", "task.read", "task.downloaded"} <= actions
    created = next(e for e in entries["entries"] if e["action"] == "task.created")
    assert created["appKey"] == "acme-key" and created["clientIp"] == "127.0.0.1"
    # globex cannot read acme's trail
    other = client(secure, "globex").get("/audit", params={"taskId": task_id}).json()["data"]
    assert other["entries"] == []
    token = httpx.get(f"{secure.demo_data_api}/tokens").json()[task_id]
    for log in Path(secure.data_dir, "logs").glob("*.log"):
        text = log.read_text(errors="replace")
        for secret in (ACME_SECRET, GLOBEX_SECRET, token):
            assert secret not in text, f"{secret[:8]}... leaked into {log.name}"
