"""Fixtures of the security tests: a real Redis with a key prefix per test."""
from __future__ import annotations

import uuid

import pytest
import redis.asyncio as aioredis

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
async def redis_prefix():
    """``(client, prefix)``: a redis.asyncio client and a key prefix unique to
    this test; only keys under the prefix are deleted afterwards."""
    client = aioredis.Redis.from_url(REDIS_URL, socket_timeout=5)
    try:
        await client.ping()
    except Exception as exc:  # the real-service lane is mandatory: fail, never skip
        await client.aclose()
        pytest.fail(f"the replay tests need a real Redis at {REDIS_URL}: {exc}")
    prefix = f"plait-sectest-{uuid.uuid4().hex[:12]}"
    yield client, prefix
    async for key in client.scan_iter(match=f"{prefix}:*", count=500):
        await client.delete(key)
    await client.aclose()
