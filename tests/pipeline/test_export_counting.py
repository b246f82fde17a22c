"""How an export task counts its rows and re-drives, on the real broker
(Tansu), the real Redis and a signed caller registry with a daily quota:
``maxRows`` stops a 4-partition task at exactly ``maxRows`` rows and the
quota then counts exactly the file's rows, in the task's own keys; a quota
cut across partitions counts every row once; a re-drive of an unpartitioned
task that no worker claims (its worker paused) is sent again without
counting toward ``PLAIT_MAX_REDRIVES``, so the task succeeds once a worker
takes it."""
from __future__ import annotations

import os
import signal
import socket

import httpx
import pytest
import redis

from plait import keys as K
from plait.lifecycle import TERMINAL
from plait.quotas import today
from producers.signing import PlaitAuth
from support import (fetch_file, read_rows, seq_spec, start_with_registry, topic_events,
                     wait_for)

pytestmark = pytest.mark.integration
SECRET = "counting-secret-" + "c" * 32
#: the first task's 730 rows, then 420 rows of the second before the quota cuts it
QUOTA = 1150
MAX_REDRIVES = 2


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """Two workers; a fast sweeper; a consumer session long enough that a
    paused worker keeps its partitions while the sweeper re-drives (Tansu
    forms a new group in half the session timeout: 15 s)."""
    from ops.stack import Stack
    from stack_env import drop_redis_keys, isolated_env

    data_dir = tmp_path_factory.mktemp("counting")
    stack = Stack(data_dir, isolated_env(
        PLAIT_STALE_AFTER_SECONDS="2", PLAIT_SWEEP_INTERVAL_SECONDS="0.5",
        PLAIT_HEARTBEAT_INTERVAL_SECONDS="0.5", PLAIT_MAX_REDRIVES=str(MAX_REDRIVES),
        PLAIT_SESSION_TIMEOUT_SECONDS="30"))
    stack.start(workers=0, api=False)
    allowed = {"appSecret": SECRET, "bizTypes": ["seq"],
               "dataApiPrefixes": [f"{stack.demo_data_api}/data"], "fileFormats": ["csv"],
               "maxRows": 100_000, "tier": "free", "timezone": "Asia/Tokyo"}
    callers = {"callers": {"counted": {**allowed, "appKey": "counted-key", "dailyRows": QUOTA},
                           "open": {**allowed, "appKey": "open-key"}}}
    start_with_registry(stack, data_dir, callers)
    stack.spawn_worker("worker-1")
    stack.wait_workers_ready()
    yield stack
    stack.stop()
    drop_redis_keys(stack)


def client(app_key: str, stack) -> httpx.Client:
    return httpx.Client(base_url=stack.api_url, auth=PlaitAuth(app_key, SECRET), timeout=10)


def run(stack, spec: dict, app_key: str = "counted-key", timeout: float = 120) -> dict:
    """Submit ``spec`` signed as ``app_key``; the task's state once it ended."""
    with client(app_key, stack) as c:
        resp = c.post("/export/tasks", json=spec)
        assert resp.status_code == 202, resp.text
        task_id = resp.json()["data"]["taskId"]
        return wait_ended(c, task_id, timeout)


def wait_ended(c: httpx.Client, task_id: str, timeout: float = 120) -> dict:
    found: dict = {}

    def ended() -> bool:
        found.update(c.get(f"/export/tasks/{task_id}", params={"userId": "alice"}).json()["data"])
        return found["status"] in TERMINAL

    wait_for(ended, timeout, f"task {task_id} to end", every=0.2)
    return found


def split_spec(stack, rows: int, parts: int, **job) -> dict:
    spec = seq_spec(stack.demo_data_api, "csv", rows, 100, sys_code="counted", job=job)
    spec["dataConfig"]["split"] = {"field": "id", "from": 0, "to": rows, "parts": parts}
    return spec


def redis_client(stack) -> redis.Redis:
    return redis.Redis.from_url(stack.env["PLAIT_REDIS_URL"], decode_responses=True)


def used_today(stack) -> int:
    day = today("Asia/Tokyo").day
    return int(redis_client(stack).get(K.daily_rows(stack.redis_prefix, "counted", day)) or 0)


def file_ids(task: dict, dest) -> list[int]:
    return [int(r[0]) for r in read_rows(fetch_file(task, dest))[1:]]


def test_max_rows_over_partitions_counts_the_task_once_in_the_quota(stack, tmp_path):
    # given a caller with a daily quota of 1,150 rows and 4 partitions of 500
    # rows (pages of 100) capped at maxRows 730
    task = run(stack, split_spec(stack, 2000, 4, maxRows=730))
    # then the file holds exactly 730 rows, each once, in partition order
    assert task["status"] == "SUCCESS" and task["truncated"] is True, task
    (tmp_path / "capped").mkdir()
    ids = file_ids(task, tmp_path / "capped")
    assert len(ids) == len(set(ids)) == 730 and ids == sorted(ids)
    assert task["exportedRows"] == 730, task
    # and the quota counted the task once: the rows in its file, in the task's own keys
    assert used_today(stack) == 730
    r, prefix = redis_client(stack), stack.redis_prefix
    assert r.hget(K.checkpoint(prefix, task["taskId"]), "quota_rows") == "730"
    assert list(r.scan_iter(match=f"{prefix}:ckpt:{task['taskId']}#*", count=1000)) == []


def test_a_quota_cut_across_partitions_counts_every_row_once(stack, tmp_path):
    # given 420 rows left today and an export of 4 partitions of 500 rows
    assert used_today(stack) == 730  # the previous test's task
    task = run(stack, split_spec(stack, 2000, 4))
    # then it ends SUCCESS truncated with 420 rows, the quota used up exactly
    assert task["status"] == "SUCCESS" and task["truncated"] is True, task
    assert task["quality"]["daily_quota_cut"] >= 1, task
    ids = file_ids(task, tmp_path)
    assert len(ids) == len(set(ids)) == 420 and ids == sorted(ids)
    assert used_today(stack) == QUOTA
    assert redis_client(stack).hget(K.checkpoint(stack.redis_prefix, task["taskId"]),
                                    "quota_rows") == "420"


def fetching_worker(stack, task_id: str) -> tuple[str, int] | None:
    """``(worker name, pid)`` of the worker fetching the task's pages once a
    few pages are in, None before."""
    pids = {f"{socket.gethostname()}:{p.pid}": (n, p.pid) for n, p in stack.workers().items()}
    marks = redis_client(stack).hgetall(K.checkpoint(stack.redis_prefix, task_id))
    if int(marks.get("fetched", -1)) >= 2 and "last_seq" not in marks:
        return pids.get(marks.get("fetcher"))
    return None


def test_an_unclaimed_redrive_is_sent_again_without_counting(stack, tmp_path):
    # given a slow unpartitioned export (40 pages of 100 ms), a few pages in
    spec = seq_spec(stack.demo_data_api, "csv", 4000, 100, query="?delay_ms=100",
                    sys_code="open")
    with client("open-key", stack) as c:
        resp = c.post("/export/tasks", json=spec)
        assert resp.status_code == 202, resp.text
        task_id = resp.json()["data"]["taskId"]
        name, pid = wait_for(lambda: fetching_worker(stack, task_id), 60, "a few pages fetched")
        # when its worker pauses (SIGSTOP): it keeps its broker partitions, so the
        # sweeper's re-drives of the next page wait there, claimed by no worker
        os.kill(pid, signal.SIGSTOP)
        try:
            def resent_or_ended() -> bool:
                state = c.get(f"/export/tasks/{task_id}", params={"userId": "alice"}).json()
                if state["data"]["status"] in TERMINAL:
                    return True
                resent = [e for e in topic_events(stack, "export.fetch", task_id, idle=0.5)
                          if e.get("attempt")]
                return len(resent) > MAX_REDRIVES + 1

            wait_for(resent_or_ended, 90, "re-drives sent more than PLAIT_MAX_REDRIVES times",
                     every=0.5)
        finally:
            os.kill(pid, signal.SIGCONT)
        # and then it resumes, taking the re-driven page
        task = wait_ended(c, task_id, 120)
    # then the task succeeds with every row exactly once
    assert task["status"] == "SUCCESS", task
    assert file_ids(task, tmp_path) == list(range(1, 4001))
    assert task["exportedRows"] == 4000
    # re-sent more than PLAIT_MAX_REDRIVES times while unclaimed, counted once at most
    resent = [e for e in topic_events(stack, "export.fetch", task_id) if e.get("attempt")]
    assert len(resent) > MAX_REDRIVES + 1 and {e["attempt"] for e in resent} == {1}, resent
    print(f"\nunclaimed re-drive: sent {len(resent)} times; worker {name} paused")
