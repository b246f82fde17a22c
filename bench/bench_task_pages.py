"""Benchmark: one page of ``GET /export/tasks`` (``Projection.page``) over
100,000 tasks of one caller in a real Redis (127.0.0.1:6379, own prefix,
dropped after): the first page, and a filter that keeps 1 task in 100.

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/bench_task_pages.py``
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid

import redis.asyncio as aioredis

from plait import keys as K
from plait.projection import Projection

TASKS = 100_000
REPEAT = 20


async def fill(r: aioredis.Redis, prefix: str) -> None:
    """``TASKS`` small task states, 1 in 100 FAILED, one per ms."""
    pipe = r.pipeline(transaction=False)
    for i in range(TASKS):
        tid = f"{i:032x}"
        state = {"taskId": tid, "status": "FAILED" if i % 100 == 0 else "SUCCESS"}
        pipe.set(K.task(prefix, tid), json.dumps(state))
        pipe.zadd(K.caller_tasks(prefix, "crm"), {tid: 1_700_000_000_000 + i})
        if i % 5000 == 4999:
            await pipe.execute()
    await pipe.execute()


async def main() -> None:
    r = aioredis.Redis.from_url("redis://127.0.0.1:6379/0")
    prefix = f"plait-pagebench-{uuid.uuid4().hex[:8]}"
    try:
        await fill(r, prefix)
        p = Projection(r, prefix)
        for name, keep in (("first page, limit 100", None),
                           ("status=FAILED (1 in 100), limit 100",
                            lambda t: t["status"] == "FAILED")):
            started = time.perf_counter()
            for _ in range(REPEAT):
                tasks, _ = await p.page("crm", None, 100, keep=keep)
            ms = (time.perf_counter() - started) / REPEAT * 1000
            print(json.dumps({"bench": name, "tasks": len(tasks), "ms_per_page": round(ms, 1)}))
    finally:
        async for key in r.scan_iter(match=K.everything(prefix), count=5000):
            await r.delete(key)
        await r.aclose()


if __name__ == "__main__":
    asyncio.run(main())
