"""Shared fixtures: a real stack (Tansu broker, Redis, workers, API, demo data
API) per test module that needs one, each with its own topic names, consumer
group and Redis key prefix, cleaned up afterwards."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis

from plait.stack import Stack


def isolated_env(**extra: str) -> dict[str, str]:
    """``PLAIT_*`` overrides giving a stack its own topics, group and Redis keys."""
    rid = uuid.uuid4().hex[:10]
    return {"PLAIT_TOPIC_PREFIX": f"test-{rid}.", "PLAIT_REDIS_PREFIX": f"plait-test-{rid}",
            "PLAIT_APP_ID": f"plait-test-{rid}", "PLAIT_FETCH_BACKOFF_SECONDS": "0.05",
            "PLAIT_LOG_LEVEL": "INFO", **extra}


def drop_redis_keys(stack: Stack) -> None:
    """Delete the Redis keys this stack's prefix owns (nothing else)."""
    prefix = stack.env.get("PLAIT_REDIS_PREFIX")
    if not prefix or not stack.env.get("PLAIT_REDIS_URL"):
        return
    client = redis.Redis.from_url(stack.env["PLAIT_REDIS_URL"])
    for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(key)


@pytest.fixture
def make_stack(tmp_path_factory):
    """Factory: ``make_stack(workers=1, **PLAIT_overrides) -> started Stack``;
    every stack made is stopped and its Redis keys dropped at teardown."""
    made: list[Stack] = []

    def make(workers: int = 1, broker_storage: str = "memory://tansu/", **extra: str) -> Stack:
        data_dir = Path(tmp_path_factory.mktemp("stack"))
        stack = Stack(data_dir, isolated_env(**extra), broker_storage)
        made.append(stack)
        return stack.start(workers=workers)

    yield make
    for stack in made:
        stack.stop()
        drop_redis_keys(stack)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """One started stack shared by the tests of a module."""
    s = Stack(Path(tmp_path_factory.mktemp("stack")), isolated_env())
    try:
        yield s.start(workers=1)
    finally:
        s.stop()
        drop_redis_keys(s)
