"""pdf and docx writers at their row caps: seconds and peak RSS while
writing (docs/perf-notes.md, "Document formats").

Each case runs in a fresh child process: the flights rows (12 of the 19
columns, 8,192-row batches) are built first, VmHWM is reset
(``/proc/self/clear_refs``), then the writer writes them and closes. Prints
one JSON object per case: ``{"format", "rows", "cols", "seconds",
"peak_rss_mb", "rss_before_mb", "bytes"}``.

Usage: ``python bench/bench_documents.py [--rows-pdf 10000] [--rows-docx 20000]``
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import tempfile
import time
from pathlib import Path


def _vm(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return 0.0


def _case(fmt: str, rows: int, out: mp.Queue) -> None:
    from plait.documents import DocumentCaps
    from plait.spec import DocumentConfig
    from producers.demo_api import flights
    from sinks.writers import WRITERS

    table = flights().slice(0, rows)
    table = table.select(table.column_names[:12])
    batches = table.to_batches(max_chunksize=8192)
    Path("/proc/self/clear_refs").write_text("5")
    before = _vm("VmRSS")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"f.{fmt}"
        caps = DocumentCaps(fmt, 12, rows, 200)
        t0 = time.perf_counter()
        writer = WRITERS[fmt](path, table.schema, DocumentConfig(fileFormat=fmt), caps)
        for batch in batches:
            writer.write_batch(batch)
        writer.close()
        seconds = time.perf_counter() - t0
        out.put({"format": fmt, "rows": rows, "cols": 12, "seconds": round(seconds, 2),
                 "peak_rss_mb": round(_vm("VmHWM"), 1), "rss_before_mb": round(before, 1),
                 "bytes": path.stat().st_size})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows-pdf", type=int, default=10_000)
    ap.add_argument("--rows-docx", type=int, default=20_000)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    for fmt, rows in (("pdf", args.rows_pdf // 10), ("pdf", args.rows_pdf),
                      ("docx", args.rows_docx // 10), ("docx", args.rows_docx)):
        q = ctx.Queue()
        p = ctx.Process(target=_case, args=(fmt, rows, q))
        p.start()
        print(json.dumps(q.get()), flush=True)
        p.join()


if __name__ == "__main__":
    main()
