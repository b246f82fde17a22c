"""Worker liveness and the sweeper's turn, in Redis (keys: ``plait.keys``)."""
from __future__ import annotations

import redis.asyncio as aioredis

from plait.keys import sweeper_key, worker_key


class Workers:
    """Liveness keys and the sweeper lock under a Redis key prefix."""

    def __init__(self, redis: aioredis.Redis, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix

    async def beat(self, worker_id: str, ttl: float) -> None:
        await self.redis.set(worker_key(self.prefix, worker_id), 1, ex=max(1, int(ttl)))

    async def alive(self, worker_id: str) -> bool:
        return bool(await self.redis.exists(worker_key(self.prefix, worker_id)))

    async def take_turn(self, worker_id: str, interval: float) -> bool:
        """Take the sweeper lock for 0.9 x ``interval`` seconds."""
        return bool(await self.redis.set(sweeper_key(self.prefix), worker_id, nx=True,
                                         px=max(1, int(interval * 900))))
