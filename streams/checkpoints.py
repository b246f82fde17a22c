"""Per-task progress markers in Redis that make redelivered commands harmless.

At-least-once delivery (docs/kafka-rules.md #1) means any command may arrive twice.
A handler checks its marker first, does its work, sends its events (acked by
the broker) and only then sets the marker; a crash in between repeats work
whose effects are idempotent (shards overwrite themselves, lifecycle repeats
are ignored) and a duplicate next command is skipped here.

Key: ``plait.keys.checkpoint``, a hash with ``admitted``, ``fetched`` (last
fetched seq), ``next_seq``, ``next_ctx``, ``rows_before``, ``finalized``,
``request``, ``last_seq``, ``redrives``, ``absorbed``, ``fetcher`` (the worker
whose in-process fetch chain recorded the last page); for the page writer
(``streams.shards``): ``partitions`` and ``end:<partition>`` (a partition's
last seq, recorded before its last page's shard), ``ends`` (JSON list: each
partition's last seq, recorded once every page is in the file) and
``missing`` (JSON ``{"page": [partition, seq], "since": epoch seconds}``: the
first page missing while later pages of its partition arrived).
"""
from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis

from plait import keys as K

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
        """All markers of a task (strings)."""
        raw = await self.redis.hgetall(self._key(task_id))
        return {k.decode(): v.decode() for k, v in raw.items()}

    async def set(self, task_id: str, **fields: Any) -> None:
        """Set markers (values JSON-encoded when not str/int)."""
        enc = {k: v if isinstance(v, (str, int)) else json.dumps(v) for k, v in fields.items()}
        key = self._key(task_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=enc)
            pipe.expire(key, TTL)
            await pipe.execute()

    async def field(self, task_id: str, name: str) -> str | None:
        """One marker of a task (a string), None when absent."""
        raw = await self.redis.hget(self._key(task_id), name)
        return raw.decode() if raw is not None else None

    async def clear(self, task_id: str, *fields: str) -> None:
        """Remove markers (absent ones are ignored)."""
        await self.redis.hdel(self._key(task_id), *fields)

    async def fetched_seq(self, task_id: str) -> int:
        """The last seq whose fetch completed, -1 when none."""
        raw = await self.redis.hget(self._key(task_id), "fetched")
        return int(raw) if raw is not None else -1

    async def count(self, task_id: str, field: str) -> int:
        """Add one to a counter marker (e.g. ``absorbed`` duplicate commands)."""
        return await self.redis.hincrby(self._key(task_id), field, 1)
