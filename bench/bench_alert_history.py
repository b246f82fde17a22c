"""Benchmark: one storm batch's alert history (``alerting.history``): 20,000
``outcome`` entries on 20,000 fingerprints built (``redis_writes``) and written
in one pipeline (``write``) to the local Redis; prints both times and the
memory of one key (``MEMORY USAGE``). Keys under a throwaway prefix, deleted.

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/bench_alert_history.py``
"""
from __future__ import annotations

import asyncio
import time
import uuid

import redis.asyncio as aioredis

from alerting import history
from plait import keys as K

N = 20_000


async def main() -> None:
    r = aioredis.Redis.from_url("redis://127.0.0.1:6379/0")
    prefix = f"bench-hist-{uuid.uuid4().hex[:6]}"
    entries = [(f"{i:016x}", {"kind": "outcome", "time": "2026-12-04T20:00:00Z",
                              "outcome": "delivered", "rawId": f"abc:{i}", "messageId": "oncall-7"})
               for i in range(N)]
    t0 = time.perf_counter()
    writes = history.redis_writes(prefix, entries)
    t1 = time.perf_counter()
    await history.write(r, writes, 3600, 200)
    t2 = time.perf_counter()
    mem = await r.memory_usage(K.alert_history(prefix, f"{5:016x}"))
    print(f"{N} entries: build {t1 - t0:.3f} s, write {t2 - t1:.3f} s, one key {mem} B")
    await r.delete(*writes)
    await r.aclose()


if __name__ == "__main__":
    asyncio.run(main())
