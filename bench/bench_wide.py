"""Wide-table export benchmark (case E16 of docs/fidelity.md).

For each configuration, a fresh child process (multiprocessing ``spawn``)
generates the rows page by page (1,000 rows a page, never the whole table),
normalizes each page with ``rows_to_batch`` and streams it into the writer
from ``open_writer``. The child reports its own peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``, KiB on Linux, printed in MiB).

Prints one JSON object per line:
``{"bench": "wide", "format", "rows", "cols", "seconds", "peak_rss_mb", "file_mb"}``
and first one line ``{"bench": "normalize", ...}`` with the time of
``rows_to_batch`` for a 1,000 x 20 page (milliseconds, median of 50 runs).

Usage: ``python bench/bench_wide.py [--quick]`` (``--quick``: 5,000 rows only).
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

PAGE = 1_000
CONFIGS = [(5_000, 300), (100_000, 300), (100_000, 200)]
FORMATS = ["csv", "xlsx"]


def _pages(rows: int, cols: int):
    """Pages of ``{"c<i>": "v<i>"}`` rows; one page alive at a time."""
    keys = [f"c{i}" for i in range(cols)]
    values = [f"v{i}" for i in range(cols)]
    for start in range(0, rows, PAGE):
        yield [dict(zip(keys, values)) for _ in range(min(PAGE, rows - start))]


def _child(fmt: str, rows: int, cols: int, conn) -> None:
    from plait.spec import DocumentConfig
    from sinks.values import rows_to_batch
    from sinks.writers import open_writer

    doc = DocumentConfig(fileFormat=fmt, fileName="wide")
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        writer = None
        for page in _pages(rows, cols):
            batch, _ = rows_to_batch(page, doc)
            writer = writer or open_writer(Path(tmp), batch.schema, doc)
            writer.write_batch(batch)
        report = writer.close()
        seconds = time.perf_counter() - started
        size = report.path.stat().st_size
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    conn.send({"bench": "wide", "format": fmt, "rows": rows, "cols": cols,
               "seconds": round(seconds, 2), "peak_rss_mb": round(peak_kib / 1024, 1),
               "file_mb": round(size / 2**20, 1)})
    conn.close()


def run_one(fmt: str, rows: int, cols: int) -> dict:
    """Run one configuration in a fresh spawned process; its result dict."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(fmt, rows, cols, child))
    proc.start()
    child.close()
    result = parent.recv()
    proc.join()
    if proc.exitcode != 0:
        raise RuntimeError(f"benchmark child failed with exit code {proc.exitcode}")
    return result


def normalize_page_ms(runs: int = 50) -> dict:
    """Median milliseconds of ``rows_to_batch`` on a 1,000 x 20 mixed page."""
    from plait.spec import DocumentConfig
    from sinks.values import rows_to_batch

    rows = [{"id": i, "dep": i * 1.5 if i % 3 else None, "ok": i % 2 == 0,
             "attrs": {"k": i}, **{f"c{j}": f"v{i}-{j}" for j in range(16)}}
            for i in range(PAGE)]
    doc = DocumentConfig()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        rows_to_batch(rows, doc)
        times.append((time.perf_counter() - started) * 1000)
    return {"bench": "normalize", "rows": PAGE, "cols": 20,
            "ms_per_page": round(statistics.median(times), 2)}


def main(argv: list[str]) -> None:
    """Print the normalize line, then one line per (config, format)."""
    # children allocate Arrow memory as a worker does (ops.cli.lean_worker)
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"
    print(json.dumps(normalize_page_ms()), flush=True)
    configs = CONFIGS[:1] if "--quick" in argv else CONFIGS
    for rows, cols in configs:
        for fmt in FORMATS:
            print(json.dumps(run_one(fmt, rows, cols)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
