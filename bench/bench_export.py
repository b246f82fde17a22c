"""Benchmark: the flights export (336,776 rows x 19 columns) through the whole
pipeline, to xlsx, csv and parquet, beside a bare single-process writer (and,
with ``--pandas``, a naive pandas export) of the same rows, so the pipeline's
overhead reads as a ratio; then ten concurrent csv exports from ten users on
one worker and on two (issue 12 targets).

Prints one JSON object per line:
``{"bench", "format", "rows", "seconds", "rows_per_s", "peak_rss_mb", "cpu_s"}``
(pipeline lines add ``others_cpu_s``: what the API, the demo data API and the
broker spent meanwhile on the same cores);
``{"bench": "ratio", "format", "runs", "pipeline_s", "baseline", "baseline_s",
"ratio", "target"}`` per format (with ``--repeat N``: medians of N pipeline
runs and of N baseline runs, in rounds: each round starts a stack, exports
every format, stops the stack, then runs every baseline, so a machine whose
speed drifts over minutes, as a shared one does, slows both sides of a ratio
alike, and no idle stack shares the cores with a baseline);
``{"bench": "concurrent", "workers", "tasks",
"seconds", "tasks_per_min", "workers_cpu_s", "peak_rss_mb"}`` per worker count and
``{"bench": "scaling", "ratio"}`` (two workers' tasks/min over one's).
Pipeline seconds run from POST to SUCCESS; peak RSS is the workers' highest
VmHWM (reset between runs). Baselines run in a fresh child process each and
report their own ru_maxrss; their seconds (what issue 12's targets are ratios
to) include reading the flights table from the package's zip (``load_s``,
~0.8 s here), so each ratio line also gives ``ratio_to_write_only``, the
pipeline over the bare write alone.

Pages: the bench asks for ``--page-size`` rows per page (default 5,000; a
caller may ask for 1..10,000; the demo asks for 2,000), printed in every
pipeline line. Measured on an idle machine with pages read straight into
Arrow (docs/fidelity-rules.md, "Fast page decode"): the csv export takes
2.6-2.7 s of worker CPU at 5,000 rows a page and no less at 10,000 (less of
the next page's fetch overlaps); larger pages cost memory (one decoded page
per worker, one response body per task fetching).

Floor (``--floor``): on one stack, per round, the least any pull exporter
must do with the same rows: fetch every page from the stack's demo data API,
decode it (Arrow's JSON reader) and write it with pyarrow (csv, parquet), in a
fresh child process (:data:`FLOOR`), printed as
``{"bench": "floor", "format", "rows", "seconds", "cpu_s", ...}``; then Plait's
export of each format once per column shape (``--shapes``: ``typed``, the
demo's columns with types; ``contract``, ``headerName`` + ``fieldName`` as the
contract writes them, no type; ``none``, no columns), each a ``pipeline``
line with its ``shape``; then per format and shape ``{"bench": "floor_ratio",
"format", "shape", "runs", "pipeline_s", "floor_s", "ratio", "spread",
"cpu_ratio", "target"}``: the median over rounds of pipeline seconds over
the floor's seconds of the same round, the lowest and highest of those
ratios, and the median of the worker's CPU seconds over the floor process's
(steadier on a shared machine; the API, broker and data API spend more).

Partitions (``--partitions``): 1,000,000 ``seq`` rows (``--limit``) to
csv, 1,000-row pages, the demo data API slowed to 50 ms a page: one
partition on one worker, eight (``dataConfig.split``) on one worker, eight on
two; per run ``{"bench": "partitions", "partitions", "workers", "rows",
"seconds", "speedup", "peak_rss_mb", "workers_cpu_s", "worker_cpu_s" (per
worker), "worker_chains" (of a partitioned task: chains each worker fetched last),
"writer" (the worker that wrote the file, index into the lists), "others_cpu_s" (API,
demo data API, broker)}`` (``speedup``: one partition's seconds over this run's;
``peak_rss_mb``: the highest worker's VmHWM), target 6 for eight partitions.

Flights in partitions (``--flights-partitions``): on one stack of two
workers, per format (``--formats``, of xlsx and csv) and round
(``--repeat``), the whole flights table (``--page-size`` rows a page) in one
partition, then in four (``dataConfig.split`` on the demo API's row ids);
per run ``{"bench": "flights_partitions", "format", "partitions", "workers",
"rows", "seconds", "workers_cpu_s" (per worker), "others_cpu_s",
"peak_rss_mb"}``, then per format ``{"bench": "flights_partitions_ratio",
"format", "runs", "one_s", "four_s", "ratio"}`` (medians; ``ratio``: one
partition's seconds over four's, per round, median).

Usage: ``python bench/bench_export.py [--limit N] [--formats xlsx,csv,parquet]
[--concurrent 10] [--page-size 5000] [--workers 1,2] [--repeat 3] [--pandas]
[--floor --shapes typed,contract,none] [--partitions] [--flights-partitions]``
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
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
loaded = time.perf_counter() - t0
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
elif fmt == "parquet":
    import pyarrow.parquet as pq
    pq.write_table(table, out)
else:
    with open(out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(table.column_names)
        for batch in table.to_batches(8192):
            w.writerows(zip(*(c.to_pylist() for c in batch.columns)))
seconds = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": seconds, "load_s": loaded, "peak_rss_mb": ru.ru_maxrss / 1024,
                  "cpu_s": ru.ru_utime + ru.ru_stime}))
'''


FLOOR = r'''
import io, json, resource, sys, time
import httpx, orjson
import pyarrow as pa, pyarrow.csv as pcsv, pyarrow.json as pj, pyarrow.parquet as pq
url, fmt, limit, size, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
conditions = {"dataset": "flights", "limit": None if limit == "None" else int(limit)}
t0 = time.perf_counter()
ctx, writer, rows = {"pageSize": size, "lastId": 0}, None, 0
with httpx.Client(timeout=60) as client:
    while True:
        body = client.post(url, json={"queryConditions": conditions, "runtimeContext": ctx,
                                      "userId": "floor"}).content
        at = body.index(b'"rows":[') + 7
        end = body.rindex(b"]") + 1
        data = orjson.loads(body[:at] + b"[]" + body[end:])["data"]
        table = pj.read_json(io.BytesIO(b'{"rows":' + body[at:end] + b"}"),
                             read_options=pj.ReadOptions(block_size=len(body) + 8,
                                                         use_threads=False))
        batch = pa.Table.from_struct_array(table.column("rows").chunk(0).flatten())
        if writer is None:
            writer = (pq.ParquetWriter(out, batch.schema) if fmt == "parquet"
                      else pcsv.CSVWriter(out, batch.schema))
        writer.write_table(batch)
        rows += batch.num_rows
        if data["status"] != "continue":
            break
        ctx = data["runtimeContext"]
writer.close()
seconds = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": seconds, "rows": rows, "peak_rss_mb": ru.ru_maxrss / 1024,
                  "cpu_s": ru.ru_utime + ru.ru_stime}))
'''


def vm_hwm_mb(pid: int) -> float:
    """Peak resident set size of ``pid`` (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` used so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reset_hwm(pid: int) -> None:
    """Reset a process's peak RSS counter (Linux: clear_refs 5)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


def stack_pids(stack: Stack) -> dict[str, int]:
    """The stack's processes other than its workers (API, demo data API,
    broker) by name: pid."""
    pids = {n: p.pid for n, p in stack.procs.items() if not n.startswith("worker")}
    if stack.broker is not None:
        pids["broker"] = stack.broker.proc.pid
    return pids


def line(bench: str, fmt: str, rows: int, seconds: float, rss: float,
         cpu: float | None = None, load: float | None = None,
         others: dict[str, float] | None = None, shape: str | None = None) -> None:
    """One result line; ``cpu_s``: CPU seconds of the worker (pipeline) or the
    process (baselines), steadier than wall time on a shared machine;
    ``load_s`` (baselines): of ``seconds``, reading the flights table from the
    package's zip before writing it; ``others_cpu_s`` (pipeline): CPU seconds
    the stack's other processes (API, demo data API, broker) spent meanwhile,
    on the same cores as the worker."""
    extra = {"page_size": PAGE_SIZE} if bench in ("pipeline", "floor") else {}
    if shape is not None:
        extra["shape"] = shape
    if load is not None:
        extra["load_s"] = round(load, 2)
    if others is not None:
        extra["others_cpu_s"] = {n: round(c, 2) for n, c in others.items()}
    print(json.dumps({"bench": bench, "format": fmt, "rows": rows, "seconds": round(seconds, 2),
                      "rows_per_s": round(rows / seconds), "peak_rss_mb": round(rss, 1),
                      "cpu_s": None if cpu is None else round(cpu, 2)} | extra), flush=True)


#: Rows per page the bench asks for (``--page-size``).
PAGE_SIZE = 5_000

#: One client for every request the bench makes: ``httpx.get()`` builds a
#: client (and its TLS context) per call, ~20 ms of CPU, which polling every
#: 50 ms took from the cores the pipeline being measured runs on.
CLIENT = httpx.Client(timeout=30)


def shaped(spec: dict, shape: str) -> dict:
    """``spec`` with its columns in ``shape``: ``typed`` as the demo declares
    them, ``contract`` as ``headerName`` + ``fieldName`` without a type,
    ``none`` without columns."""
    doc = spec["documentConfig"]
    if shape == "contract":
        doc["columns"] = [{"headerName": c["fieldName"], "fieldName": c["fieldName"]}
                          for c in doc["columns"]]
    elif shape == "none":
        del doc["columns"]
    elif shape != "typed":
        raise SystemExit(f"--shapes: unknown shape {shape!r} (typed, contract, none)")
    return spec


def submit(stack: Stack, fmt: str, limit: int | None, user: str = "demo-user",
           shape: str = "typed") -> str:
    """POST one flights export as ``user`` (``PAGE_SIZE`` rows per page,
    columns in ``shape``: :func:`shaped`); its task id."""
    spec = shaped(flights_spec(f"{stack.demo_data_api}/data", fmt, limit), shape)
    spec["userId"] = user
    spec["dataConfig"]["pageSize"] = PAGE_SIZE
    resp = CLIENT.post(f"{stack.api_url}/export/tasks", json=spec)
    return resp.json()["data"]["taskId"]


def export(stack: Stack, fmt: str, limit: int | None, user: str = "demo-user",
           shape: str = "typed") -> dict:
    """Run one flights export through the API as ``user``; returns the SUCCESS
    task. (The same request again within the reuse window would answer the
    first task: repeats use another user.)"""
    return wait(stack, submit(stack, fmt, limit, user, shape), fmt)


def wait(stack: Stack, task_id: str, fmt: str) -> dict:
    """Follow a task's Server-Sent Events (``GET /export/tasks/{id}/events``)
    until it ended, as a service waiting for its export would: the end is
    seen as soon as the API publishes it (polling every 50 ms added 25 ms on
    average to each measured export). The SUCCESS task (exits otherwise)."""
    task: dict = {}
    with CLIENT.stream("GET", f"{stack.api_url}/export/tasks/{task_id}/events") as resp:
        for text in resp.iter_lines():
            if text.startswith("data: "):
                task = json.loads(text[len("data: "):])
                if task["status"] in ("SUCCESS", "FAILED", "CANCELLED", "TIMEOUT"):
                    break
    if task.get("status") != "SUCCESS":
        raise SystemExit(f"{fmt}: {task}")
    return task


def bench_stack(tmp: str, workers: int) -> Stack:
    """A stack for one bench (own topics prefix and Redis keys)."""
    return Stack(Path(tmp), {
        "PLAIT_TOPIC_PREFIX": "bench.", "PLAIT_REDIS_PREFIX": f"plait-bench-{time.time_ns()}",
        "PLAIT_APP_ID": "plait-bench"}, ephemeral_prefix=True)


def worker_pids(stack: Stack) -> list[int]:
    return [p.pid for n, p in stack.procs.items() if n.startswith("worker")]


def rounds(formats: list[str], limit: int | None, repeat: int = 1,
           ) -> tuple[dict[str, list[float]], dict[str, list[tuple[float, float]]]]:
    """``repeat`` rounds, each: a fresh stack with one worker exports every
    format once, the stack stops, then each format's bare baseline runs
    (:func:`baseline`). Returns the pipeline seconds per format and the
    baselines' ``(seconds, load seconds)`` per format, one per round."""
    took: dict[str, list[float]] = {fmt: [] for fmt in formats}
    bare: dict[str, list[tuple[float, float]]] = {fmt: [] for fmt in formats if BARE.get(fmt)}
    for r in range(repeat):
        rows = pipeline(formats, limit, r, took)
        for fmt in bare:
            bare[fmt].append(baseline(BARE[fmt], fmt, rows))
    return took, bare


def pipeline(formats: list[str], limit: int | None, r: int, took: dict[str, list[float]]) -> int:
    """Round ``r``: one export per format on a fresh stack with one worker,
    seconds appended to ``took[format]``; the rows exported."""
    with tempfile.TemporaryDirectory() as tmp, bench_stack(tmp, 1) as stack:
        stack.start(workers=1)
        pid = stack.procs["worker-0"].pid
        for fmt in formats:  # warm-up: the consumer group forms, each writer's imports load
            export(stack, fmt, 10, user="warm-up")
        for fmt in formats:
            reset_hwm(pid)
            others0 = {n: cpu_seconds(p) for n, p in stack_pids(stack).items()}
            c0, t0 = cpu_seconds(pid), time.perf_counter()
            task = export(stack, fmt, limit, user=f"bench-{r}")
            took[fmt].append(time.perf_counter() - t0)
            line("pipeline", fmt, task["exportedRows"], took[fmt][-1], vm_hwm_mb(pid),
                 cpu_seconds(pid) - c0, others={n: cpu_seconds(p) - others0[n]
                                                for n, p in stack_pids(stack).items()})
    return task["exportedRows"]


def floor_rounds(formats: list[str], shapes: list[str], limit: int | None,
                 repeat: int) -> None:
    """``repeat`` rounds on one stack with one worker, each: the floor of
    every format (:data:`FLOOR`), then Plait's export of every format in
    every shape; prints their lines, then one ``floor_ratio`` line per format
    and shape (module docstring)."""
    ratios: dict[tuple[str, str], list[float]] = {}
    cpu_ratios: dict[tuple[str, str], list[float]] = {}
    took: dict[tuple[str, str], list[float]] = {}
    floors: dict[str, list[float]] = {fmt: [] for fmt in formats}
    with tempfile.TemporaryDirectory() as tmp, bench_stack(tmp, 1) as stack:
        stack.start(workers=1)
        pid = stack.procs["worker-0"].pid
        for fmt in formats:  # warm-up: the consumer group forms, each writer's imports load
            for shape in shapes:
                export(stack, fmt, 10, user=f"warm-up-{shape}", shape=shape)
        for r in range(repeat):
            for fmt in formats:
                floor, floor_cpu = floor_run(stack, fmt, limit, f"{tmp}/floor.{fmt}")
                floors[fmt].append(floor)
                for shape in shapes:
                    reset_hwm(pid)
                    c0, t0 = cpu_seconds(pid), time.perf_counter()
                    task = export(stack, fmt, limit, user=f"bench-{r}-{shape}", shape=shape)
                    seconds = time.perf_counter() - t0
                    took.setdefault((fmt, shape), []).append(seconds)
                    ratios.setdefault((fmt, shape), []).append(seconds / floor)
                    cpu = cpu_seconds(pid) - c0
                    cpu_ratios.setdefault((fmt, shape), []).append(cpu / floor_cpu)
                    line("pipeline", fmt, task["exportedRows"], seconds, vm_hwm_mb(pid), cpu,
                         shape=shape)
    for (fmt, shape), rs in ratios.items():
        print(json.dumps({"bench": "floor_ratio", "format": fmt, "shape": shape, "runs": repeat,
                          "pipeline_s": round(statistics.median(took[fmt, shape]), 2),
                          "floor_s": round(statistics.median(floors[fmt]), 2),
                          "ratio": round(statistics.median(rs), 2),
                          "spread": [round(min(rs), 2), round(max(rs), 2)],
                          "cpu_ratio": round(statistics.median(cpu_ratios[fmt, shape]), 2),
                          "target": FLOOR_TARGET}), flush=True)


#: The target: Plait's export over the floor of the same run, at most this.
FLOOR_TARGET = 1.3


def floor_run(stack: Stack, fmt: str, limit: int | None, out: str) -> tuple[float, float]:
    """The floor of ``fmt`` (:data:`FLOOR`) in a fresh child process against
    the stack's demo data API; prints its line, returns its seconds and CPU
    seconds."""
    res = json.loads(subprocess.run(
        [sys.executable, "-c", FLOOR, f"{stack.demo_data_api}/data", fmt, str(limit),
         str(PAGE_SIZE), out], cwd=ROOT, capture_output=True, text=True,
        check=True).stdout.strip().splitlines()[-1])
    line("floor", fmt, res["rows"], res["seconds"], res["peak_rss_mb"], res["cpu_s"])
    return res["seconds"], res["cpu_s"]


def warmed(stack: Stack, workers: int) -> list[int]:
    """Start ``stack`` with ``workers`` workers, run a warm-up export (the
    consumer group forms, imports load) and reset the workers' peak RSS;
    their pids."""
    stack.start(workers=workers)
    export(stack, "csv", 10)
    pids = worker_pids(stack)
    for pid in pids:
        reset_hwm(pid)
    return pids


def concurrent(workers: int, tasks: int, limit: int | None) -> float:
    """``tasks`` csv exports from ``tasks`` users at once on ``workers``
    workers; prints and returns tasks per minute."""
    with tempfile.TemporaryDirectory() as tmp, bench_stack(tmp, workers) as stack:
        pids = warmed(stack, workers)
        c0 = sum(cpu_seconds(p) for p in pids)
        t0 = time.perf_counter()
        ids = [submit(stack, "csv", limit, user=f"user-{i}") for i in range(tasks)]
        rows = sum(wait(stack, t, "csv")["exportedRows"] for t in ids)
        seconds = time.perf_counter() - t0
        per_min = tasks / seconds * 60
        print(json.dumps({"bench": "concurrent", "format": "csv", "workers": workers,
                          "tasks": tasks, "page_size": PAGE_SIZE, "rows": rows, "seconds": round(seconds, 2),
                          "tasks_per_min": round(per_min, 2),
                          "workers_cpu_s": round(sum(cpu_seconds(p) for p in pids) - c0, 2),
                          "peak_rss_mb": round(max(vm_hwm_mb(p) for p in pids), 1)}), flush=True)
    return per_min


#: ``--partitions``: rows, rows per page, the data API's delay per page (ms),
#: and the runs as (partitions, workers).
PARTITION_ROWS, PARTITION_PAGE, PARTITION_DELAY_MS = 1_000_000, 1_000, 50
PARTITION_RUNS = ((1, 1), (8, 1), (8, 2))


def chain_holders(stack: Stack, task_id: str, parts: int, pids: list[int]
                  ) -> tuple[list[int] | None, int | None]:
    """(how many of the task's ``parts`` chains each worker, in ``pids``
    order, fetched last: checkpoint ``fetcher:<p>``, None for one partition;
    the index of the worker that wrote the file: the projection's last
    ``workerId``). Worker ids are ``<host>:<pid>``."""
    import redis

    from plait import keys as K

    client = redis.Redis.from_url(stack.env.get("PLAIT_REDIS_URL", "redis://127.0.0.1:6379/0"),
                                  decode_responses=True)
    marks = client.hgetall(K.checkpoint(stack.redis_prefix, task_id))
    held = [marks.get(f"fetcher:{p}", "") for p in range(parts)]
    writer = json.loads(client.get(K.task(stack.redis_prefix, task_id)) or "{}").get("workerId")
    return ([sum(h.endswith(f":{pid}") for h in held) for pid in pids] if parts > 1 else None,
            next((i for i, pid in enumerate(pids) if str(writer).endswith(f":{pid}")), None))


def partitions_run(parts: int, workers: int, rows: int
                   ) -> tuple[float, float, int, list[float], dict[str, float], tuple]:
    """One ``seq`` csv export of ``rows`` rows in ``parts`` partitions on a
    fresh stack of ``workers`` workers: (seconds from POST to SUCCESS, the
    highest worker peak RSS in MB, rows exported, each worker's CPU seconds,
    the CPU seconds of the API, demo data API and broker meanwhile, each
    worker's chains: :func:`chain_holders`)."""
    with tempfile.TemporaryDirectory() as tmp, bench_stack(tmp, workers) as stack:
        pids = warmed(stack, workers)
        spec = {"sysCode": "bench", "bizType": "partitions", "userId": "bench",
                "dataConfig": {"dataApiUrl": f"{stack.demo_data_api}/data?delay_ms="
                                             f"{PARTITION_DELAY_MS}",
                               "pageSize": PARTITION_PAGE,
                               "queryConditions": {"dataset": "seq", "rows": rows}},
                "documentConfig": {"fileName": "seq", "fileFormat": "csv"},
                "jobConfig": {"timeout": 3600}}
        if parts > 1:
            spec["dataConfig"]["split"] = {"field": "id", "from": 0, "to": rows, "parts": parts}
        others0 = {n: cpu_seconds(p) for n, p in stack_pids(stack).items()}
        c0, t0 = [cpu_seconds(p) for p in pids], time.perf_counter()
        resp = CLIENT.post(f"{stack.api_url}/export/tasks", json=spec)
        task_id = resp.json()["data"]["taskId"]
        task = wait(stack, task_id, "csv")
        return (time.perf_counter() - t0, max(vm_hwm_mb(p) for p in pids),
                task["exportedRows"], [cpu_seconds(p) - c for p, c in zip(pids, c0)],
                {n: cpu_seconds(p) - others0[n] for n, p in stack_pids(stack).items()},
                chain_holders(stack, task_id, parts, pids))


def partitions_bench(rows: int) -> None:
    """The ``--partitions`` runs (:data:`PARTITION_RUNS`), one line each."""
    first = None
    for parts, workers in PARTITION_RUNS:
        seconds, rss, done, cpu, others, (chains, writer) = partitions_run(parts, workers, rows)
        first = first or seconds
        print(json.dumps({"bench": "partitions", "format": "csv", "partitions": parts,
                          "workers": workers, "rows": done, "page_size": PARTITION_PAGE,
                          "delay_ms": PARTITION_DELAY_MS, "seconds": round(seconds, 2),
                          "speedup": round(first / seconds, 2), "target": 6.0 if parts > 1
                          else None, "peak_rss_mb": round(rss, 1),
                          "workers_cpu_s": round(sum(cpu), 2),
                          "worker_cpu_s": [round(c, 2) for c in cpu],
                          "worker_chains": chains, "writer": writer,
                          "others_cpu_s": {n: round(c, 2) for n, c in others.items()}}),
              flush=True)


#: ``--flights-partitions``: partitions of the split run, and its workers.
FLIGHTS_PARTS, FLIGHTS_WORKERS = 4, 2


def flights_parts_run(stack: Stack, pids: list[int], fmt: str, parts: int,
                      user: str) -> float:
    """One flights export of ``fmt`` in ``parts`` partitions on ``stack``;
    prints its line, returns its seconds from POST to SUCCESS."""
    spec = flights_spec(f"{stack.demo_data_api}/data", fmt)
    spec["userId"] = user
    spec["dataConfig"]["pageSize"] = PAGE_SIZE
    if parts > 1:
        spec["dataConfig"]["split"] = {"field": "id", "from": 0, "to": 336_776, "parts": parts}
    for pid in pids:
        reset_hwm(pid)
    others0 = {n: cpu_seconds(p) for n, p in stack_pids(stack).items()}
    c0, t0 = [cpu_seconds(p) for p in pids], time.perf_counter()
    task = wait(stack, CLIENT.post(f"{stack.api_url}/export/tasks", json=spec)
                .json()["data"]["taskId"], fmt)
    seconds = time.perf_counter() - t0
    print(json.dumps({"bench": "flights_partitions", "format": fmt, "partitions": parts,
                      "workers": len(pids), "page_size": PAGE_SIZE,
                      "rows": task["exportedRows"], "seconds": round(seconds, 2),
                      "workers_cpu_s": [round(cpu_seconds(p) - c, 2) for p, c in zip(pids, c0)],
                      "others_cpu_s": {n: round(cpu_seconds(p) - others0[n], 2)
                                       for n, p in stack_pids(stack).items()},
                      "peak_rss_mb": round(max(vm_hwm_mb(p) for p in pids), 1)}), flush=True)
    return seconds


def flights_partitions(formats: list[str], repeat: int) -> None:
    """The ``--flights-partitions`` runs (module docstring) on one stack of
    :data:`FLIGHTS_WORKERS` workers, warmed up with one run per format."""
    took: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp, bench_stack(tmp, FLIGHTS_WORKERS) as stack:
        pids = warmed(stack, FLIGHTS_WORKERS)
        for fmt in formats:  # warm-up: each writer's imports load on both workers
            flights_parts_run(stack, pids, fmt, FLIGHTS_PARTS, "warm-up")
        for r in range(repeat):
            for fmt in formats:
                for parts in (1, FLIGHTS_PARTS):
                    took.setdefault((fmt, parts), []).append(
                        flights_parts_run(stack, pids, fmt, parts, f"bench-{r}-{parts}"))
    for fmt in formats:
        one, four = took[fmt, 1], took[fmt, FLIGHTS_PARTS]
        print(json.dumps({"bench": "flights_partitions_ratio", "format": fmt, "runs": repeat,
                          "workers": FLIGHTS_WORKERS, "partitions": FLIGHTS_PARTS,
                          "one_s": round(statistics.median(one), 2),
                          "four_s": round(statistics.median(four), 2),
                          "ratio": round(statistics.median(a / b for a, b in zip(one, four)), 2)}),
              flush=True)


def baseline(kind: str, fmt: str, limit: int) -> tuple[float, float]:
    """One bare write in a fresh process: (seconds incl. loading the table,
    seconds loading it)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", BASELINE, fmt, kind, str(limit),
                              f"{tmp}/out.{fmt}"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    line(kind, fmt, limit, res["seconds"], res["peak_rss_mb"], res["cpu_s"], res["load_s"])
    return res["seconds"], res["load_s"]


#: Issue 12's targets: pipeline seconds over the bare writer's.
TARGETS = {"csv": 2.0, "parquet": 2.0, "xlsx": 0.3}
BARE = {"csv": "bare_csv", "parquet": "bare_pyarrow_parquet", "xlsx": "bare_xlsxwriter",
        "jsonl": None}


def main() -> None:
    global PAGE_SIZE
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--formats", default="xlsx,csv,parquet")
    parser.add_argument("--concurrent", type=int, default=10,
                        help="csv exports from as many users at once (0: skip)")
    parser.add_argument("--pandas", action="store_true", help="also the pandas baselines")
    parser.add_argument("--page-size", type=int, default=PAGE_SIZE,
                        help="rows per page the exports ask for (1..10,000)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each pipeline export and baseline; ratios of the medians")
    parser.add_argument("--workers", default="1,2",
                        help="worker counts of the concurrent runs")
    parser.add_argument("--floor", action="store_true",
                        help="only the floor and Plait over it, per --shapes (csv, parquet)")
    parser.add_argument("--shapes", default="typed,contract,none",
                        help="column shapes of the --floor exports: typed, contract, none")
    parser.add_argument("--partitions", action="store_true",
                        help="only the partitions bench (1 vs 8 partitions, seq rows)")
    parser.add_argument("--flights-partitions", action="store_true",
                        help="only flights in 1 vs 4 partitions on 2 workers (xlsx, csv)")
    args = parser.parse_args()
    if args.partitions:
        partitions_bench(args.limit or PARTITION_ROWS)
        return
    PAGE_SIZE = args.page_size
    formats = [f for f in args.formats.split(",") if f and f != "none"]
    if args.flights_partitions:
        flights_partitions([f for f in formats if f in ("xlsx", "csv")] or ["xlsx", "csv"],
                           args.repeat)
        return
    if args.floor:
        floor_rounds([f for f in formats if f in ("csv", "parquet")] or ["csv", "parquet"],
                     args.shapes.split(","), args.limit, args.repeat)
        return
    took, bares = rounds(formats, args.limit, args.repeat) if formats else ({}, {})
    rows = args.limit or 336_776
    for fmt, runs in bares.items():
        bare = statistics.median(s for s, _ in runs)
        write = statistics.median(s - load for s, load in runs)
        mid = statistics.median(took[fmt])
        print(json.dumps({"bench": "ratio", "format": fmt, "runs": args.repeat,
                          "pipeline_s": round(mid, 2), "baseline": BARE[fmt],
                          "baseline_s": round(bare, 2), "ratio": round(mid / bare, 2),
                          "target": TARGETS[fmt], "baseline_write_s": round(write, 2),
                          "ratio_to_write_only": round(mid / write, 2)}), flush=True)
        if args.pandas and fmt != "parquet":
            baseline("pandas", fmt, rows)
    counts = [int(n) for n in args.workers.split(",")]
    if args.concurrent and counts != [1, 2]:
        for n in counts:
            concurrent(n, args.concurrent, args.limit)
    elif args.concurrent:
        one = concurrent(1, args.concurrent, args.limit)
        two = concurrent(2, args.concurrent, args.limit)
        print(json.dumps({"bench": "scaling", "format": "csv", "tasks": args.concurrent,
                          "tasks_per_min_1": round(one, 2), "tasks_per_min_2": round(two, 2),
                          "ratio": round(two / one, 2)}), flush=True)


if __name__ == "__main__":
    main()
