"""Benchmark: the flights export (336,776 rows x 19 columns) through the whole
pipeline, to xlsx and csv, beside a bare single-process writer and a naive
pandas export of the same rows, so the pipeline's overhead reads as a ratio.

Prints one JSON object per line:
``{"bench", "format", "rows", "seconds", "rows_per_s", "peak_rss_mb"}``.
Pipeline seconds run from POST to SUCCESS; peak RSS is the worker's VmHWM
(reset between runs). Baselines run in a fresh child process each and
report their own ru_maxrss.

Usage: ``python bench/bench_export.py [--limit N] [--formats xlsx,csv]``
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ops.demo import flights_spec  # noqa: E402
from ops.stack import Stack  # noqa: E402

BASELINE = r'''
import csv, json, resource, sys, time
fmt, kind, limit, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
from producers.demo_api import flights
t0 = time.perf_counter()
table = flights().slice(0, limit)
if kind == "pandas":
    df = table.to_pandas()
    df.to_excel(out, index=False, engine="xlsxwriter") if fmt == "xlsx" else df.to_csv(out, index=False)
elif fmt == "xlsx":
    import xlsxwriter
    wb = xlsxwriter.Workbook(out, {"constant_memory": True})
    ws = wb.add_worksheet()
    ws.write_row(0, 0, table.column_names)
    r = 1
    for batch in table.to_batches(8192):
        for row in zip(*(c.to_pylist() for c in batch.columns)):
            ws.write_row(r, 0, row)
            r += 1
    wb.close()
else:
    with open(out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(table.column_names)
        for batch in table.to_batches(8192):
            w.writerows(zip(*(c.to_pylist() for c in batch.columns)))
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


def vm_hwm_mb(pid: int) -> float:
    """Peak resident set size of ``pid`` (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def reset_hwm(pid: int) -> None:
    """Reset a process's peak RSS counter (Linux: clear_refs 5)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


def line(bench: str, fmt: str, rows: int, seconds: float, rss: float) -> None:
    print(json.dumps({"bench": bench, "format": fmt, "rows": rows, "seconds": round(seconds, 2),
                      "rows_per_s": round(rows / seconds), "peak_rss_mb": round(rss, 1)}),
          flush=True)


def export(stack: Stack, fmt: str, limit: int | None) -> dict:
    """Run one flights export through the API; returns the SUCCESS task."""
    resp = httpx.post(f"{stack.api_url}/export/tasks",
                      json=flights_spec(f"{stack.demo_data_api}/data", fmt, limit))
    task_id = resp.json()["data"]["taskId"]
    while True:
        task = httpx.get(f"{stack.api_url}/export/tasks/{task_id}").json()["data"]
        if task["status"] in ("SUCCESS", "FAILED", "CANCELLED", "TIMEOUT"):
            break
        time.sleep(0.2)
    if task["status"] != "SUCCESS":
        raise SystemExit(f"{fmt}: {task}")
    return task


def pipeline(formats: list[str], limit: int | None) -> None:
    with tempfile.TemporaryDirectory() as tmp, Stack(Path(tmp), {
            "PLAIT_TOPIC_PREFIX": "bench.", "PLAIT_REDIS_PREFIX": f"plait-bench-{time.time_ns()}",
            "PLAIT_APP_ID": "plait-bench"}) as stack:
        stack.start(workers=1)
        pid = stack.procs["worker-0"].pid
        export(stack, "csv", 10)  # warm-up: the consumer group forms, imports load
        for fmt in formats:
            reset_hwm(pid)
            t0 = time.perf_counter()
            task = export(stack, fmt, limit)
            line("pipeline", fmt, task["exportedRows"], time.perf_counter() - t0, vm_hwm_mb(pid))


def baseline(kind: str, fmt: str, limit: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", BASELINE, fmt, kind, str(limit),
                              f"{tmp}/out.{fmt}"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    line(kind, fmt, limit, res["seconds"], res["peak_rss_mb"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--formats", default="xlsx,csv")
    args = parser.parse_args()
    formats = args.formats.split(",")
    pipeline(formats, args.limit)
    rows = args.limit or 336_776
    for fmt in formats:
        baseline("bare_xlsxwriter" if fmt == "xlsx" else "bare_csv", fmt, rows)
        baseline("pandas", fmt, rows)


if __name__ == "__main__":
    main()
