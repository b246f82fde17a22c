"""Concurrency slots and the fair waiting queue, atomic in Redis.

A task holds one slot in each scope it counts against (``plait.limits``):
a member of the sorted set ``plait.keys.slots`` scored by its lease expiry, so
a slot of a task whose every worker died frees itself when the lease ends.
Tasks over a limit wait in ``plait.keys.wait_queue`` (FIFO per caller); when a slot
frees, the caller with the lowest stride pass starts its oldest task next, so
one tenant's flood cannot starve the others.
"""
from __future__ import annotations

import time

import redis.asyncio as aioredis

from plait import keys as K
from plait.events import ExportRequested
from plait.limits import Limits

#: Start a waiting task atomically: still waiting, and a slot free in every scope.
#: KEYS: slot sets (``K.slots``)..., wait set (``K.wait_queue``). ARGV: now, lease_until, task id, limits...
#: Returns 1 started, 0 a scope is full, -1 no longer waiting.
_TRY_START = """
local wait = KEYS[#KEYS]
if redis.call('ZSCORE', wait, ARGV[3]) == false then return -1 end
for i = 1, #KEYS - 1 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', ARGV[1])
  if redis.call('ZSCORE', KEYS[i], ARGV[3]) == false
     and redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[3 + i]) then return 0 end
end
for i = 1, #KEYS - 1 do redis.call('ZADD', KEYS[i], ARGV[2], ARGV[3]) end
redis.call('ZREM', wait, ARGV[3])
return 1
"""

#: Slack added to a task's timeout for its slot lease, seconds.
LEASE_SLACK = 60.0


class Slots:
    """Slots, waiting queues and stride passes under a Redis key prefix."""

    def __init__(self, redis: aioredis.Redis, prefix: str, limits: Limits) -> None:
        self.redis = redis
        self.p = prefix
        self.limits = limits
        self._try_start = redis.register_script(_TRY_START)

    def _scopes(self, req: ExportRequested) -> list[tuple[str, int]]:
        s = req.spec
        return self.limits.scopes(s.sysCode, s.bizType, s.userId)

    async def enqueue(self, req: ExportRequested) -> None:
        """Put a task at the end of its caller's queue (idempotent)."""
        sys_code = req.spec.sysCode
        passes = await self.redis.hgetall(K.passes(self.p))
        waiting = await self.redis.smembers(K.waiting(self.p))
        floor = min((float(passes.get(s, 0)) for s in waiting), default=0.0)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zadd(K.wait_queue(self.p, sys_code), {req.taskId: time.time()}, nx=True)
            pipe.hset(K.wait_requests(self.p), req.taskId, req.model_dump_json())
            pipe.sadd(K.waiting(self.p), sys_code)
            if float(passes.get(sys_code.encode(), 0)) < floor:
                pipe.hset(K.passes(self.p), sys_code, floor)
            await pipe.execute()

    async def promote(self, now: float | None = None) -> list[ExportRequested]:
        """Start as many waiting tasks as the limits allow, fairest first.
        Returns the requests of the tasks started (by this call only)."""
        now = now or time.time()
        started: list[ExportRequested] = []
        while True:
            heads = await self._heads()
            for _, sys_code, task_id in heads:
                raw = await self.redis.hget(K.wait_requests(self.p), task_id)
                if raw is None:
                    await self.redis.zrem(K.wait_queue(self.p, sys_code), task_id)
                    break
                req = ExportRequested.model_validate_json(raw)
                scopes = self._scopes(req)
                keys = [K.slots(self.p, name) for name, _ in scopes]
                lease = now + req.spec.jobConfig.timeout + LEASE_SLACK
                result = await self._try_start(
                    keys=[*keys, K.wait_queue(self.p, sys_code)],
                    args=[now, lease, task_id, *[limit for _, limit in scopes]])
                if result == 1:
                    await self.redis.hdel(K.wait_requests(self.p), task_id)
                    await self.redis.hincrbyfloat(K.passes(self.p), sys_code,
                                                  1 / self.limits.weight(sys_code))
                    started.append(req)
                    break
                if result == -1:
                    break
            else:
                return started

    async def _heads(self) -> list[tuple[float, str, str]]:
        """(pass, sysCode, oldest task) of every caller with waiting tasks, by pass."""
        heads = []
        for raw in await self.redis.smembers(K.waiting(self.p)):
            sys_code = raw.decode()
            head = await self.redis.zrange(K.wait_queue(self.p, sys_code), 0, 0)
            if not head:
                await self.redis.srem(K.waiting(self.p), sys_code)
                continue
            pass_ = float(await self.redis.hget(K.passes(self.p), sys_code) or 0)
            heads.append((pass_, sys_code, head[0].decode()))
        return sorted(heads)

    async def release(self, task_id: str, sys_code: str, biz_type: str, user_id: str) -> None:
        """Free a task's slots and drop it from its queue (idempotent)."""
        scopes = self.limits.scopes(sys_code, biz_type, user_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            for name, _ in scopes:
                pipe.zrem(K.slots(self.p, name), task_id)
            pipe.zrem(K.wait_queue(self.p, sys_code), task_id)
            pipe.hdel(K.wait_requests(self.p), task_id)
            await pipe.execute()
