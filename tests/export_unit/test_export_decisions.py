"""The sweeper's decisions and the export runtime policy (streams.runtime) on
in-memory members: time-outs, re-drives and their bound, a live worker left
alone, fair promotion, failed handlers ending their task, detached routes
serialised per task, heartbeats of the tasks in flight. No Redis, no broker."""
from __future__ import annotations

import asyncio
import time

import pytest
from export_harness import Clock, request, running, spec
from plait import topics as T
from plait.agent import Agent
from plait.errors import PermanentError
from plait.events import FetchPage, FinalizeRequested, Lifecycle
from streams.layout import shard_key
from streams.runtime import ExportHooks, Route, Runtime
from streams.partitions import claim
from streams.sweeper import redrive, sweep

pytestmark = pytest.mark.timeout(20)


# -------------------------------------------------------------------- sweeper
async def test_an_overdue_task_times_out_and_a_stale_one_is_redriven(make_ctx):
    ctx = make_ctx()
    now = time.time()
    await running(ctx, "old", spec(timeout=1), created="2020-01-01T00:00:00Z")
    await running(ctx, "stale", spec())
    for task_id in ("old", "stale"):
        await ctx.checkpoints.set(task_id, request=request(task_id).model_dump_json(),
                                  fetched=1, next_seq=2, next_ctx={"page": 2}, rows_before=200)
    emits, ended = await sweep(ctx, now=now + 30)
    assert ended == ["old"]
    timeout = next(e.payload for e in emits if e.key == "old")
    assert (timeout.status, timeout.sysCode, timeout.userId) == ("TIMEOUT", "s", "u")
    assert "jobConfig.timeout=1s" in timeout.errorMessage
    [cmd] = [e.payload for e in emits if e.key == "stale" and isinstance(e.payload, FetchPage)]
    assert (cmd.seq, cmd.runtimeContext, cmd.rowsBefore, cmd.attempt) == (2, {"page": 2}, 200, 1)


async def test_a_live_worker_keeps_its_stale_task_until_it_dies(make_ctx):
    clock = Clock(time.time())
    ctx = make_ctx(clock=clock)
    await running(ctx, "busy", worker="w-live")
    await ctx.checkpoints.set("busy", request=request("busy").model_dump_json())
    await ctx.workers.beat("w-live", ttl=30)
    emits, _ = await sweep(ctx, now=clock.now + 60)
    assert [e for e in emits if e.key == "busy"] == []
    clock.now += 31  # the worker stopped beating
    emits, _ = await sweep(ctx, now=clock.now + 60)
    assert any(e.key == "busy" and isinstance(e.payload, FetchPage) for e in emits)


async def test_a_dead_fetchers_task_is_redriven_though_a_live_worker_wrote_its_last_page(
        make_ctx):
    # given worker A's in-process fetch chain recorded page 15 and A was killed;
    # live worker B wrote a redelivered page of it (the last PROGRESS is B's)
    clock = Clock(time.time())
    ctx = make_ctx(clock=clock)
    await running(ctx, "t1", worker="w-b")
    await ctx.checkpoints.set("t1", request=request("t1").model_dump_json(), fetched=15,
                              next_seq=16, next_ctx={"page": 16}, rows_before=1600,
                              fetcher="w-a")
    await ctx.workers.beat("w-b", ttl=30)
    # when the heartbeat is stale, B still beats but A does not
    emits, _ = await sweep(ctx, now=clock.now + 60)
    # then the sweeper re-drives the next page (nobody else would fetch it)
    [cmd] = [e.payload for e in emits if isinstance(e.payload, FetchPage)]
    assert (cmd.seq, cmd.runtimeContext, cmd.rowsBefore) == (16, {"page": 16}, 1600)


async def test_a_live_fetcher_or_a_fully_fetched_task_is_left_to_its_worker(make_ctx):
    clock = Clock(time.time())
    ctx = make_ctx(clock=clock)
    await running(ctx, "t1", worker="w-b")
    await ctx.workers.beat("w-b", ttl=30)
    await ctx.checkpoints.set("t1", request=request("t1").model_dump_json(), fetched=15,
                              next_seq=16, fetcher="w-b")
    assert (await sweep(ctx, now=clock.now + 60))[0] == []  # B's chain is fetching
    await ctx.checkpoints.set("t1", fetched=16, fetcher="w-a")  # last page fetched by A
    assert (await sweep(ctx, now=clock.now + 60))[0] == []  # B writes the queued pages


async def test_redrives_without_progress_end_the_task_failed(make_ctx):
    ctx = make_ctx()
    await ctx.checkpoints.set("t1", request=request("t1").model_dump_json(), next_seq=7)
    # a re-drive no worker claimed yet is sent again without counting
    for _ in range(5):
        [cmd] = [e.payload for e in await redrive(ctx, "t1") if isinstance(e.payload, FetchPage)]
        assert cmd.attempt == 1
    # each re-drive a worker claimed (then died holding) counts; past
    # PLAIT_MAX_REDRIVES the task fails
    for n in (2, 3):
        await claim(ctx, cmd)
        [cmd] = [e.payload for e in await redrive(ctx, "t1") if isinstance(e.payload, FetchPage)]
        assert cmd.attempt == n
    await claim(ctx, cmd)
    [final] = await redrive(ctx, "t1")
    assert final.payload.status == "FAILED"
    assert "re-driven 3 times at fetch:7" in final.payload.errorMessage


async def test_written_pages_redrive_the_finalizer_and_a_finalized_task_nothing(make_ctx):
    ctx = make_ctx()
    await ctx.checkpoints.set("t1", request=request("t1").model_dump_json(), last_seq=4,
                              truncated=1)
    [cmd] = [e.payload for e in await redrive(ctx, "t1")
             if isinstance(e.payload, FinalizeRequested)]
    assert (cmd.lastSeq, cmd.truncated) == (4, True)
    await ctx.checkpoints.set("t1", finalized=1)
    assert await redrive(ctx, "t1") == []


async def test_promotion_is_fifo_per_tenant_and_weighted_by_tier(make_ctx):
    ctx = make_ctx(limits={"global": 1, "sysCodes": {"gold": {"tier": "gold"}}})
    for i in range(6):
        for tenant in ("std", "gold"):
            await ctx.slots.enqueue(request(f"{tenant}-{i}", spec(tenant)))
    order = []
    for _ in range(9):
        for r in await ctx.slots.promote():
            order.append(r.taskId)
            await ctx.slots.release(r.taskId, r.spec.sysCode, "b", "u")
    gold = [t for t in order if t.startswith("gold")]
    std = [t for t in order if t.startswith("std")]
    assert gold == sorted(gold) and std == sorted(std)
    assert len(gold) == 6 and len(std) == 3


async def test_an_expired_lease_frees_its_slot(make_ctx):
    clock = Clock(time.time())
    ctx = make_ctx(limits={"global": 1}, clock=clock)
    await ctx.slots.enqueue(request("t1", spec(timeout=10)))
    await ctx.slots.enqueue(request("t2", spec(timeout=10)))
    assert [r.taskId for r in await ctx.slots.promote()] == ["t1"]
    assert await ctx.slots.promote() == []
    assert [r.taskId for r in await ctx.slots.promote(clock.now + 10 + 61)] == ["t2"]


# ------------------------------------------------------------- runtime policy
class FakeRt:
    """What ExportHooks calls back on the runtime: send."""

    def __init__(self, hooks: ExportHooks) -> None:
        self.hooks, self.sent = hooks, []

    async def send(self, emits, traceparent=None):
        await self.hooks.before_send(self, emits)
        self.sent.extend(emits)


async def test_a_failed_handler_ends_its_task_failed_and_deletes_its_shards(make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1")
    ctx.store.put_bytes(shard_key("t1", 0), b"x")
    hooks = ExportHooks(ctx, set())
    rt = FakeRt(hooks)
    cmd = FetchPage(taskId="t1", seq=0, spec=spec())
    agent = Agent(T.FETCH, "plait.export.fetch", None)
    await hooks.after_failure(rt, agent, None, cmd, PermanentError("page 0: HTTP 404"))
    [failed] = [e.payload for e in rt.sent]
    assert (failed.status, failed.errorMessage, failed.workerId) == (
        "FAILED", "page 0: HTTP 404", "w-me")
    assert (await ctx.projection.get("t1"))["status"] == "FAILED"  # projected before sending
    assert ctx.store.list("shards/t1/") == []
    await hooks.after_failure(rt, agent, None, FetchPage(taskId="t2", seq=0, spec=spec()),
                              KeyError("x"))
    assert rt.sent[-1].payload.errorMessage == "internal error: 'x'"


async def test_progress_is_projected_before_sending_so_the_end_cannot_overtake_it(make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1")
    hooks = ExportHooks(ctx, set())
    await hooks.before_send(None, [type("E", (), {"payload": Lifecycle(
        taskId="t1", status="PROGRESS", exportedRows=9)})()])
    assert (await ctx.projection.get("t1"))["exportedRows"] == 9


async def test_a_task_end_is_counted_once_whichever_path_projects_it_first(make_ctx):
    from prometheus_client import REGISTRY

    from streams.control import project
    from streams.emits import record

    def ended() -> float:
        return REGISTRY.get_sample_value("plait_export_tasks_total", {"outcome": "CANCELLED"}) or 0

    ctx = make_ctx()
    await running(ctx, "t1")
    before = ended()
    end = Lifecycle(taskId="t1", status="CANCELLED", errorMessage="x")
    assert (await record(ctx, end))["status"] == "CANCELLED"
    assert await record(ctx, end) is None  # a repeat changes nothing
    await project(ctx, end)  # the projector finds it projected already
    assert ended() == before + 1


async def test_detached_handlers_run_in_background_one_task_in_order(make_ctx):
    ctx = make_ctx(max_parallel_fetches=3)
    hooks = ExportHooks(ctx, {"plait.export.fetch"})
    agent = Agent(T.FETCH, "plait.export.fetch", None)
    log, gate = [], asyncio.Event()

    def job(name):
        async def run():
            log.append(f"start {name}")
            await gate.wait()
            log.append(f"end {name}")
        return run

    for name, task in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        await hooks.dispatch(None, agent, FetchPage(taskId=task, seq=0, spec=spec()), job(name))
    await asyncio.sleep(0.01)
    # a2 waits for a1 (same task); b1 runs beside a1 (another task)
    assert log == ["start a1", "start b1"] and hooks.detached["a"][1] == 2
    gate.set()
    await asyncio.gather(*list(hooks._jobs))
    assert log.index("end a1") < log.index("start a2")
    assert hooks.detached == {} and hooks.parallel._value == 3


async def test_detached_handlers_beyond_the_parallel_bound_wait_for_a_free_one(make_ctx):
    ctx = make_ctx(max_parallel_fetches=1)
    hooks = ExportHooks(ctx, {"plait.export.fetch"})
    agent = Agent(T.FETCH, "plait.export.fetch", None)
    gate, ran = asyncio.Event(), []

    async def first():
        await gate.wait()

    async def second():
        ran.append("b")

    await hooks.dispatch(None, agent, FetchPage(taskId="a", seq=0, spec=spec()), first)
    blocked = asyncio.create_task(
        hooks.dispatch(None, agent, FetchPage(taskId="b", seq=0, spec=spec()), second))
    await asyncio.sleep(0.01)
    assert not blocked.done() and ran == []  # the agent loop waits: back-pressure
    gate.set()
    await asyncio.wait_for(blocked, 2)
    await asyncio.gather(*list(hooks._jobs))
    assert ran == ["b"]


async def test_heartbeat_reports_the_tasks_in_flight_and_marks_the_worker_alive(make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1")
    runtime = Runtime(FakeApp(), ctx, [])
    sent = []
    runtime.rt.send = lambda emits, tp=None: _record(sent, emits)
    agent = Agent(T.FETCH, "plait.export.fetch", None)
    cmd = FetchPage(taskId="t1", seq=0, spec=spec())
    runtime.hooks.before_handle(runtime.rt, agent, cmd)
    runtime.hooks.before_handle(runtime.rt, agent, cmd)
    runtime.hooks.after_handle(runtime.rt, agent, cmd)
    await runtime.heartbeat()
    assert [(e.key, e.payload.status, e.payload.workerId) for e in sent] == [
        ("t1", "RUNNING", "w-me")]
    assert await ctx.workers.alive("w-me")
    runtime.hooks.after_handle(runtime.rt, agent, cmd)
    sent.clear()
    await runtime.heartbeat()
    assert sent == [] and runtime.inflight == {}


async def test_heartbeat_never_reports_a_task_still_in_admission(make_ctx):
    # given a task whose ExportRequested is being admitted (it may end WAITING)
    ctx = make_ctx()
    runtime = Runtime(FakeApp(), ctx, [])
    sent = []
    runtime.rt.send = lambda emits, tp=None: _record(sent, emits)
    agent = Agent(T.REQUESTS, "plait.export.admission", None)
    req = request("t-wait")
    runtime.hooks.before_handle(runtime.rt, agent, req)
    # when the worker beats
    await runtime.heartbeat()
    # then no RUNNING is sent for it: a WAITING task holds no slot
    assert sent == []
    runtime.hooks.after_handle(runtime.rt, agent, req)


async def _record(sent, emits):
    sent.extend(emits)


class FakeApp:
    def topic(self, name, **kw):
        return name

    def agent(self, *a, **kw):
        return lambda fn: fn


# Route stays importable for the app's route table
assert Route(T.FETCH, None).attempts == 3
