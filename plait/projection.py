"""The task projection in Redis (keys in ``plait.keys``), derived from ``export.lifecycle`` only, so
it can be flushed and rebuilt."""
from __future__ import annotations

import json
import time
from typing import Any, Callable

import redis.asyncio as aioredis
from redis.exceptions import WatchError

from plait import keys as K
from plait.clock import parse_iso
from plait.events import Lifecycle
from plait.lifecycle import ACTIVE, TERMINAL, apply


def n_left(ids: list[tuple[int, str]], last: tuple[int, str] | None) -> int:
    """How many of ``ids`` come after ``last`` (all of them when it is not one)."""
    return len(ids) - ids.index(last) - 1 if last in ids else len(ids)


PAGE_SLICE = 500
PAGE_SCAN_MAX = 2000


def _recent(task_id: str, seconds: float = 60.0) -> bool:
    """True when ``task_id`` (ms-time prefix, ``plait.clock.new_task_id``) is younger than
    ``seconds``."""
    try:
        return time.time() - int(task_id[:12], 16) / 1000 < seconds
    except ValueError:
        return False


class Projection:
    """Reads and folds task state in Redis; every write is a checked transition."""

    def __init__(self, redis: aioredis.Redis, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix

    def task_key(self, task_id: str) -> str:
        return K.task(self.prefix, task_id)

    def channel(self, task_id: str) -> str:
        return K.task_events(self.prefix, task_id)

    async def get(self, task_id: str) -> dict[str, Any] | None:
        raw = await self.redis.get(self.task_key(task_id))
        return json.loads(raw) if raw else None

    async def status(self, task_id: str) -> str | None:
        state = await self.get(task_id)
        return state["status"] if state else None

    async def apply(self, event: Lifecycle) -> dict[str, Any] | None:
        """Fold ``event`` into the stored state (optimistic transaction); the new state, or None
        when unchanged."""
        key = self.task_key(event.taskId)
        while True:
            async with self.redis.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(key)
                    raw = await pipe.get(key)
                    new = apply(json.loads(raw) if raw else None, event)
                    if new is None:
                        await pipe.unwatch()
                        return None
                    pipe.multi()
                    body = json.dumps(new, separators=(",", ":"))
                    pipe.set(key, body)
                    if new.get("sysCode") and new.get("userId"):
                        score = parse_iso(new["createdAt"]) * 1000
                        pipe.zadd(K.caller_tasks(self.prefix, new['sysCode']), {event.taskId: score})
                        pipe.zadd(K.user_tasks(self.prefix, new['sysCode'], new['userId']),
                                  {event.taskId: score})
                    if new["status"] in TERMINAL:
                        pipe.zrem(K.active(self.prefix), event.taskId)
                    else:
                        pipe.zadd(K.active(self.prefix),
                                  {event.taskId: parse_iso(new["createdAt"]) * 1000})
                    pipe.publish(self.channel(event.taskId), body)
                    await pipe.execute()
                    return new
                except WatchError:
                    continue

    async def page(self, sys_code: str, user_id: str | None, limit: int,
                   after: tuple[int, str] | None = None, created_from_ms: int | None = None,
                   created_to_ms: int | None = None, keep: Callable[[dict], bool] | None = None,
                   scan_max: int = PAGE_SCAN_MAX) -> tuple[list[dict[str, Any]], tuple[int, str] | None]:
        """One page of a caller's (and user's) tasks, newest first: ``(tasks, next position)``, the
        position None at the end of the range.

        Reads the index in slices (doubled while ``keep`` drops tasks, at most :data:`PAGE_SLICE`)
        between ``created_from_ms`` and ``created_to_ms`` inclusive, after ``after`` = ``(createdAt
        ms, taskId)``; stops at ``limit`` tasks or ``scan_max`` ids, so each call is bounded."""
        index = (K.user_tasks(self.prefix, sys_code, user_id) if user_id
                 else K.caller_tasks(self.prefix, sys_code))
        hi: float | int = float("inf") if created_to_ms is None else created_to_ms
        if after is not None:
            hi = min(hi, after[0])
        lo: float | int = float("-inf") if created_from_ms is None else created_from_ms
        out: list[dict[str, Any]] = []
        last, start, seen, want = after, 0, 0, limit
        while len(out) < limit and seen < scan_max:
            size, want = min(PAGE_SLICE, scan_max - seen, want), want * 2
            got = await self.redis.zrevrangebyscore(index, hi, lo, start=start, num=size,
                                                    withscores=True)
            start += len(got)
            ids = [(int(score), m.decode()) for m, score in got]
            if after is not None:  # the page before ended inside a run of equal times
                ids = [(t, i) for t, i in ids if t < after[0] or i < after[1]]
            raws = await self.redis.mget([self.task_key(i) for _, i in ids]) if ids else []
            for pos, raw in zip(ids, raws):
                seen, last = seen + 1, pos
                task = json.loads(raw) if raw else None
                if task is not None and (keep is None or keep(task)):
                    out.append(task)
                    if len(out) == limit:
                        break
            if len(got) < size and n_left(ids, last) == 0:
                return out, None  # the range is read to its end
        return out, last

    async def claim_fingerprint(self, fingerprint: str, task_id: str,
                                reuse_window: float) -> tuple[dict[str, Any] | None, bool]:
        """``(existing task, reused)``: an unfinished task with this fingerprint (False), or one
        that succeeded within ``reuse_window`` s (True); else ``(None, False)`` and ``task_id`` owns
        it."""
        key = K.fingerprint(self.prefix, fingerprint)
        ttl = max(int(reuse_window), 1) + 7 * 24 * 3600
        for _ in range(3):
            owner = await self.redis.get(key)
            if owner is None:
                if await self.redis.set(key, task_id, nx=True, ex=ttl):
                    return None, False
                continue
            state = await self.get(owner.decode())
            if state is None and _recent(owner.decode()):
                # the owner is being created right now (claimed, not yet projected)
                return {"taskId": owner.decode(), "status": "CREATED"}, False
            if state and state["status"] in ACTIVE:
                return state, False
            if (state and state["status"] == "SUCCESS" and reuse_window > 0
                    and time.time() - parse_iso(state["finishedAt"]) < reuse_window):
                return state, True
            if await self.redis.set(key, task_id, xx=True, ex=ttl):
                return None, False
        raise RuntimeError(f"fingerprint {fingerprint} is contended; try again")

    async def active(self) -> list[str]:
        """Ids of tasks not yet ended, oldest first."""
        return [i.decode() for i in await self.redis.zrange(K.active(self.prefix), 0, -1)]

    async def flush(self) -> int:
        """Delete the projection's keys (not checkpoints or slots); returns how many."""
        n = 0
        p = self.prefix
        for pattern in (K.task_pattern(p), K.task_index_pattern(p), K.active(p)):
            async for key in self.redis.scan_iter(match=pattern, count=500):
                n += await self.redis.delete(key)
        return n
