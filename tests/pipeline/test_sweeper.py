"""The sweeper's decisions against the real Redis (no broker needed): stale
tasks are re-driven from their checkpoint, a task that never progresses ends
FAILED instead of looping, overdue tasks end TIMEOUT, and fair promotion."""
from __future__ import annotations

import time
import uuid

import pytest
import redis

from plait.clock import utcnow_iso
from plait.events import ExportRequested, FetchPage, FinalizeRequested, Lifecycle
from plait.keys import worker_key
from plait.limits import Limits
from plait.settings import Settings
from plait.spec import ExportSpec
from streams.context import build_context
from streams.partitions import claim
from streams.sweeper import redrive, sweep


def spec(sys_code: str = "s", timeout: float = 300) -> ExportSpec:
    return ExportSpec.model_validate({
        "sysCode": sys_code, "bizType": "b", "userId": "u",
        "dataConfig": {"dataApiUrl": "http://127.0.0.1:9/data"},
        "jobConfig": {"timeout": timeout}})


@pytest.fixture
async def ctx(tmp_path):
    prefix = f"plait-test-{uuid.uuid4().hex[:10]}"
    settings = Settings(redis_prefix=prefix, storage_url=f"file://{tmp_path}",
                        stale_after_seconds=5, max_redrives=3,
                        limits=Limits.model_validate({"global": 1,
                                                      "sysCodes": {"gold": {"tier": "gold"}}}))
    context = build_context(settings)
    yield context
    client = redis.Redis.from_url(settings.redis_url)
    for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(key)
    await context.http.aclose()


def request(task_id: str, s: ExportSpec) -> ExportRequested:
    return ExportRequested(taskId=task_id, spec=s, fingerprint=s.fingerprint(),
                           requestedAt=utcnow_iso())


async def test_stale_task_is_redriven_from_its_cursor_then_failed_when_stuck(ctx):
    # given a task whose pages up to 6 were fetched, cursor recorded
    req = request("t1", spec())
    await ctx.checkpoints.set("t1", request=req.model_dump_json(), fetched=6, next_seq=7,
                              next_ctx={"lastId": 700}, rows_before=700)
    # when the sweeper re-drives it
    emits = await redrive(ctx, "t1")
    # then it re-emits the FetchPage of page 7 with the recorded cursor (+ a heartbeat)
    cmd = [e.payload for e in emits if isinstance(e.payload, FetchPage)][0]
    assert (cmd.seq, cmd.runtimeContext, cmd.rowsBefore, cmd.attempt) == (7, {"lastId": 700}, 700, 1)
    # while no worker claims it, it is sent again without counting
    again = [e.payload for e in await redrive(ctx, "t1") if isinstance(e.payload, FetchPage)]
    assert [c.attempt for c in again] == [1]
    # and after max_redrives claimed without progress, it ends FAILED instead of looping
    for n in (2, 3):
        await claim(ctx, cmd)
        [cmd] = [e.payload for e in await redrive(ctx, "t1") if isinstance(e.payload, FetchPage)]
        assert cmd.attempt == n
    await claim(ctx, cmd)
    final = await redrive(ctx, "t1")
    assert len(final) == 1 and final[0].payload.status == "FAILED"
    assert "re-driven 3 times at fetch:7" in final[0].payload.errorMessage


async def test_progress_resets_the_redrive_count(ctx):
    req = request("t2", spec())
    await ctx.checkpoints.set("t2", request=req.model_dump_json(), next_seq=3, fetched=2)
    for _ in range(3):
        [cmd] = [e.payload for e in await redrive(ctx, "t2") if isinstance(e.payload, FetchPage)]
        await claim(ctx, cmd)
    await ctx.checkpoints.set("t2", next_seq=4, fetched=3)  # the task moved on
    emits = await redrive(ctx, "t2")
    assert [e.payload.seq for e in emits if isinstance(e.payload, FetchPage)] == [4]


async def test_all_pages_written_redrives_the_finalizer(ctx):
    req = request("t3", spec())
    await ctx.checkpoints.set("t3", request=req.model_dump_json(), last_seq=9, truncated=1)
    cmds = [e.payload for e in await redrive(ctx, "t3")
            if isinstance(e.payload, FinalizeRequested)]
    assert cmds and cmds[0].lastSeq == 9 and cmds[0].truncated is True
    await ctx.checkpoints.set("t3", finalized=1)
    assert await redrive(ctx, "t3") == []


async def test_sweep_times_out_overdue_tasks_and_redrives_stale_ones(ctx):
    now = time.time()
    for task_id, s in (("old", spec(timeout=1)), ("stale", spec())):
        await ctx.projection.apply(Lifecycle(taskId=task_id, status="CREATED", sysCode="s",
                                             userId="u", timeout=s.jobConfig.timeout,
                                             at="2020-01-01T00:00:00Z" if task_id == "old" else utcnow_iso()))
        await ctx.projection.apply(Lifecycle(taskId=task_id, status="RUNNING",
                                             at=utcnow_iso()))
        await ctx.checkpoints.set(task_id, request=request(task_id, s).model_dump_json())
    emits, ended = await sweep(ctx, now=now + 30)
    assert ended == ["old"]
    by_task = {(e.key, getattr(e.payload, "status", type(e.payload).__name__)) for e in emits}
    assert ("old", "TIMEOUT") in by_task and ("stale", "FetchPage") in by_task
    timeout = next(e.payload for e in emits if e.key == "old")
    assert (timeout.sysCode, timeout.userId) == ("s", "u")  # alert rules group by them


async def test_fair_promotion_weights_tiers_and_keeps_fifo_per_tenant(ctx):
    # given one global slot and many waiting tasks of a standard and a gold tenant
    order = []
    for i in range(6):
        for tenant in ("std", "gold"):
            await ctx.slots.enqueue(request(f"{tenant}-{i}", spec(tenant)))
    # when slots free one after another
    for _ in range(9):
        started = await ctx.slots.promote()
        order.extend(r.taskId for r in started)
        for r in started:
            await ctx.slots.release(r.taskId, r.spec.sysCode, "b", "u")
    # then each tenant starts in FIFO order and gold gets about twice the starts
    gold = [t for t in order if t.startswith("gold")]
    std = [t for t in order if t.startswith("std")]
    assert gold == sorted(gold) and std == sorted(std)
    assert len(gold) >= 2 * len(std) - 2 and len(std) >= 2


async def running(ctx, task_id: str, worker_id: str) -> None:
    """A RUNNING task last reported by ``worker_id``, its request checkpointed."""
    await ctx.projection.apply(Lifecycle(taskId=task_id, status="CREATED", sysCode="s",
                                         userId="u", timeout=300, at=utcnow_iso()))
    await ctx.projection.apply(Lifecycle(taskId=task_id, status="RUNNING", workerId=worker_id,
                                         at=utcnow_iso()))
    await ctx.checkpoints.set(task_id, request=request(task_id, spec()).model_dump_json())


async def beating(ctx, worker_id: str) -> None:
    """``worker_id`` heartbeats (its key lives 30 s)."""
    await ctx.projection.redis.set(worker_key(ctx.settings.redis_prefix, worker_id), 1, ex=30)


async def test_a_busy_but_live_worker_is_not_second_guessed(ctx):
    # given a RUNNING task with a stale heartbeat, last reported by a worker
    # that is alive (it heartbeats, it is just busy with other tasks)
    await running(ctx, "busy", "w-live")
    await beating(ctx, "w-live")
    # when the sweeper looks long after the last beat
    emits, _ = await sweep(ctx, now=time.time() + 60)
    # then it leaves the task to that worker
    assert not [e for e in emits if e.key == "busy"]
    # and once that worker is gone, it re-drives
    await ctx.projection.redis.delete(worker_key(ctx.settings.redis_prefix, "w-live"))
    emits, _ = await sweep(ctx, now=time.time() + 60)
    assert any(e.key == "busy" and isinstance(e.payload, FetchPage) for e in emits)


async def test_an_unclaimed_redrive_of_the_first_page_is_sent_again(ctx):
    # given a RUNNING task whose first page was never fetched, its worker gone,
    # and the sweeper's own worker alive
    await running(ctx, "first", "w-gone")
    await beating(ctx, ctx.worker_id)
    # when the sweeper re-drives page 0 and no worker claims that re-drive
    emits, _ = await sweep(ctx, now=time.time() + 60)
    assert [(e.payload.seq, e.payload.attempt) for e in emits
            if isinstance(e.payload, FetchPage)] == [(0, 1)]
    for beat in (e.payload for e in emits if isinstance(e.payload, Lifecycle)):
        await ctx.projection.apply(beat)
    # then the next sweep past the stale time sends page 0 again, not counting it
    emits, _ = await sweep(ctx, now=time.time() + 120)
    assert [(e.payload.seq, e.payload.attempt) for e in emits
            if isinstance(e.payload, FetchPage)] == [(0, 1)]
