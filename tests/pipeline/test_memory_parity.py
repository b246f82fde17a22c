"""The in-memory members of streams.memory keep the contracts of the Redis
ones (real Redis, no broker): the same calls give the same answers, so unit
tests on the memory members say something about the worker."""
from __future__ import annotations

import time
import uuid

import pytest
import redis
import redis.asyncio as aioredis

from plait.clock import utcnow_iso
from plait.events import ExportRequested, Lifecycle
from plait.limits import Limits
from plait.projection import Projection
from plait.settings import Settings
from plait.spec import ExportSpec
from streams.checkpoints import Checkpoints
from streams.memory import MemoryCheckpoints, MemoryProjection, MemorySlots, MemoryWorkers
from streams.slots import Slots
from streams.workers import Workers

LIMITS = Limits.model_validate({"global": 2, "perSysCode": 1, "sysCodes": {"g": {"tier": "gold"}}})


def request(task_id: str, sys_code: str, timeout: float = 300) -> ExportRequested:
    s = ExportSpec.model_validate({"sysCode": sys_code, "bizType": "b", "userId": "u",
                                   "dataConfig": {"dataApiUrl": "http://127.0.0.1:9/d"},
                                   "jobConfig": {"timeout": timeout}})
    return ExportRequested(taskId=task_id, spec=s, fingerprint=s.fingerprint(),
                           requestedAt=utcnow_iso())


@pytest.fixture
async def both():
    """(redis members, memory members) under a fresh prefix."""
    settings = Settings()
    prefix = f"plait-test-{uuid.uuid4().hex[:10]}"
    client = aioredis.Redis.from_url(settings.redis_url)
    real = (Checkpoints(client, prefix), Projection(client, prefix), Slots(client, prefix, LIMITS),
            Workers(client, prefix))
    fake = (MemoryCheckpoints(), MemoryProjection(), MemorySlots(LIMITS), MemoryWorkers())
    yield real, fake
    sync = redis.Redis.from_url(settings.redis_url)
    for key in sync.scan_iter(match=f"{prefix}:*", count=1000):
        sync.delete(key)
    await client.aclose()


async def test_checkpoints_agree(both):
    outcomes = []
    for ckpt, *_ in both:
        await ckpt.set("t", fetched=3, next_ctx={"a": [1]}, request="{}")
        n = [await ckpt.count("t", "absorbed") for _ in range(2)]
        outcomes.append((await ckpt.get("t"), await ckpt.fetched_seq("t"),
                         await ckpt.fetched_seq("none"), await ckpt.get("none"), n))
    assert outcomes[0] == outcomes[1]


async def test_projection_agrees(both):
    outcomes = []
    for _, proj, *_ in both:
        seen = []
        for task_id in ("a", "b"):
            seen.append(await proj.apply(Lifecycle(taskId=task_id, status="CREATED",
                                                   sysCode="s", userId="u",
                                                   at="2026-01-01T00:00:0%sZ" % len(seen))))
        seen.append(await proj.apply(Lifecycle(taskId="a", status="RUNNING",
                                               at="2026-01-01T00:00:05Z")))
        seen.append(await proj.apply(Lifecycle(taskId="a", status="RUNNING",
                                               at="2026-01-01T00:00:05Z")))
        seen.append(await proj.apply(Lifecycle(taskId="b", status="CANCELLED",
                                               at="2026-01-01T00:00:06Z")))
        seen.append(await proj.apply(Lifecycle(taskId="b", status="RUNNING")))  # too late
        outcomes.append((seen, await proj.active(), await proj.status("b"),
                         await proj.get("a"), await proj.get("none")))
    assert outcomes[0] == outcomes[1]


async def test_slots_agree(both):
    outcomes = []
    for _, _, slots, _ in both:
        now = time.time()
        order = []
        for i in range(3):
            for tenant in ("s", "g", "x"):
                await slots.enqueue(request(f"{tenant}{i}", tenant, timeout=10))
        await slots.enqueue(request("s0", "s", timeout=10))  # idempotent
        order.append([r.taskId for r in await slots.promote(now)])
        order.append([r.taskId for r in await slots.promote(now)])
        await slots.release("s0", "s", "b", "u")
        order.append([r.taskId for r in await slots.promote(now)])
        order.append([r.taskId for r in await slots.promote(now + 10 + 61)])  # leases ran out
        outcomes.append(order)
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] and outcomes[0][1] == []


async def test_workers_agree(both):
    outcomes = []
    for *_, workers in both:
        await workers.beat("w1", 30)
        outcomes.append((await workers.alive("w1"), await workers.alive("w2"),
                         await workers.take_turn("w1", 5), await workers.take_turn("w2", 5)))
    assert outcomes[0] == outcomes[1] == (True, False, True, False)
