"""Worker liveness and the sweeper's turn, in Redis (keys: ``plait.keys``).

Every worker heartbeats (``beat``); the sweeper re-drives a stale task only
when the worker that last reported on it stopped beating (``alive``). Every
worker runs the sweeper on a timer; ``take_turn`` lets one sweep per interval.
"""
from __future__ import annotations

import redis.asyncio as aioredis

from plait.keys import sweeper_key, worker_key


class Workers:
    """Liveness keys and the sweeper lock under a Redis key prefix."""

    def __init__(self, redis: aioredis.Redis, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix

    async def beat(self, worker_id: str, ttl: float) -> None:
        """Mark ``worker_id`` alive for ``ttl`` seconds (at least 1)."""
        await self.redis.set(worker_key(self.prefix, worker_id), 1, ex=max(1, int(ttl)))

    async def alive(self, worker_id: str) -> bool:
        """Whether ``worker_id``'s liveness key is still there."""
        return bool(await self.redis.exists(worker_key(self.prefix, worker_id)))

    async def take_turn(self, worker_id: str, interval: float) -> bool:
        """True when this worker got the sweeper lock (held 0.9 x ``interval``
        seconds, so the next interval's sweep is free to take it)."""
        return bool(await self.redis.set(sweeper_key(self.prefix), worker_id, nx=True,
                                         px=max(1, int(interval * 900))))
