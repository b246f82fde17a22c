"""The page writer takes a run of pulled pages of one task at once (``streams.shards.write_pages``,
``streams.runtime.Runtime.handle_runs``): the same file and events as page after page, with one
projection read and one thread hand-off for the run; anything else is handled alone."""
from __future__ import annotations

import asyncio

import pytest

from export_harness import running, spec
from plait import topics as T
from plait.agent import Emit
from plait.events import CancelRequested, PageBatch
from sinks.values import rows_to_batch
from streams import files, shards
from streams.context import Context
from streams.runtime import Route, Runtime
from streams.shards import page_run, write_pages, write_shard

pytestmark = pytest.mark.timeout(30)

PARTS, PAGES, ROWS = 2, 3, 5


def pulled(ctx, task: str, partition: int, seq: int) -> PageBatch:
    """Page ``seq`` of ``partition`` stored as its shard, as a fetch step leaves it."""
    first = (partition * PAGES + seq) * ROWS
    rows = [{"id": first + i, "name": f"n{first + i}"} for i in range(ROWS)]
    batch, quality = rows_to_batch(rows, spec().documentConfig, page=seq)
    key = files.shard_key(task, seq, partition)
    ctx.store.put_bytes(key, files.encode_shard(batch, quality))
    return PageBatch(taskId=task, seq=seq, partition=partition, partitions=PARTS, shardKey=key,
                     rowCount=ROWS, rowsBefore=seq * ROWS, isLast=seq == PAGES - 1, spec=spec())


def arrival(ctx, task: str) -> list[PageBatch]:
    """Every page of the task, partition 1 ahead of partition 0 as a faster chain sends them."""
    return [pulled(ctx, task, p, s) for p in (1, 0) for s in range(PAGES)]


def file_of(ctx, emits) -> bytes:
    done = emits[-1].payload
    assert done.status == "SUCCESS", done
    return ctx.store.get_bytes(done.file.key)


@pytest.mark.parametrize("cut", [[6], [2, 4], [1, 1, 1, 1, 1, 1], [4, 2]],
                         ids=["one-run", "runs-of-2-and-4", "pages-alone", "runs-of-4-and-2"])
async def test_runs_of_pages_give_the_file_of_page_after_page(make_ctx, cut):
    # given the same pages written page after page, and in runs
    one = make_ctx()
    await running(one, "t1")
    for page in arrival(one, "t1"):
        emits = await write_shard(one, page)
    alone = file_of(one, emits)
    runs = make_ctx()
    await running(runs, "t2")
    pages, at = arrival(runs, "t2"), 0
    for n in cut:
        emits = await write_pages(runs, pages[at:at + n])
        at += n
    # then the file is byte for byte the same, every row once in partition order
    assert file_of(runs, emits) == alone
    ids = [int(line.split(b",")[0]) for line in alone.splitlines()[1:]]
    assert ids == list(range(PARTS * PAGES * ROWS))


async def test_a_run_reads_the_projection_once_and_leaves_the_loop_once(make_ctx, monkeypatch):
    ctx = make_ctx()
    await running(ctx, "t1")
    pages = arrival(ctx, "t1")
    await write_pages(ctx, [pages[PAGES]])  # page 0 of partition 0 opens the file
    reads, threads = [], []
    get, to_thread = ctx.projection.get, asyncio.to_thread

    async def counted_get(task_id):
        reads.append(task_id)
        return await get(task_id)

    async def counted_thread(fn, *args, **kwargs):
        threads.append(getattr(fn, "__name__", fn))
        return await to_thread(fn, *args, **kwargs)

    monkeypatch.setattr(ctx.projection, "get", counted_get)
    monkeypatch.setattr(shards.asyncio, "to_thread", counted_thread)
    await write_pages(ctx, pages[:PAGES])  # partition 1: waits behind partition 0
    assert len(reads) == 1
    assert threads == ["_grow_stored"]


async def test_a_run_of_an_ended_task_writes_nothing(make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1")
    pages = arrival(ctx, "t1")
    from plait.events import Lifecycle
    await ctx.projection.apply(Lifecycle(taskId="t1", status="CANCELLED"))
    assert await write_pages(ctx, pages) == []
    assert "t1" not in ctx.files


@pytest.mark.parametrize("fmt", ["csv", "parquet"], ids=["in-parts", "in-file-order"])
async def test_a_worker_taking_over_at_the_first_page_finds_what_the_other_wrote(make_ctx, fmt):
    # given worker A wrote partition 1's only page and lost the task's partition; B gets the
    # rest, page 0 of partition 0 first (a pulled first page: nothing before it in its chain)
    a = make_ctx()
    s = spec(fmt=fmt)
    await running(a, "t1", s)

    def page(p: int, seq: int, last: bool) -> PageBatch:
        rows = [{"id": 10 * p + seq, "name": "x"}]
        batch, quality = rows_to_batch(rows, s.documentConfig, page=seq)
        key = files.shard_key("t1", seq, p)
        a.store.put_bytes(key, files.encode_shard(batch, quality))
        return PageBatch(taskId="t1", seq=seq, partition=p, partitions=3, shardKey=key,
                         rowCount=1, isLast=last, spec=s)

    await write_shard(a, page(1, 0, True))
    b = Context(a.settings, a.topics, a.store, a.projection, a.http, a.checkpoints, a.slots,
                a.workers, worker_id="w-b")
    for p, seq, last in [(0, 0, False), (0, 1, True), (2, 0, True)]:
        emits = await write_shard(b, page(p, seq, last))
    # then B's file takes partition 1 from its shard and the task succeeds with every row
    done = emits[-1].payload
    assert done.status == "SUCCESS" and done.exportedRows == 4


async def test_a_missing_shard_of_a_running_task_fails_the_run(make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1")
    pages = arrival(ctx, "t1")
    ctx.store.delete_prefix(files.shard_key("t1", 1, 1))
    with pytest.raises(KeyError):
        await write_pages(ctx, pages)


class FakeApp:
    def agent(self, *a, **k):
        return lambda fn: fn


async def test_runs_of_one_key_go_to_the_batch_handler_the_rest_alone(make_ctx):
    ctx = make_ctx()
    runtime = Runtime(FakeApp(), ctx, [])
    batches, alone = [], []

    async def batch(ctx_, payloads):
        batches.append([p.seq for p in payloads])
        return []

    async def process_decoded(agent, event, attrs, payload):
        alone.append(getattr(payload, "seq", None))

    runtime.rt.process_decoded = process_decoded
    route = Route(T.PAGES, write_shard, timeout=10, batch=batch, run_key=page_run)

    def event(task: str, seq: int, stored: bool = True):
        return (None, {}, PageBatch(taskId=task, seq=seq, rowCount=0, spec=spec(),
                                    **({"shardKey": f"k{seq}"} if stored else {"rows": []})))

    other = (None, {}, CancelRequested(taskId="a"))  # not a page: no run key
    events = [event("a", 0), event("a", 1), event("b", 2), event("a", 3, stored=False),
              event("a", 4), event("a", 5), other, event("a", 7), event("a", 8)]
    await runtime.handle_runs(route, runtime.agent(route), events)
    assert batches == [[0, 1], [4, 5], [7, 8]]
    assert alone == [2, 3, None]  # another task's page, a pushed page, another event
    assert runtime.inflight == {}


async def test_a_failing_run_is_taken_again_one_event_at_a_time(make_ctx):
    ctx = make_ctx()
    runtime = Runtime(FakeApp(), ctx, [])
    alone = []

    async def batch(ctx_, payloads):
        raise ValueError("a bad page somewhere in the run")

    async def process_decoded(agent, event, attrs, payload):
        alone.append(payload.seq)

    runtime.rt.process_decoded = process_decoded
    route = Route(T.PAGES, write_shard, timeout=10, batch=batch, run_key=page_run)
    events = [(None, {}, PageBatch(taskId="a", seq=s, rowCount=0, spec=spec(), shardKey=f"k{s}"))
              for s in range(3)]
    await runtime.handle_runs(route, runtime.agent(route), events)
    assert alone == [0, 1, 2]


async def test_a_run_whose_events_cannot_be_sent_reports_it_for_its_last_event(make_ctx):
    # as the route's handler does for one event: not taken again (its SUCCESS is projected)
    ctx = make_ctx()
    runtime = Runtime(FakeApp(), ctx, [])
    reported, alone = [], []

    async def batch(ctx_, payloads):
        return [Emit(T.LIFECYCLE, "a", payloads[-1])]

    async def send(emits, traceparent=None):
        raise ConnectionError("broker gone")

    async def report_failure(agent, event, payload, exc):
        reported.append((event, payload.seq, type(exc).__name__))

    async def process_decoded(agent, event, attrs, payload):
        alone.append(payload.seq)

    runtime.rt.send, runtime.rt.report_failure = send, report_failure
    runtime.rt.process_decoded = process_decoded
    route = Route(T.PAGES, write_shard, timeout=10, batch=batch, run_key=page_run)
    events = [(f"e{s}", {}, PageBatch(taskId="a", seq=s, rowCount=0, spec=spec(),
                                      shardKey=f"k{s}")) for s in range(3)]
    await runtime.handle_runs(route, runtime.agent(route), events)
    assert reported == [("e2", 2, "ConnectionError")] and alone == []
