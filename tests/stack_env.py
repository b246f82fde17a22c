"""Isolation of test stacks: own topic names, consumer group and Redis keys."""
from __future__ import annotations

import time
import uuid
from typing import Any, Callable

import redis

from ops.stack import Stack


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


def wait_for(check: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    """Poll ``check`` every ``every`` seconds until it returns something truthy
    (returned). Tests that race the pipeline wait for the condition they check
    this way; fails the test naming ``what`` and the last value seen when
    ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
