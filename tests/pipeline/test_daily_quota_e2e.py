"""Daily row quotas on a running stack (real broker, Redis, a signed caller
registry): rows of finished exports count, the export that crosses the
quota ends SUCCESS truncated with the quality note, the next request is a
429 naming the quota, what is used and when it resets; the count lives in
Redis (the API restarted still refuses); the metric per caller."""
from __future__ import annotations

import re

import httpx
import pytest

from plait.quotas import today
from producers.signing import PlaitAuth
from plait.lifecycle import TERMINAL
from support import fetch_file, read_rows, seq_spec, source_ids, start_with_registry, wait_for

pytestmark = pytest.mark.integration
SECRET = "quota-secret-" + "q" * 32
QUOTA = 250


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    from ops.stack import Stack
    from stack_env import drop_redis_keys, isolated_env

    data_dir = tmp_path_factory.mktemp("quota")
    stack = Stack(data_dir, isolated_env())
    stack.start(workers=0, api=False)
    callers = {"callers": {"free": {
        "appKey": "free-key", "appSecret": SECRET, "bizTypes": ["seq"],
        "dataApiPrefixes": [f"{stack.demo_data_api}/data"], "fileFormats": ["csv", "docx"],
        "maxRows": 100_000, "tier": "free", "dailyRows": QUOTA, "timezone": "Asia/Tokyo"}}}
    start_with_registry(stack, data_dir, callers)
    yield stack
    stack.stop()
    drop_redis_keys(stack)


def client(stack) -> httpx.Client:
    return httpx.Client(base_url=stack.api_url, auth=PlaitAuth("free-key", SECRET), timeout=10)


def run(stack, rows: int, fmt: str = "csv") -> dict:
    spec = seq_spec(stack.demo_data_api, fmt, rows, 50, sys_code="free")
    with client(stack) as c:
        resp = c.post("/export/tasks", json=spec)
        assert resp.status_code == 202, resp.text
        task_id = resp.json()["data"]["taskId"]
        return wait_task_signed(c, task_id)


def wait_task_signed(c: httpx.Client, task_id: str) -> dict:
    """The task's state once it ended (signed polls, every 0.2 s, 120 s at most)."""
    found: dict = {}

    def ended() -> bool:
        found.update(c.get(f"/export/tasks/{task_id}", params={"userId": "alice"}).json()["data"])
        return found["status"] in TERMINAL

    wait_for(ended, 120, f"task {task_id} to end", every=0.2)
    return found


def test_the_quota_cuts_the_export_that_crosses_it_then_refuses(stack, tmp_path):
    first = run(stack, 200)
    assert first["status"] == "SUCCESS" and not first.get("truncated"), first
    second = run(stack, 200, "docx")
    # 50 rows were left: the second export stops there, SUCCESS truncated
    assert second["status"] == "SUCCESS" and second["truncated"] is True, second
    assert second["exportedRows"] == 50 and second["quality"]["daily_quota_cut"] == 1
    import docx

    table = docx.Document(str(fetch_file(second, tmp_path))).tables[0]
    assert [int(r.cells[0].text) for r in table.rows[1:]] == source_ids(50)
    # the next request is refused, naming the quota, the use and the reset
    spec = seq_spec(stack.demo_data_api, "csv", 10, 10, sys_code="free")
    with client(stack) as c:
        resp = c.post("/export/tasks", json=spec)
    assert resp.status_code == 429, resp.text
    body = resp.json()
    assert body["code"] == 429 and "dailyRows 250" in body["message"]
    day = today("Asia/Tokyo")
    assert body["data"] == {"quota": "dailyRows", "dailyRows": QUOTA, "used": QUOTA,
                            "remaining": 0, "timezone": "Asia/Tokyo",
                            "resetsAt": day.resets_at_text}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT00:00:00\+09:00", body["data"]["resetsAt"])
    assert 0 < int(resp.headers["Retry-After"]) <= 24 * 3600
    metrics = httpx.get(f"{stack.api_url}/metrics").text
    assert 'plait_quota_refusals_total{sysCode="free"} 1.0' in metrics
    # the count is in Redis: an API started anew refuses too
    stack.kill("api")
    stack.start_api()
    with client(stack) as c:
        again = c.post("/export/tasks", json=seq_spec(stack.demo_data_api, "csv", 10, 10,
                                                      sys_code="free"))
    assert again.status_code == 429 and again.json()["data"]["used"] == QUOTA
    first_rows = read_rows(fetch_file(first, tmp_path))
    assert len(first_rows) == 201
