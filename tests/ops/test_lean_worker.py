"""``ops.cli.lean_worker``: what a worker process sets before it imports
anything (issue 12's memory budget): Arrow allocates from the system
allocator everywhere, and pandas is never imported."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = r'''
import io, json, os
os.environ.pop("ARROW_DEFAULT_MEMORY_POOL", None)
from ops.cli import lean_worker
lean_worker()
import pyarrow as pa, pyarrow.json as pj, pyarrow.parquet as pq
table = pj.read_json(io.BytesIO(b'{"a": 1, "s": "x"}\n' * 10000))
out = io.BytesIO()
pq.write_table(table, out, compression="zstd")
try:
    import pandas  # noqa: F401
    pandas_refused = False
except ModuleNotFoundError:
    pandas_refused = True
# the footer alone: pq.read_table of a Python file object can abort the
# interpreter at exit (apache/arrow#33975: its threads outlive the read)
rows = pq.read_metadata(pa.BufferReader(out.getvalue())).num_rows
print(json.dumps({"pool": pa.default_memory_pool().backend_name,
                  "mimalloc_peak_bytes": pa.mimalloc_memory_pool().max_memory(),
                  "rows": rows, "pandas_refused": pandas_refused}))
'''


def test_a_worker_allocates_arrow_memory_from_the_system_allocator_everywhere():
    # when a fresh process sets itself up as a worker, reads JSON and writes Parquet
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    got = json.loads(out.strip().splitlines()[-1])
    # then nothing came from mimalloc, not even the Parquet writer's C++ buffers
    # (which use Arrow's C++ default pool, not the one pa.set_memory_pool sets),
    # and pandas is refused
    assert got == {"pool": "system", "mimalloc_peak_bytes": 0, "rows": 10000,
                   "pandas_refused": True}
