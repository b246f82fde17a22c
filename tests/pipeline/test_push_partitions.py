"""Push mode on the real broker (Tansu), the real Redis and the local object
store: several producers feed one task, pages in any order and repeated; the
file holds partition 0's pages in order, then partition 1's; a page missing
too long fails the task naming it; PROGRESS sums the rows accepted over
every producer, once per page; a kill -9 of the worker mid-task loses and
repeats nothing; pushed values give the same cells as the same values pulled."""
from __future__ import annotations

import base64
import random
import threading
import uuid
from datetime import date, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from ops.stack import Stack
from plait.spec import ExportSpec
from producers.sdk import PlaitProducer
from streams.layout import SHARD_SUFFIX
from stack_env import drop_redis_keys, isolated_env
from support import fetch_file, read_rows, submit, topic_events, wait_for, wait_task

pytestmark = pytest.mark.integration

FORMATS = ["csv", "xlsx", "parquet", "jsonl"]
#: partition -> (pages, rows per page)
PAGES = {0: (3, 40), 1: (4, 25)}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """A stack whose sweeper fails a page missing for 3 s (its worker is
    killed by the last test)."""
    s = Stack(Path(tmp_path_factory.mktemp("stack")),
              isolated_env(PLAIT_PUSH_PAGE_TIMEOUT_SECONDS="3",
                           PLAIT_SWEEP_INTERVAL_SECONDS="0.5",
                           PLAIT_HEARTBEAT_INTERVAL_SECONDS="1",
                           PLAIT_STALE_AFTER_SECONDS="4"))
    try:
        yield s.start(workers=1)
    finally:
        s.stop()
        drop_redis_keys(s)


def push_spec(fmt: str) -> ExportSpec:
    return ExportSpec.model_validate({
        "sysCode": "tests", "bizType": f"push-{uuid.uuid4().hex[:8]}", "userId": "alice",
        "dataConfig": {"mode": "push"}, "jobConfig": {"timeout": 300},
        "documentConfig": {"fileName": f"pushed-{fmt}", "fileFormat": fmt}})


def rows_of(partition: int, seq: int) -> list[dict]:
    """Partition p's ids start at 1000 * p + 1: the file's order is id order."""
    size = PAGES[partition][1]
    first = 1000 * partition + seq * size + 1
    return [{"id": i, "name": f"p{partition}-{i}"} for i in range(first, first + size)]


def expected_ids() -> list[int]:
    return [r["id"] for p, (n, _) in PAGES.items() for s in range(n) for r in rows_of(p, s)]


def producers(stack) -> list[PlaitProducer]:
    """One SDK instance per partition, as two services would have."""
    return [PlaitProducer(stack.env["PLAIT_BROKER_URL"], stack.env["PLAIT_TOPIC_PREFIX"])
            for _ in PAGES]


def push(sdks, task_id: str, spec: ExportSpec, keys) -> None:
    """Send pages ``keys`` ((partition, seq)), each from its partition's SDK."""
    for p, s in keys:
        sdks[p].send_page(task_id, spec, s, rows_of(p, s), is_last=s == PAGES[p][0] - 1,
                          partition=p, partitions=len(PAGES))
    for sdk in sdks:
        sdk.flush()


def shuffled(seed: int) -> list[tuple[int, int]]:
    keys = [(p, s) for p, (n, _) in PAGES.items() for s in range(n)]
    random.Random(seed).shuffle(keys)
    if keys[0] == (0, 0):  # the first page to arrive is out of order
        keys.append(keys.pop(0))
    return keys


def test_two_producers_out_of_order_give_the_file_in_order(stack, tmp_path):
    # given a push task per format, fed by two producers (one per partition),
    # pages shuffled
    sdks, tasks = producers(stack), {}
    for n, fmt in enumerate(FORMATS):
        spec = push_spec(fmt)
        tasks[fmt] = sdks[0].request_export(spec)
        push(sdks, tasks[fmt], spec, shuffled(n))
    for fmt, task_id in tasks.items():
        # when the task completes
        task = wait_task(stack.api_url, task_id)
        # then the file holds partition 0's rows, then partition 1's, each once, in order
        assert task["status"] == "SUCCESS", (fmt, task)
        (tmp_path / fmt).mkdir()
        rows = read_rows(fetch_file(task, tmp_path / fmt))
        assert rows[0] == ["id", "name"], fmt
        assert [int(r[0]) for r in rows[1:]] == expected_ids(), fmt
        assert [r[1] for r in rows[1:]] == [f"p{i // 1000}-{i}" for i in expected_ids()], fmt


def test_repeated_pages_ahead_and_behind_are_counted_once(stack, tmp_path):
    # given pages sent out of order, some of them three times (ahead of the
    # gap, and again after they were written)
    spec, sdks = push_spec("csv"), producers(stack)
    task_id = sdks[0].request_export(spec)
    keys = shuffled(7)
    push(sdks, task_id, spec, keys[:3] + keys[:3] + keys[3:-1] + keys[:2] + keys[-1:])
    # then every row is in the file exactly once
    task = wait_task(stack.api_url, task_id)
    assert task["status"] == "SUCCESS", task
    assert task["file"]["rows"] == len(expected_ids())
    assert [int(r[0]) for r in read_rows(fetch_file(task, tmp_path))[1:]] == expected_ids()


def test_progress_sums_every_producer_once_monotonic_and_exact_at_the_end(stack):
    # given two producers pushing one task's pages shuffled, some of them twice,
    # without rowsBefore (neither producer knows the other's rows)
    spec, sdks = push_spec("csv"), producers(stack)
    task_id = sdks[0].request_export(spec)
    keys = shuffled(11)
    push(sdks, task_id, spec, keys[:4] + keys[:2] + keys[4:])
    task = wait_task(stack.api_url, task_id)
    assert task["status"] == "SUCCESS", task
    # then PROGRESS reports the rows accepted so far over both producers: never
    # going back, never past the task's rows, and all of them on the last report
    reported = [e["exportedRows"] for e in topic_events(stack, "export.lifecycle", task_id)
                if e.get("status") == "PROGRESS" and "exportedRows" in e]
    total = len(expected_ids())
    assert reported and reported == sorted(reported) and reported[-1] == total, reported
    assert task["exportedRows"] == task["file"]["rows"] == total


def test_a_page_missing_past_the_timeout_fails_naming_partition_and_seq(stack):
    # given partition 1's page 1 never sent while its pages 0, 2 and 3 are
    spec, sdks = push_spec("csv"), producers(stack)
    task_id = sdks[0].request_export(spec)
    push(sdks, task_id, spec, [(0, 0), (0, 1), (0, 2), (1, 0), (1, 2), (1, 3)])
    # then after PLAIT_PUSH_PAGE_TIMEOUT_SECONDS (3 s) the task is FAILED naming that page
    task = wait_task(stack.api_url, task_id, timeout=60)
    assert task["status"] == "FAILED", task
    assert "page 1 of partition 1 missing" in task["errorMessage"], task


# -- the same typed values pushed and pulled ---------------------------------

#: What a data API answers in JSON for the rows of TYPED (the pull contract):
#: decimals as number literals, bytes as base64 text, dates and zoned
#: date-times in ISO 8601.
PULLED_BODY = (
    '{"code":200,"message":"ok","data":{"status":"finish","runtimeContext":{},"rows":['
    '{"id":1,"amount":1.10,"big":12345678901234567890.12,"raw":"AAEC/w==",'
    '"day":"2024-02-29","at":"2024-03-10T01:30:00-05:00","n":7,"f":2.5,"ok":true},'
    '{"id":2,"amount":-0.5,"big":1,"raw":"","day":"1999-12-31",'
    '"at":"2024-11-03T01:30:00-04:00","n":-3,"f":0.1,"ok":false}]}}')

NY = ZoneInfo("America/New_York")
TYPED = [
    {"id": np.int64(1), "amount": Decimal("1.10"), "big": Decimal("12345678901234567890.12"),
     "raw": b"\x00\x01\x02\xff", "day": date(2024, 2, 29),
     "at": datetime(2024, 3, 10, 1, 30, tzinfo=NY), "n": np.int32(7), "f": np.float64(2.5),
     "ok": np.bool_(True)},
    {"id": 2, "amount": Decimal("-0.5"), "big": 1, "raw": bytearray(), "day": date(1999, 12, 31),
     "at": datetime(2024, 11, 3, 1, 30, tzinfo=NY), "n": np.int8(-3), "f": np.float64(0.1),
     "ok": False},
]


@pytest.fixture(scope="module")
def typed_api():
    """A local data API answering every page with PULLED_BODY."""
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = PULLED_BODY.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/rows"
    server.shutdown()


def test_pushed_values_give_the_cells_of_the_same_values_pulled(stack, typed_api, tmp_path):
    # given, per format, the same two rows pulled from a data API and pushed with the SDK
    sdk = PlaitProducer(stack.env["PLAIT_BROKER_URL"], stack.env["PLAIT_TOPIC_PREFIX"])
    tasks = {}
    for fmt in FORMATS:
        doc = {"fileName": f"typed-{fmt}", "fileFormat": fmt, "timeZone": "UTC"}
        pulled_spec = {"sysCode": "tests", "bizType": "typed", "userId": "alice",
                       "dataConfig": {"dataApiUrl": typed_api,
                                      "queryConditions": {"tag": uuid.uuid4().hex}},
                       "documentConfig": doc}
        spec = ExportSpec.model_validate({**pulled_spec, "dataConfig": {"mode": "push"}})
        pushed_id = sdk.request_export(spec)
        sdk.send_page(pushed_id, spec, 0, TYPED, is_last=True)
        tasks[fmt] = (submit(stack.api_url, pulled_spec), pushed_id)
    sdk.flush()
    for fmt, (pulled_id, pushed_id) in tasks.items():
        pulled = wait_task(stack.api_url, pulled_id)
        pushed = wait_task(stack.api_url, pushed_id)
        # then both files hold the same cells
        assert pulled["status"] == "SUCCESS" and pushed["status"] == "SUCCESS", (pulled, pushed)
        (tmp_path / fmt / "pull").mkdir(parents=True), (tmp_path / fmt / "push").mkdir()
        want = read_rows(fetch_file(pulled, tmp_path / fmt / "pull"))
        got = read_rows(fetch_file(pushed, tmp_path / fmt / "push"))
        assert got == want, fmt
        first = dict(zip(want[0], want[1]))
        assert str(first["amount"]) in ("1.10", "1.1"), fmt  # a number, every digit kept
        assert base64.b64decode(str(first["raw"])) == b"\x00\x01\x02\xff", fmt


# -- kill -9 (last: it replaces the module stack's worker) ---------------------

def test_kill_9_mid_task_the_new_worker_writes_every_row_once(stack, tmp_path):
    # given a push task whose worker holds pages ahead and part of its file
    spec, sdks = push_spec("xlsx"), producers(stack)
    task_id = sdks[0].request_export(spec)
    first = [(1, 1), (1, 0), (0, 0), (1, 3), (0, 1)]
    push(sdks, task_id, spec, first)
    shards = stack.data_dir / "storage" / "shards" / task_id
    wait_for(lambda: len(list(shards.rglob(f"*{SHARD_SUFFIX}"))) == len(first), 30,
             "the first pages' shards")
    # when the worker is killed with SIGKILL, a new one starts and the rest arrives
    stack.kill("worker-0")
    stack.spawn_worker("worker-1")
    push(sdks, task_id, spec, [(1, 2), (0, 2)])
    task = wait_task(stack.api_url, task_id, timeout=120)
    # then the file holds every row exactly once, in order
    assert task["status"] == "SUCCESS", task
    assert [int(r[0]) for r in read_rows(fetch_file(task, tmp_path))[1:]] == expected_ids()
