"""The ``ExportSlow`` rule in the worker: createdAt comes from the projection's
public API (``Projection.get``), the fired marker from ``plait.keys``."""
from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

from alerting.agents import AlertingService
from plait import keys as K
from plait.events import Lifecycle
from plait.settings import Settings


class DictRedis:
    """The few string commands the rule uses, in memory."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.ttl: dict[str, int] = {}

    async def get(self, key):
        return self.data.get(key)

    async def exists(self, key):
        return int(key in self.data)

    async def set(self, key, value, nx=False, ex=None):
        if nx and key in self.data:
            return None
        self.data[key] = str(value).encode()
        self.ttl[key] = ex
        return True

    async def delete(self, key):
        return int(self.data.pop(key, None) is not None)


def _service(redis: DictRedis, raised: list) -> AlertingService:
    svc = object.__new__(AlertingService)
    svc.settings = Settings(redis_prefix="unit")
    svc.config = SimpleNamespace(rules=SimpleNamespace(slow_task_after=600))
    svc.redis = redis

    async def _raise(alert, key, event_id=None):
        raised.append(alert)
    svc._raise = _raise
    return svc


def ev(status: str) -> Lifecycle:
    return Lifecycle(taskId="t9", status=status, sysCode="billing", bizType="invoices")


def test_a_slow_task_fires_once_from_its_projected_created_at_and_resolves():
    redis, raised = DictRedis(), []
    svc = _service(redis, raised)
    redis.data[K.task("unit", "t9")] = json.dumps(
        {"taskId": "t9", "status": "PROGRESS", "createdAt": "2020-01-01T00:00:00Z"}).encode()

    async def run():
        await svc._slow_task(ev("PROGRESS"))
        await svc._slow_task(ev("PROGRESS"))
        assert [a["status"] for a in raised] == ["firing"]
        assert redis.ttl[K.slow_task_marker("unit", "t9")] == 7 * 24 * 3600
        await svc._slow_task(ev("SUCCESS"))
        assert [a["status"] for a in raised] == ["firing", "resolved"]
        assert K.slow_task_marker("unit", "t9") not in redis.data

    asyncio.run(run())


def test_a_task_the_projection_does_not_know_raises_nothing():
    redis, raised = DictRedis(), []
    asyncio.run(_service(redis, raised)._slow_task(ev("PROGRESS")))
    assert raised == [] and redis.data == {}
