"""Per-task markers in Redis that make redelivered commands harmless
(docs/kafka-rules.md #1): set only after a handler's events are acked.

Hash ``plait.keys.checkpoint``: ``admitted``, ``fetched``, ``next_seq``,
``next_ctx``, ``rows_before``, ``finalized``, ``request``, ``last_seq``,
``redrives``, ``absorbed``, ``fetcher`` (``redrive@<worker>`` while a
re-drive waits for a worker to claim it), ``quota_rows``; page writer:
``partitions``, ``end:<partition>``, ``ends`` (JSON list), ``missing`` (JSON)."""
from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis

from plait import keys as K
from plait import quotas

#: Markers outlive any task by far, then expire (seconds).
TTL = 14 * 24 * 3600


class Checkpoints:
    """Idempotency markers and the last recorded cursor of each task."""

    def __init__(self, redis: aioredis.Redis, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix

    def _key(self, task_id: str) -> str:
        return K.checkpoint(self.prefix, task_id)

    async def get(self, task_id: str) -> dict[str, str]:
        raw = await self.redis.hgetall(self._key(task_id))
        return {k.decode(): v.decode() for k, v in raw.items()}

    async def set(self, task_id: str, **fields: Any) -> None:
        enc = {k: v if isinstance(v, (str, int)) else json.dumps(v) for k, v in fields.items()}
        key = self._key(task_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=enc)
            pipe.expire(key, TTL)
            await pipe.execute()

    async def field(self, task_id: str, name: str) -> str | None:
        raw = await self.redis.hget(self._key(task_id), name)
        return raw.decode() if raw is not None else None

    async def clear(self, task_id: str, *fields: str) -> None:
        await self.redis.hdel(self._key(task_id), *fields)

    async def fetched_seq(self, task_id: str) -> int:
        raw = await self.redis.hget(self._key(task_id), "fetched")
        return int(raw) if raw is not None else -1

    async def count(self, task_id: str, field: str) -> int:
        return await self.redis.hincrby(self._key(task_id), field, 1)

    async def count_page(self, task_id: str, page: str, rows: int, caller: Any = None) -> int:
        """Count page ``page`` (``<partition>:<seq>``) of ``rows`` rows once for
        the task, and against ``caller``'s daily quota when it has one
        (``plait.quotas.count_page``); the task's rows counted so far."""
        return await quotas.count_page(self.redis, self.prefix, caller, task_id, page, rows, TTL)
