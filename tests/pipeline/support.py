"""Helpers of the pipeline tests: specs, submitting, waiting, reading files."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from plait.lifecycle import TERMINAL
from producers.demo_api import seq_rows
from stack_env import wait_for  # noqa: F401 (re-exported for the pipeline tests)


def seq_spec(data_api: str, fmt: str, rows: int, page_size: int = 100,
             query: str = "", user: str = "alice", sys_code: str = "tests",
             job: dict[str, Any] | None = None, **doc: Any) -> dict[str, Any]:
    """An export of ``rows`` synthetic rows (ids 1..rows) in pages of ``page_size``.
    A random ``tag`` in the query conditions makes each spec's fingerprint unique."""
    return {
        "sysCode": sys_code, "bizType": "seq", "userId": user,
        "dataConfig": {"dataApiUrl": f"{data_api}/data{query}", "pageSize": page_size,
                       "queryConditions": {"dataset": "seq", "rows": rows,
                                           "tag": uuid.uuid4().hex}},
        "documentConfig": {"fileName": f"seq-{fmt}", "fileFormat": fmt, **doc},
        "jobConfig": {"timeout": 300, **(job or {})},
    }


#: One client for the polls (``httpx.get()`` builds a client and its TLS
#: context per call, ~20 ms of CPU, taken from the stack under test).
_CLIENT = httpx.Client(timeout=10)


def submit(api: str, spec: dict[str, Any]) -> str:
    """POST the spec; returns the task id (asserts the 202)."""
    resp = _CLIENT.post(f"{api}/export/tasks", json=spec)
    assert resp.status_code == 202, resp.text
    return resp.json()["data"]["taskId"]


def wait_task(api: str, task_id: str, timeout: float = 120, until=TERMINAL) -> dict[str, Any]:
    """Poll the task until its status is in ``until``; returns its state.
    Fails the test with the last state when the deadline passes."""
    deadline = time.monotonic() + timeout
    task: dict[str, Any] = {}
    while time.monotonic() < deadline:
        resp = _CLIENT.get(f"{api}/export/tasks/{task_id}")
        if resp.status_code == 200:
            task = resp.json()["data"]
            if task["status"] in until:
                return task
        time.sleep(0.2)
    raise AssertionError(f"task {task_id} not in {sorted(until)} after {timeout}s: {task}")


def fetch_file(task: dict[str, Any], dest: Path) -> Path:
    """Download the task's file through its signed link; checks its sha256."""
    info = task["file"]
    resp = httpx.get(info["url"], timeout=60)
    assert resp.status_code == 200, resp.text
    assert hashlib.sha256(resp.content).hexdigest() == info["sha256"]
    path = dest / info["fileName"]
    path.write_bytes(resp.content)
    return path


def read_rows(path: Path) -> list[list[Any]]:
    """Header + data rows of a csv, xlsx (every sheet, headers after the first
    dropped), parquet or jsonl file, as lists of Python values."""
    suffix = path.suffix
    if suffix == ".csv":
        return list(csv.reader(io.StringIO(path.read_text("utf-8-sig"))))
    if suffix == ".xlsx":
        import openpyxl

        wb = openpyxl.load_workbook(path, read_only=True)
        out: list[list[Any]] = []
        for i, ws in enumerate(wb.worksheets):
            rows = [list(r) for r in ws.iter_rows(values_only=True)]
            out.extend(rows if i == 0 else rows[1:])
        wb.close()
        return out
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        return [table.column_names] + [list(r.values()) for r in table.to_pylist()]
    if suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        return [list(rows[0])] + [list(r.values()) for r in rows]
    raise ValueError(f"unknown file type {path}")


def source_ids(n: int) -> list[int]:
    """The ids the ``seq`` dataset serves: 1..n."""
    return [r["id"] for r in seq_rows(0, n)]


def start_with_registry(stack, data_dir: Path, callers: dict[str, Any]) -> None:
    """Finish starting ``stack`` (its demo data API already runs, so the
    registry can name its URL) with the caller registry ``callers`` written to
    ``data_dir/callers.yaml``: one worker, then the API."""
    import yaml

    path = data_dir / "callers.yaml"
    path.write_text(yaml.safe_dump(callers))
    stack.env["PLAIT_CALLERS_FILE"] = str(path)
    stack.spawn_worker("worker-0")
    stack.start_api()


def warm_up(stack) -> None:
    """Run a one-row export so the workers' consumer group has formed."""
    task = wait_task(stack.api_url, submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 1, 1)))
    assert task["status"] == "SUCCESS", task


def topic_events(stack, topic: str, task_id: str, idle: float = 2.0,
                 timeout: float = 30) -> list[dict[str, Any]]:
    """The payloads (CloudEvents ``data``) of task ``task_id`` on ``topic``
    (:func:`topic_records`)."""
    return [data for _p, _k, data in topic_records(stack, topic, task_id, idle, timeout)]


def topic_records(stack, topic: str, task_id: str, idle: float = 2.0,
                  timeout: float = 30) -> list[tuple[int, str, dict[str, Any]]]:
    """``(partition, key, payload)`` of each event of task ``task_id`` on
    ``topic`` (a name without the stack's prefix, e.g. ``export.fetch``;
    payload: the CloudEvents ``data``), all partitions from the start, in each
    partition's order, read until no event came for ``idle`` seconds."""
    from confluent_kafka import Consumer, TopicPartition

    name = stack.env.get("PLAIT_TOPIC_PREFIX", "") + topic
    consumer = Consumer({"bootstrap.servers": stack.env["PLAIT_BROKER_URL"],
                         "group.id": f"t-{uuid.uuid4().hex}", "enable.auto.commit": False})
    try:
        parts = consumer.list_topics(name, timeout=10).topics[name].partitions
        consumer.assign([TopicPartition(name, p, 0) for p in parts])
        out: list[tuple[int, str, dict[str, Any]]] = []
        deadline, last = time.monotonic() + timeout, time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last < idle:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            last = time.monotonic()
            data = json.loads(msg.value()).get("data") or {}
            if data.get("taskId") == task_id:
                out.append((msg.partition(), (msg.key() or b"").decode(), data))
        return out
    finally:
        consumer.close()
