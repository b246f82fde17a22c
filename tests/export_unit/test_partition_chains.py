"""A partitioned pull task's chains on in-memory checkpoints and a scripted
data API: one FetchPage per partition at start, each page pulled with its
partition's conditions and sent as a PageBatch of its partition, checkpoints
per chain, progress summed, and the sweeper re-driving only the chain whose
worker is gone."""
from __future__ import annotations

import json

import pytest
from aiokafka.partitioner import DefaultPartitioner

from plait import topics as T
from plait.agent import spread_partition
from plait.errors import PermanentError
from plait.events import FetchPage, PageBatch
from plait.spec import ExportSpec
from streams.emits import start
from streams.handlers import after_fetch, fetch
from streams.layout import shard_key
from streams.partitions import redrive_chains, task_progress
from export_harness import DATA_API, Clock, request, running

pytestmark = pytest.mark.timeout(20)


def split_spec(parts: int = 3) -> ExportSpec:
    return ExportSpec.model_validate({
        "sysCode": "s", "bizType": "b", "userId": "u",
        "dataConfig": {"dataApiUrl": DATA_API, "pageSize": 100, "queryConditions": {"q": 1},
                       "split": {"field": "id", "from": 0, "to": 300, "parts": parts}},
        "documentConfig": {"fileName": "out", "fileFormat": "csv"}})


async def test_start_sends_one_first_page_per_partition_keyed_by_its_chain(make_ctx):
    emits = start(make_ctx(), request("t1", split_spec()))
    fetches = [e for e in emits if e.topic == T.FETCH]
    assert [(e.key, e.payload.partition, e.payload.partitions, e.payload.seq)
            for e in fetches] == [("t1#0", 0, 3, 0), ("t1#1", 1, 3, 0), ("t1#2", 2, 3, 0)]
    # each chain placed by the task id and its partition, not by its key's hash
    assert [e.spread for e in fetches] == [("t1", 0), ("t1", 1), ("t1", 2)]
    assert [e.spread for e in start(make_ctx(), request("t2")) if e.topic == T.FETCH] == [None]


@pytest.mark.parametrize("topic_partitions", [4, 12])
def test_a_tasks_chains_take_distinct_fetch_partitions(topic_partitions):
    # given tasks of 1 to 16 partitions on a topic of 4 (12) partitions
    for task in (f"task-{i}" for i in range(200)):
        for parts in (1, 2, 3, 4, 8, 12, 16):
            # when each chain is placed
            got = [spread_partition(task, p, topic_partitions) for p in range(parts)]
            # then they take min(parts, N) distinct partitions, evenly
            assert len(set(got)) == min(parts, topic_partitions), (task, parts, got)
            assert max(got.count(x) for x in got) == -(-parts // topic_partitions)
            # chain 0 where the task's events keyed by its id land (Kafka's partitioner)
            everyone = list(range(topic_partitions))
            assert got[0] == DefaultPartitioner()(task.encode(), everyone, everyone)


async def test_a_partition_pulls_its_window_and_records_its_own_chain(make_ctx, data_api):
    ctx = make_ctx()
    data_api.pages[0] = ([{"id": i} for i in range(101, 201)], False)
    cmd = FetchPage(taskId="t1", seq=0, partition=1, partitions=3, spec=split_spec())
    emits = await fetch(ctx, cmd)
    # the request carries the partition's window merged over the conditions
    assert data_api.requests[0]["queryConditions"] == {"q": 1, "fromId": 100, "toId": 200}
    page, nxt = emits[0].payload, emits[1].payload
    assert isinstance(page, PageBatch) and emits[0].key == "t1"  # one page writer per task
    assert (page.partition, page.partitions, page.shardKey) == (1, 3, shard_key("t1", 0, 1))
    assert (emits[1].key, nxt.partition, nxt.seq, nxt.rowsBefore) == ("t1#1", 1, 1, 100)
    await after_fetch(ctx, cmd, emits)
    marks = await ctx.checkpoints.get("t1")
    assert (marks["fetched:1"], marks["next_seq:1"], marks["rows:1"], marks["fetcher:1"]) == (
        "0", "1", "100", "w-me")
    assert "fetched" not in marks and "fetched:0" not in marks
    # a redelivered page 0 of partition 1 is absorbed
    assert await fetch(ctx, cmd) == []
    # progress sums what every partition fetched
    await ctx.checkpoints.set("t1", **{"rows:0": 100, "total:0": 100, "total:1": 100})
    assert await task_progress(ctx, page) == (200, None)
    await ctx.checkpoints.set("t1", **{"total:2": 100})
    assert await task_progress(ctx, page) == (200, 300)


async def test_the_sweeper_re_drives_only_the_chain_whose_worker_is_gone(make_ctx):
    clock = Clock(10_000.0)
    ctx = make_ctx(clock=clock)
    req = request("t1", split_spec())
    await running(ctx, "t1", req.spec)
    await ctx.workers.beat("w-alive", 60)
    await ctx.checkpoints.set("t1", request=req.model_dump_json(), **{
        "fetcher:0": "w-alive", "at:0": clock.now - 100,
        "fetcher:1": "w-dead", "at:1": clock.now - 100, "next_seq:1": 4,
        "next_ctx:1": {"lastId": 140}, "rows_before:1": 400,
        "fetcher:2": "w-dead", "at:2": clock.now - 100, "done:2": 1})
    emits = await redrive_chains(ctx, "t1", {}, clock.now, stale=False)
    cmds = [e for e in emits if e.topic == T.FETCH]
    assert [(e.key, e.payload.seq, e.payload.runtimeContext, e.payload.rowsBefore,
             e.payload.attempt) for e in cmds] == [("t1#1", 4, {"lastId": 140}, 400, 1)]
    # placed as the chain's first page was: the same fetch partition
    assert cmds[0].spread == start(ctx, req)[2].spread == ("t1", 1)
    # given the sweeping worker time to hand it over, it is not re-driven again at once
    assert await redrive_chains(ctx, "t1", {}, clock.now + 1, stale=False) == []
    # a re-drive no worker claimed yet is sent again without counting
    again = await redrive_chains(ctx, "t1", {}, clock.now + 10, stale=False)
    assert [e.payload.attempt for e in again if e.topic == T.FETCH] == [1]
    # each later re-drive at the same page that a worker claimed (then died) counts;
    # past PLAIT_MAX_REDRIVES the task fails
    for n in (2, 3, 4):
        await ctx.checkpoints.set("t1", **{"fetcher:1": "w-dead", "at:1": clock.now + 10 * n})
        again = await redrive_chains(ctx, "t1", {}, clock.now + 10 * n + 6, stale=False)
        if n < 4:
            assert [e.payload.attempt for e in again if e.topic == T.FETCH] == [n]
    failed = again
    assert failed[0].payload.status == "FAILED"
    assert "page 4 of partition 1" in failed[0].payload.errorMessage


async def test_a_task_of_one_partition_is_left_to_the_task_re_drive(make_ctx):
    ctx = make_ctx()
    req = request("t1")
    await ctx.checkpoints.set("t1", request=req.model_dump_json())
    assert await redrive_chains(ctx, "t1", {}, 0.0, stale=True) is None
    assert json.loads((await ctx.checkpoints.get("t1"))["request"])["taskId"] == "t1"


async def test_a_bad_answer_in_a_partition_names_the_partition(make_ctx, data_api):
    # given a data API whose answer for partition 1's first page is no list of objects
    ctx = make_ctx()
    data_api.pages[0] = (["garbage"], True)
    cmd = FetchPage(taskId="t1", seq=0, partition=1, partitions=3, spec=split_spec())
    # when the page is fetched, then the failure says which partition's page 0 it was
    with pytest.raises(PermanentError) as err:
        await fetch(ctx, cmd)
    assert str(err.value) == "page 0 of partition 1: data.rows must be a list of objects"
