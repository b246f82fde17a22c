"""Task lifecycle on the real broker and Redis: crash re-drive, cancel,
timeout, retries, limits and fairness, dedupe and reuse, projection rebuild,
progress streams."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest
import redis

from support import fetch_file, read_rows, seq_spec, source_ids, submit, wait_for, wait_task, warm_up

pytestmark = pytest.mark.integration
FAST = {"PLAIT_STALE_AFTER_SECONDS": "4", "PLAIT_SWEEP_INTERVAL_SECONDS": "0.5",
        "PLAIT_HEARTBEAT_INTERVAL_SECONDS": "1"}


def rows_digest(rows: list[list]) -> str:
    return hashlib.sha256(json.dumps([[str(v) for v in r] for r in rows]).encode()).hexdigest()


def checkpoint(stack, task_id: str) -> dict[str, str]:
    client = redis.Redis.from_url(stack.env["PLAIT_REDIS_URL"], decode_responses=True)
    return client.hgetall(f"{stack.env['PLAIT_REDIS_PREFIX']}:ckpt:{task_id}")


@pytest.fixture(scope="module")
def fast(make_module_stack):
    """One stack with a fast sweeper for the tests that kill its worker or
    hang its data API; a data API answer may take 20 s."""
    return make_module_stack(PLAIT_FETCH_TIMEOUT_SECONDS="20", **FAST)


def replace_worker(stack) -> None:
    """Kill the stack's one worker with SIGKILL and start a new one."""
    [name] = stack.workers()
    stack.kill(name)
    stack.spawn_worker(f"worker-{int(name.rpartition('-')[2]) + 1}")


def test_kill_9_mid_export_new_worker_finishes_every_row_once(fast, tmp_path):
    # given a 50-page export, slowed so it is mid-way when we strike
    stack = fast
    spec = seq_spec(stack.demo_data_api, "csv", 5000, 100, query="?delay_ms=120")
    task_id = submit(stack.api_url, spec)
    wait_until_rows(stack.api_url, task_id, 2000)
    # when the worker running it is killed with SIGKILL and a new one starts
    killed_at = time.monotonic()
    replace_worker(stack)
    task = wait_task(stack.api_url, task_id, timeout=120)
    redrive_seconds = time.monotonic() - killed_at
    # then the task succeeded and the file holds every source row exactly once
    assert task["status"] == "SUCCESS", task
    data = read_rows(fetch_file(task, tmp_path))[1:]
    assert len(data) == 5000 and [int(r[0]) for r in data] == source_ids(5000)
    expected = [[str(i), f"row-{i}"] for i in source_ids(5000)]
    assert rows_digest([r[:2] for r in data]) == rows_digest(expected)
    marks = checkpoint(stack, task_id)
    print(f"\nre-drive after kill -9: SUCCESS {redrive_seconds:.1f} s after the kill; "
          f"duplicate fetch commands absorbed: {marks.get('absorbed', 0)}; "
          f"sweeper re-drives: {marks.get('redrives', 0)}")


def test_kill_9_while_the_file_grows_the_new_worker_catches_up_from_shards(fast, tmp_path):
    # given a 40-page xlsx export whose file is growing on the worker
    stack = fast
    spec = seq_spec(stack.demo_data_api, "xlsx", 4000, 100, query="?delay_ms=120")
    task_id = submit(stack.api_url, spec)
    wait_until_rows(stack.api_url, task_id, 1500)
    growing = wait_for(lambda: list(Path(tempfile.gettempdir()).glob(f"plait-{task_id}-*")),
                       10, "the growing file's directory")
    # when the worker is killed with SIGKILL mid-append and a new worker starts
    replace_worker(stack)
    task = wait_task(stack.api_url, task_id, timeout=120)
    # then the new worker resumed from the shards: every row exactly once, in order
    assert task["status"] == "SUCCESS", task
    data = read_rows(fetch_file(task, tmp_path))[1:]
    assert [int(r[0]) for r in data] == source_ids(4000)
    assert growing  # the killed worker's partial file was never published


def wait_until_rows(api: str, task_id: str, rows: int, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = httpx.get(f"{api}/export/tasks/{task_id}").json()["data"]
        if (task.get("exportedRows") or 0) >= rows:
            return task
        assert task["status"] in ("CREATED", "WAITING", "RUNNING"), task
        time.sleep(0.1)
    raise AssertionError(f"task {task_id} did not reach {rows} rows")


def test_cancel_mid_export_leaves_no_file_and_no_shards(stack):
    # given a slow 30-page export past its fifth page
    spec = seq_spec(stack.demo_data_api, "xlsx", 3000, 100, query="?delay_ms=150")
    task_id = submit(stack.api_url, spec)
    wait_until_rows(stack.api_url, task_id, 500)
    # when the owner cancels it
    resp = httpx.post(f"{stack.api_url}/export/tasks/{task_id}/cancel")
    assert resp.status_code == 202
    task = wait_task(stack.api_url, task_id)
    # then it ends CANCELLED, with no file, and its shards disappear
    assert task["status"] == "CANCELLED" and "file" not in task
    storage = Path(stack.env["PLAIT_STORAGE_URL"].removeprefix("file://"))
    wait_for(lambda: not (storage / "shards" / task_id).exists(), 10, "the shards to be deleted")
    assert not (storage / "results" / task_id).exists()
    # and cancelling again is a clear 409
    again = httpx.post(f"{stack.api_url}/export/tasks/{task_id}/cancel")
    assert again.status_code == 409 and "CANCELLED" in again.json()["message"]


def test_cancel_unknown_task_is_404(stack):
    assert httpx.post(f"{stack.api_url}/export/tasks/nope/cancel").status_code == 404


def test_hanging_data_api_ends_timeout_at_the_configured_time(fast):
    stack = fast
    warm_up(stack)
    spec = seq_spec(stack.demo_data_api, "csv", 1000, 100,
                    query="?hang_page=2&hang_seconds=60", job={"timeout": 4})
    task = wait_task(stack.api_url, submit(stack.api_url, spec), timeout=30)
    assert task["status"] == "TIMEOUT", (task["status"], task.get("errorMessage"))
    assert "jobConfig.timeout=4s" in task["errorMessage"]
    took = (parse(task["finishedAt"]) - parse(task["createdAt"]))
    assert 4 <= took <= 6, took


def test_the_api_stops_at_once_while_a_task_event_stream_is_open(fast):
    # given a client following a task that waits on a hanging data API
    stack = fast
    task_id = submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 300, 100,
                                             query="?hang_page=1&hang_seconds=60"))
    lines: list[str] = []
    ended = threading.Event()

    def follow() -> None:
        with httpx.stream("GET", f"{stack.api_url}/export/tasks/{task_id}/events",
                          timeout=60) as r:
            lines.extend(r.iter_lines())
        ended.set()

    threading.Thread(target=follow, daemon=True).start()
    wait_for(lambda: any('"status":"RUNNING"' in line for line in lines), 30, "a RUNNING event")
    try:
        # when the API gets SIGTERM
        t0 = time.monotonic()
        stack.kill("api", signal.SIGTERM)
        # then it exits within the stream's 4 s wake-up, not the 20 s grace
        # of requests in flight, and the stream ended without a terminal state
        assert time.monotonic() - t0 < 8
        assert ended.wait(5)
        assert not any(line.startswith("event: ") and line[7:] in ("SUCCESS", "FAILED")
                       for line in lines)
    finally:
        stack.start_api()
        httpx.post(f"{stack.api_url}/export/tasks/{task_id}/cancel")


def parse(iso: str) -> float:
    from plait.clock import parse_iso

    return parse_iso(iso)


def test_three_500s_then_200_succeeds(stack, tmp_path):
    spec = seq_spec(stack.demo_data_api, "csv", 300, 100,
                    query="?fail_status=500&fail_page=1&fail_times=3&run=three500")
    task = wait_task(stack.api_url, submit(stack.api_url, spec))
    assert task["status"] == "SUCCESS", task
    assert [int(r[0]) for r in read_rows(fetch_file(task, tmp_path))[1:]] == source_ids(300)


def test_429_with_retry_after_is_honoured(stack):
    spec = seq_spec(stack.demo_data_api, "csv", 200, 100,
                    query="?fail_status=429&fail_page=0&fail_times=1&retry_after=1&run=r429")
    t0 = time.monotonic()
    task = wait_task(stack.api_url, submit(stack.api_url, spec))
    assert task["status"] == "SUCCESS" and time.monotonic() - t0 >= 1


def test_max_rows_truncates_and_says_so(stack, tmp_path):
    spec = seq_spec(stack.demo_data_api, "csv", 1000, 100, job={"maxRows": 250})
    task = wait_task(stack.api_url, submit(stack.api_url, spec))
    assert task["status"] == "SUCCESS" and task["truncated"] is True
    assert task["exportedRows"] == 250
    assert [int(r[0]) for r in read_rows(fetch_file(task, tmp_path))[1:]] == source_ids(250)


def test_flooding_tenant_does_not_starve_the_others(make_stack):
    # given a per-tenant limit of 2, 30 tasks from "flood" then 3 from "calm"
    stack = make_stack(PLAIT_LIMITS=json.dumps({"perSysCode": 2}))
    slow = "?delay_ms=300"
    flood = [submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 300, 100, query=slow,
                                            sys_code="flood")) for _ in range(30)]
    calm = [submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 300, 100, query=slow,
                                           sys_code="calm")) for _ in range(3)]
    # when the calm tenant's tasks finish
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        states = {t: httpx.get(f"{stack.api_url}/export/tasks/{t}").json()["data"]["status"]
                  for t in flood + calm}
        if all(states[t] == "SUCCESS" for t in calm):
            break
        time.sleep(0.2)
    # then they did not wait for the flood's queue, which never ran more than 2 at once
    assert all(states[t] == "SUCCESS" for t in calm), states
    unfinished_flood = sum(states[t] != "SUCCESS" for t in flood)
    assert unfinished_flood >= 15, unfinished_flood
    assert sum(states[t] == "WAITING" for t in flood) > 0
    # and the waiting flood tasks all finish in the end
    done = [wait_task(stack.api_url, t, timeout=120) for t in flood]
    assert all(t["status"] == "SUCCESS" for t in done)
    # never more than 2 at once: their [startedAt, finishedAt] spans, which lie within the
    # slots they held (a poll of 33 tasks one by one is no snapshot: it can see 3 "at once")
    edges = sorted([(parse(t["startedAt"]), 1) for t in done] + [(parse(t["finishedAt"]), -1)
                                                                   for t in done])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    assert peak <= 2, peak


def test_identical_requests_give_one_task_then_reuse(stack):
    # every page takes 3 s to answer, so the task is still running when the
    # second request arrives (with 50 ms pages a loaded machine saw it finished)
    spec = seq_spec(stack.demo_data_api, "csv", 300, 100, query="?delay_ms=3000")
    first = httpx.post(f"{stack.api_url}/export/tasks", json=spec).json()["data"]
    second = httpx.post(f"{stack.api_url}/export/tasks", json=spec).json()["data"]
    assert second["taskId"] == first["taskId"] and second["deduplicated"] is True
    wait_task(stack.api_url, first["taskId"])
    third = httpx.post(f"{stack.api_url}/export/tasks", json=spec).json()
    assert third["data"]["taskId"] == first["taskId"] and third["data"]["reused"] is True
    assert third["data"]["status"] == "SUCCESS" and third["data"]["file"]["url"]


def test_projection_flushed_and_rebuilt_reads_the_same(stack):
    # given finished tasks of a user
    user = f"rebuild-{os.getpid()}"
    ids = [submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 50 * (i + 1), 50, user=user))
           for i in range(3)]
    for t in ids:
        wait_task(stack.api_url, t)
    before = list_tasks(stack, user)
    # when Redis loses the projection and it is rebuilt from export.lifecycle
    client = redis.Redis.from_url(stack.env["PLAIT_REDIS_URL"])
    prefix = stack.env["PLAIT_REDIS_PREFIX"]
    for pattern in ("task:*", "tasks:*", "active"):
        for key in client.scan_iter(match=f"{prefix}:{pattern}", count=1000):
            client.delete(key)
    assert list_tasks(stack, user) == []
    out = subprocess.run([sys.executable, "-m", "ops.cli", "rebuild"], env={**os.environ, **stack.env},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["applied"] > 0
    # then every task reads the same as before
    assert list_tasks(stack, user) == before


def list_tasks(stack, user: str) -> list[dict]:
    tasks = httpx.get(f"{stack.api_url}/export/tasks",
                      params={"sysCode": "tests", "userId": user}).json()["data"]["tasks"]
    for t in tasks:
        if t.get("file"):
            t["file"].pop("url")
    return tasks


def test_sse_streams_every_change_until_the_end_and_follow_shows_it(stack):
    task_id = submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 500, 100,
                                             query="?delay_ms=50"))
    statuses, rows = [], []
    with httpx.stream("GET", f"{stack.api_url}/export/tasks/{task_id}/events", timeout=60) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                state = json.loads(line[6:])
                statuses.append(state["status"])
                rows.append(state.get("exportedRows") or 0)
    assert statuses[-1] == "SUCCESS" and "RUNNING" in statuses
    assert rows == sorted(rows) and rows[-1] == 500
    out = subprocess.run([sys.executable, "-m", "ops.cli", "follow", task_id,
                          "--api", stack.api_url], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and json.loads(out.stdout)["status"] == "SUCCESS"
    assert httpx.get(f"{stack.api_url}/export/tasks/nope/events").status_code == 404


def test_concurrent_identical_requests_give_one_task(stack):
    from concurrent.futures import ThreadPoolExecutor

    spec = seq_spec(stack.demo_data_api, "csv", 100, 100)
    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda _: httpx.post(f"{stack.api_url}/export/tasks",
                                                     json=spec, timeout=20).json(), range(20)))
    assert len({a["data"]["taskId"] for a in answers}) == 1, answers
    assert sum(not (a["data"]["deduplicated"] or a["data"]["reused"]) for a in answers) == 1


def test_a_hanging_data_api_does_not_hold_up_other_tasks(stack):
    # given a task whose data API hangs on its first page
    hanging = submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 300, 100,
                                             query="?hang_page=0&hang_seconds=20"))
    # when other tasks run meanwhile
    t0 = time.monotonic()
    others = [submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 300, 100))
              for _ in range(3)]
    # then they finish while the hanging one is still waiting for its page
    for t in others:
        assert wait_task(stack.api_url, t, timeout=30)["status"] == "SUCCESS"
    assert time.monotonic() - t0 < 15
    state = httpx.get(f"{stack.api_url}/export/tasks/{hanging}").json()["data"]
    assert state["status"] == "RUNNING" and (state.get("exportedRows") or 0) == 0
    httpx.post(f"{stack.api_url}/export/tasks/{hanging}/cancel")
