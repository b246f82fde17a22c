"""Partitioned pull exports on the real broker (Tansu), the real Redis and
the local object store: ``dataConfig.split`` / ``partitions`` pulled in
parallel on two workers give the file in partition order in every format
(zip split and xlsx sheet roll-over crossing partition boundaries); progress
sums the partitions; ``maxRows`` counts the whole task; a bad partition spec
is a 422 naming it; cancel stops every partition; a kill -9 of a worker
mid-partition still gives every row exactly once."""
from __future__ import annotations

import socket
import time
import zipfile
from pathlib import Path

import httpx
import openpyxl
import pytest
import redis

from ops.stack import Stack
from stack_env import drop_redis_keys, isolated_env
from streams.layout import SHARD_SUFFIX
from support import (fetch_file, read_rows, seq_spec, submit, topic_records, wait_for,
                     wait_task)

pytestmark = pytest.mark.integration

FORMATS = ["csv", "xlsx", "parquet", "jsonl"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """Two workers, a fast sweeper (the last test kills one)."""
    fast = isolated_env(PLAIT_STALE_AFTER_SECONDS="4", PLAIT_SWEEP_INTERVAL_SECONDS="0.5",
                        PLAIT_HEARTBEAT_INTERVAL_SECONDS="1")
    with Stack(Path(tmp_path_factory.mktemp("stack")), fast) as s:
        yield s.start(workers=2)
    drop_redis_keys(s)


def split_spec(stack, fmt: str, rows: int, parts: int, page_size: int = 100,
               query: str = "", **doc) -> dict:
    """``rows`` seq rows (ids 1..rows) split into ``parts`` id windows."""
    spec = seq_spec(stack.demo_data_api, fmt, rows, page_size, query=query, **doc)
    spec["dataConfig"]["split"] = {"field": "id", "from": 0, "to": rows, "parts": parts}
    return spec


def file_ids(task: dict, dest: Path) -> list[int]:
    """The ids of a task's file, in file order (a zip: its parts in order,
    each part's header dropped)."""
    path = fetch_file(task, dest)
    if path.suffix != ".zip":
        return [int(r[0]) for r in read_rows(path)[1:]]
    ids: list[int] = []
    with zipfile.ZipFile(path) as zf:
        names = sorted(zf.namelist())
        zf.extractall(dest / "parts")
    for name in names:
        ids += [int(r[0]) for r in read_rows(dest / "parts" / name)[1:]]
    return ids


def checkpoint(stack, task_id: str) -> dict[str, str]:
    client = redis.Redis.from_url(stack.env["PLAIT_REDIS_URL"], decode_responses=True)
    return client.hgetall(f"{stack.env['PLAIT_REDIS_PREFIX']}:ckpt:{task_id}")


def test_split_export_in_every_format_holds_partitions_in_order_across_zip_parts(stack,
                                                                                  tmp_path):
    # given, per format, 2,400 rows split into 3 windows of 800, zipped 1,000 rows a file
    tasks = {fmt: submit(stack.api_url, split_spec(stack, fmt, 2400, 3, maxRowsPerFile=1000))
             for fmt in FORMATS}
    for fmt, task_id in tasks.items():
        task = wait_task(stack.api_url, task_id)
        # then every row is there once, in id order (partition order, then page
        # order), the zip's parts cutting across the partitions' boundaries
        assert task["status"] == "SUCCESS", (fmt, task)
        (tmp_path / fmt).mkdir()
        assert file_ids(task, tmp_path / fmt) == list(range(1, 2401)), fmt
        assert [f["rows"] for f in task["file"]["files"]] == [1000, 1000, 400], fmt
        assert task["exportedRows"] == 2400 and not task.get("truncated"), fmt
        # and each partition was its own chain with its own cursor
        marks = checkpoint(stack, task_id)
        assert {marks.get(f"done:{p}") for p in range(3)} == {"1"}, marks


def test_partition_fragments_are_merged_over_query_conditions_in_list_order(stack, tmp_path):
    # given explicit fragments of uneven sizes, listed out of id order
    spec = seq_spec(stack.demo_data_api, "csv", 0, 50)
    spec["dataConfig"]["partitions"] = [{"fromId": 300, "toId": 420},
                                        {"fromId": 0, "toId": 30}, {"fromId": 30, "toId": 300}]
    task = wait_task(stack.api_url, submit(stack.api_url, spec))
    # then the file holds the partitions in the order listed
    assert task["status"] == "SUCCESS", task
    assert file_ids(task, tmp_path) == list(range(301, 421)) + list(range(1, 301))
    assert task["exportedRows"] == task["totalRows"] == 420


def test_max_rows_counts_the_whole_task(stack, tmp_path):
    # given 4 partitions of 500 rows and maxRows 730
    spec = split_spec(stack, "parquet", 2000, 4, job={"maxRows": 730})
    task = wait_task(stack.api_url, submit(stack.api_url, spec))
    # then the file holds 730 rows, each once, the task truncated
    assert task["status"] == "SUCCESS", task
    ids = file_ids(task, tmp_path)
    assert len(ids) == len(set(ids)) == 730 and task["truncated"] is True
    assert ids == sorted(ids)  # partition order, then page order


def test_a_bad_partition_spec_is_a_422_naming_it(stack):
    base = seq_spec(stack.demo_data_api, "csv", 10)
    bad = {"partitions": ([{"fromId": 0}, {}], "item 1: must be a non-empty object"),
           "split": ({"field": "id", "from": 5, "to": 5, "parts": 2}, "to: 5 is not after from (5)")}
    for field, (value, why) in bad.items():
        spec = {**base, "dataConfig": {**base["dataConfig"], field: value}}
        resp = httpx.post(f"{stack.api_url}/export/tasks", json=spec)
        # then the API refuses it, naming the field and the rule
        assert resp.status_code == 422, resp.text
        assert f"dataConfig.{field}" in resp.text and why in resp.text, resp.text


def test_cancel_mid_partition_stops_every_partition(stack):
    # given a slow export of 4 partitions, some pages in
    spec = split_spec(stack, "csv", 4000, 4, query="?delay_ms=150")
    task_id = submit(stack.api_url, spec)
    wait_for(lambda: (wait_task(stack.api_url, task_id, until={"RUNNING"}).get("exportedRows")
                      or 0) >= 400, 60, "some pages")
    # when the owner cancels it
    assert httpx.post(f"{stack.api_url}/export/tasks/{task_id}/cancel").status_code == 202
    task = wait_task(stack.api_url, task_id)
    # then it ends CANCELLED with no file; no partition fetches on and its shards disappear
    assert task["status"] == "CANCELLED" and "file" not in task
    at_cancel = fetched_marks(stack, task_id)
    shards = stack.data_dir / "storage" / "shards" / task_id
    wait_for(lambda: not list(shards.rglob(f"*{SHARD_SUFFIX}")), 30, "the shards deleted")
    time.sleep(1.0)  # a fixed window in which no partition may fetch a page
    # a step past its last status check when the cancel landed may still
    # record its page; no chain goes on beyond it
    after = fetched_marks(stack, task_id)
    assert after.keys() == at_cancel.keys()
    assert all(at_cancel[p] <= after[p] <= at_cancel[p] + 1 for p in after), (at_cancel, after)
    assert not list(shards.rglob(f"*{SHARD_SUFFIX}"))


def fetched_marks(stack, task_id: str) -> dict[str, int]:
    """``fetched:<p>`` -> the last page seq chain ``p`` recorded."""
    return {k: int(v) for k, v in checkpoint(stack, task_id).items() if k.startswith("fetched:")}


def test_xlsx_sheet_rolls_over_inside_a_later_partition(stack, tmp_path):
    # given 1,048,675 rows in two partitions, the second from id 1,048,501:
    # the sheet's 1,048,575 data rows end inside the second partition
    total, cut = 1_048_675, 1_048_500
    spec = seq_spec(stack.demo_data_api, "xlsx", 0, 10_000)
    spec["dataConfig"]["partitions"] = [{"fromId": 0, "toId": cut},
                                        {"fromId": cut, "toId": total}]
    task = wait_task(stack.api_url, submit(stack.api_url, spec), timeout=600)
    assert task["status"] == "SUCCESS", task
    assert task["file"]["sheets"] == 2 and task["file"]["rows"] == total
    wb = openpyxl.load_workbook(fetch_file(task, tmp_path), read_only=True)
    first, second = wb.worksheets
    # then sheet 1 is full and sheet 2 holds the rest of the second partition, in order
    assert first.max_row == 1_048_576
    rows = [r for r in second.iter_rows(values_only=True)]
    assert [r[0] for r in rows[1:]] == list(range(1_048_576, total + 1))
    wb.close()


# -- kill -9 (last: it replaces one of the module stack's workers) -----------

def mid_way(stack, task_id: str, parts: int, rows: int) -> tuple[str, str] | None:
    """``(worker name, worker id)`` of a worker holding a chain of the task
    with a page in and at least half its ``rows`` to go, None while none."""
    names = {f"{socket.gethostname()}:{p.pid}": n for n, p in stack.workers().items()}
    marks = checkpoint(stack, task_id)
    for p in range(parts):
        fetcher = marks.get(f"fetcher:{p}")
        if (fetcher in names and f"done:{p}" not in marks
                and 0 < int(marks.get(f"rows:{p}", 0)) <= rows // 2):
            return names[fetcher], fetcher
    return None


def test_kill_9_of_a_worker_mid_partition_still_gives_every_row_once(stack, tmp_path):
    # given 8 slow partitions of 20 pages spread over two workers, one of
    # them mid-way through a partition
    spec = split_spec(stack, "csv", 16_000, 8, query="?delay_ms=150")
    task_id = submit(stack.api_url, spec)
    name, killed = wait_for(lambda: mid_way(stack, task_id, 8, 2000), 90,
                            "a worker mid-way through a partition")
    # when that worker is killed with SIGKILL (and a new worker joins)
    stack.kill(name)
    marks = checkpoint(stack, task_id)
    held = [p for p in range(8) if marks.get(f"fetcher:{p}") == killed
            and f"done:{p}" not in marks]
    assert held, marks  # the chains it held, left mid-partition
    stack.spawn_worker("worker-2")
    task = wait_task(stack.api_url, task_id, timeout=180)
    # then the file holds every row exactly once, in order
    assert task["status"] == "SUCCESS", task
    assert file_ids(task, tmp_path) == list(range(1, 16_001))
    marks = checkpoint(stack, task_id)
    assert all(marks[f"fetcher:{p}"] != killed for p in held)  # re-driven elsewhere
    # once each: re-sent while the group rebalances, a re-drive counts once claimed
    assert [marks.get(f"redrives:{p}") for p in held] == ["1"] * len(held), marks
    # every record of a chain (first page, re-drives) on one fetch partition,
    # the 8 chains on all 4 of them (PLAIT_PARTITIONS), 2 each
    records = topic_records(stack, "export.fetch", task_id)
    assert {key for _p, key, cmd in records if cmd.get("attempt")} >= {
        f"{task_id}#{p}" for p in held}
    places: dict[str, set[int]] = {}
    for part, key, _cmd in records:
        places.setdefault(key, set()).add(part)
    assert sorted(places) == [f"{task_id}#{p}" for p in range(8)]
    assert all(len(parts) == 1 for parts in places.values()), places
    assert sorted(min(parts) for parts in places.values()) == [0, 0, 1, 1, 2, 2, 3, 3], places
    print(f"\nkill -9 mid-partition: partitions {held} re-driven "
          f"({[marks.get(f'redrives:{p}') for p in held]} re-drives)")
