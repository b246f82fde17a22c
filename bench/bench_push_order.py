"""Benchmark: the push page writer (``streams.shards.write_shard``) on
in-memory members, 2 partitions x 100 pages of 500 rows written in order,
shuffled and reversed: wall time and the traced (tracemalloc) peak while
writing, which stays flat because pages ahead wait as shards, not in memory.

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/bench_push_order.py``
"""
from __future__ import annotations

import asyncio, random, sys, time, tracemalloc
sys.path.insert(0, "tests/export_unit")  # export_harness.running
import httpx
from plait.limits import Limits
from plait.settings import Settings
from plait.topics import Topics
from streams.context import Context
from streams.memory import (MemoryCheckpoints, MemoryProjection, MemorySlots, MemoryStore,
                            MemoryWorkers)
from export_harness import running
from plait.events import PageBatch
from plait.spec import ExportSpec
from streams.shards import write_shard, after_write_shard

SPEC = ExportSpec.model_validate({"sysCode": "s", "bizType": "b", "userId": "u",
    "dataConfig": {"mode": "push"}, "documentConfig": {"fileName": "x", "fileFormat": "csv"}})
P, N, R = 2, 100, 500

def ctx():
    lim = Limits()
    return Context(Settings(redis_prefix="b"), Topics("b."), MemoryStore(), MemoryProjection(),
                   httpx.AsyncClient(), MemoryCheckpoints(), MemorySlots(lim), MemoryWorkers(), worker_id="w")

async def run(order):
    c = ctx(); await running(c, "t", SPEC)
    pages = {(p, s): PageBatch(taskId="t", seq=s, partition=p, partitions=P, rowCount=R, isLast=s == N - 1, spec=SPEC,
             rows=[{"id": (p * N + s) * R + i, "name": f"n{i}"} for i in range(R)]) for p in range(P) for s in range(N)}
    tracemalloc.start(); t = time.perf_counter()
    for k in order:
        e = await write_shard(c, pages[k]); await after_write_shard(c, pages[k], e)
    dt = time.perf_counter() - t; peak = tracemalloc.get_traced_memory()[1]; tracemalloc.stop()
    return dt, peak

keys = [(p, s) for p in range(P) for s in range(N)]
shuf = keys[:]; random.Random(1).shuffle(shuf)
rev = keys[::-1]
for name, o in [("in order", keys), ("shuffled", shuf), ("reversed", rev)]:
    dt, peak = asyncio.run(run(o))
    print(f"{name}: {dt:.2f} s for {P*N} pages of {R} rows; traced peak {peak/1e6:.1f} MB")
