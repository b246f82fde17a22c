"""Export handler logic on in-memory checkpoints, projection, slots, store and
a scripted data API: admission, fetching, shards, finalize, cancel and the
projector. No Redis, no broker (the flows keep their real-broker tests)."""
from __future__ import annotations

import csv
import io
import json

import pyarrow as pa
import pytest

from plait import topics as T
from plait.events import (CancelRequested, FetchPage, FinalizeRequested, Lifecycle, PageBatch)
from streams.control import after_cancel, cancel, project
from streams.files import read_shard
from streams.finalize import after_finalize, finalize
from streams.handlers import admit, after_admit, after_fetch, fetch
from streams.layout import QUALITY_KEY, page_key, shard_key
from streams.shards import after_write_shard, write_shard
from export_harness import request, running, spec


def shard_table(data: bytes) -> pa.Table:
    """A stored shard as a table, its schema metadata kept."""
    schema, batches = read_shard(data)
    return pa.Table.from_batches(list(batches), schema=schema)


pytestmark = pytest.mark.timeout(20)


def kinds(emits) -> list[tuple[str, str]]:
    """(topic, status or payload type) of each emit, in order."""
    return [(e.topic, getattr(e.payload, "status", None) or type(e.payload).__name__)
            for e in emits]


# ------------------------------------------------------------------ admission
async def test_admit_starts_a_task_that_fits_and_ignores_its_redelivery(make_ctx):
    ctx = make_ctx()
    req = request("t1")
    emits = await admit(ctx, req)
    assert kinds(emits) == [(T.LIFECYCLE, "CREATED"), (T.LIFECYCLE, "RUNNING"),
                            (T.FETCH, "FetchPage")]
    created, _, first = (e.payload for e in emits)
    assert (created.fingerprint, created.timeout, created.sysCode) == (req.fingerprint, 300, "s")
    assert (first.seq, first.rowsBefore) == (0, 0)
    await after_admit(ctx, req, emits)
    assert await admit(ctx, req) == []
    assert json.loads((await ctx.checkpoints.get("t1"))["request"])["taskId"] == "t1"


async def test_admit_fails_an_sdk_request_over_the_document_caps(make_ctx):
    # producer-SDK requests skip the API: admission checks plait.documents itself
    from plait.errors import PermanentError

    ctx = make_ctx(pdf_max_rows=500)
    with pytest.raises(PermanentError) as err:
        await admit(ctx, request("t1", spec(max_rows=501, fmt="pdf")))
    assert "jobConfig.maxRows: pdf allows at most 500 rows" in str(err.value)
    assert kinds(await admit(ctx, request("t2", spec(max_rows=500, fmt="pdf"))))[0] == \
        (T.LIFECYCLE, "CREATED")


async def test_admit_over_the_limit_waits_and_starts_when_the_slot_frees(make_ctx):
    ctx = make_ctx(limits={"perSysCode": 1})
    await admit(ctx, request("t1"))
    emits = await admit(ctx, request("t2"))
    assert kinds(emits) == [(T.LIFECYCLE, "CREATED"), (T.LIFECYCLE, "WAITING")]
    # when t1 ends and the projector folds it
    for e in await admit(ctx, request("t1")) or []:
        await ctx.projection.apply(e.payload)
    await running(ctx, "t1")
    started = await project(ctx, Lifecycle(taskId="t1", status="SUCCESS"))
    # then t2 starts (RUNNING + its first page) and holds the slot
    assert kinds(started) == [(T.LIFECYCLE, "RUNNING"), (T.FETCH, "FetchPage")]
    assert {e.key for e in started} == {"t2"}
    assert ctx.slots.holding("sys:s") == {"t2"}


# ------------------------------------------------------------------- fetching
async def test_fetch_emits_the_page_and_the_next_command_and_records_the_cursor(make_ctx,
                                                                                data_api):
    ctx = make_ctx()
    data_api.pages[3] = ([{"id": i} for i in range(100)], False)
    cmd = FetchPage(taskId="t1", seq=3, runtimeContext={"page": 3}, rowsBefore=300, spec=spec())
    emits = await fetch(ctx, cmd)
    assert kinds(emits) == [(T.PAGES, "PageBatch"), (T.FETCH, "FetchPage")]
    page, nxt = emits[0].payload, emits[1].payload
    assert (page.seq, page.rowCount, page.rowsBefore, page.isLast, page.totalRows) == (
        3, 100, 300, False, 1000)
    assert page.rows is None and page.shardKey == shard_key("t1", 3)  # only a key travels
    shard = shard_table(ctx.store.get_bytes(shard_key("t1", 3)))
    assert shard.column("id").to_pylist()[:2] == [0, 1]
    assert (nxt.seq, nxt.runtimeContext, nxt.rowsBefore) == (4, {"page": 4}, 400)
    assert data_api.requests[0]["runtimeContext"] == {"pageSize": 100, "page": 3}
    await after_fetch(ctx, cmd, emits)
    marks = await ctx.checkpoints.get("t1")
    assert (marks["fetched"], marks["next_seq"], json.loads(marks["next_ctx"])) == (
        "3", "4", {"page": 4})


async def test_a_fetched_seq_is_absorbed_and_an_ended_task_is_not_fetched(make_ctx, data_api):
    ctx = make_ctx()
    await ctx.checkpoints.set("t1", fetched=5)
    assert await fetch(ctx, FetchPage(taskId="t1", seq=5, spec=spec())) == []
    assert (await ctx.checkpoints.get("t1"))["absorbed"] == "1"
    await running(ctx, "t2")
    await ctx.projection.apply(Lifecycle(taskId="t2", status="CANCELLED"))
    assert await fetch(ctx, FetchPage(taskId="t2", seq=0, spec=spec())) == []
    assert data_api.requests == []


async def test_max_rows_cuts_the_page_and_marks_the_export_truncated(make_ctx, data_api):
    ctx = make_ctx()
    data_api.pages[2] = ([{"id": i} for i in range(100)], False)
    cmd = FetchPage(taskId="t1", seq=2, runtimeContext={"page": 2}, rowsBefore=200,
                    spec=spec(max_rows=250))
    emits = await fetch(ctx, cmd)
    assert kinds(emits) == [(T.PAGES, "PageBatch")]  # no next page
    page = emits[0].payload
    assert (page.rowCount, page.isLast, page.truncated) == (50, True, True)


async def test_a_fetched_page_travels_as_its_shard_and_a_pushed_blob_still_works(make_ctx,
                                                                                data_api):
    ctx = make_ctx()
    await running(ctx, "t1")
    rows = [{"id": i, "text": "x" * 50} for i in range(100)]
    data_api.pages[0] = (rows, True)
    [emit] = await fetch(ctx, FetchPage(taskId="t1", seq=0, spec=spec()))
    assert emit.payload.rows is None and emit.payload.blobKey is None
    table = shard_table(ctx.store.get_bytes(emit.payload.shardKey))
    assert table.to_pylist() == rows and QUALITY_KEY in table.schema.metadata
    # a push-mode producer's page blob (JSON) is still read
    ctx.store.put_bytes(page_key("t2", 0), json.dumps(rows).encode())
    await running(ctx, "t2")
    emits = await write_shard(ctx, PageBatch(taskId="t2", seq=0, blobKey=page_key("t2", 0),
                                             rowCount=100, isLast=True, spec=spec()))
    assert emits[-1].payload.status == "SUCCESS" and emits[-1].payload.file.rows == 100


# --------------------------------------------------------------------- shards
async def test_write_shard_stores_the_page_reports_progress_and_the_last_page_publishes(
        make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1")
    rows = [{"id": i, "name": f"n{i}"} for i in range(10)]
    page = PageBatch(taskId="t1", seq=0, rows=rows, rowCount=10, spec=spec())
    assert kinds(await write_shard(ctx, page)) == [(T.LIFECYCLE, "PROGRESS")]
    table = shard_table(ctx.store.get_bytes(shard_key("t1", 0)))
    assert table.num_rows == 10 and QUALITY_KEY in table.schema.metadata
    last = PageBatch(taskId="t1", seq=1, rows=rows, rowCount=10, rowsBefore=10, isLast=True,
                     truncated=True, spec=spec())
    emits = await write_shard(ctx, last)
    assert kinds(emits) == [(T.LIFECYCLE, "PROGRESS"), (T.LIFECYCLE, "SUCCESS")]
    assert emits[0].payload.exportedRows == 20
    done = emits[1].payload
    assert (done.exportedRows, done.truncated, done.file.rows) == (20, True, 20)
    marks = await ctx.checkpoints.get("t1")  # recorded before finishing: a re-drive finalizes
    assert (marks["last_seq"], marks["truncated"]) == ("1", "1")
    await after_write_shard(ctx, last, emits)
    assert (await ctx.checkpoints.get("t1"))["finalized"] == "1"
    assert ctx.store.list("shards/t1/") == [] and ctx.files == {}


async def test_a_page_of_an_ended_task_is_dropped(make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1")
    await ctx.projection.apply(Lifecycle(taskId="t1", status="CANCELLED"))
    page = PageBatch(taskId="t1", seq=0, rows=[{"id": 1}], rowCount=1, spec=spec())
    assert await write_shard(ctx, page) == []
    assert ctx.store.list("shards/") == []


# ------------------------------------------------------------------- finalize
async def test_finalize_merges_shards_in_order_and_cleans_up(make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1")
    for seq in range(3):
        rows = [{"id": seq * 10 + i} for i in range(10)]
        await write_shard(ctx, PageBatch(taskId="t1", seq=seq, rows=rows, rowCount=10,
                                         rowsBefore=seq * 10, spec=spec()))
    ctx.store.put_bytes(page_key("t1", 0), b"[]")
    cmd = FinalizeRequested(taskId="t1", lastSeq=2, spec=spec())
    emits = await finalize(ctx, cmd)
    assert kinds(emits) == [(T.LIFECYCLE, "SUCCESS")]
    done = emits[0].payload
    assert (done.exportedRows, done.file.rows, done.file.fileName) == (30, 30, "out.csv")
    text = ctx.store.get_bytes(done.file.key).decode("utf-8-sig")
    assert [int(r[0]) for r in list(csv.reader(io.StringIO(text)))[1:]] == list(range(30))
    await after_finalize(ctx, cmd, emits)
    assert ctx.store.list("shards/t1/") == [] and ctx.store.list("pages/t1/") == []
    assert await finalize(ctx, cmd) == []  # a redelivered command is skipped


async def test_finalize_names_the_missing_shards(make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1")
    await write_shard(ctx, PageBatch(taskId="t1", seq=0, rows=[{"id": 1}], rowCount=1,
                                     spec=spec()))
    try:
        await finalize(ctx, FinalizeRequested(taskId="t1", lastSeq=2, spec=spec()))
    except Exception as exc:
        assert type(exc).__name__ == "PermanentError" and "[1, 2]" in str(exc)
    else:
        raise AssertionError("finalize with missing shards must fail")


# ------------------------------------------------------------- cancel, project
async def test_cancel_ends_a_running_task_with_its_identity_and_deletes_shards(make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1", spec(sys_code="acme", user="ann"))
    ctx.store.put_bytes(shard_key("t1", 0), b"x")
    emits = await cancel(ctx, CancelRequested(taskId="t1", reason="stop"))
    [ended] = [e.payload for e in emits]
    assert (ended.status, ended.errorMessage, ended.sysCode, ended.userId) == (
        "CANCELLED", "stop", "acme", "ann")
    await after_cancel(ctx, CancelRequested(taskId="t1"), emits)
    assert ctx.store.list("shards/t1/") == []
    await ctx.projection.apply(ended)
    assert await cancel(ctx, CancelRequested(taskId="t1")) == []  # already ended
    assert await cancel(ctx, CancelRequested(taskId="nope")) == []  # unknown


async def test_project_folds_progress_without_freeing_the_slot(make_ctx):
    ctx = make_ctx(limits={"global": 1})
    await admit(ctx, request("t1"))
    await running(ctx, "t1")
    assert await project(ctx, Lifecycle(taskId="t1", status="PROGRESS", exportedRows=5)) == []
    assert (await ctx.projection.get("t1"))["exportedRows"] == 5
    assert ctx.slots.holding() == {"t1"}


async def test_project_does_not_transact_for_an_event_projected_already(make_ctx, monkeypatch):
    """The runtime projects what it sends first: the projector's fold of the
    same event is a plain read (no optimistic transaction)."""
    ctx = make_ctx()
    await running(ctx, "t1")
    event = Lifecycle(taskId="t1", status="PROGRESS", exportedRows=5)
    await ctx.projection.apply(event)  # as before_send did
    applied = []
    apply = ctx.projection.apply

    async def counted(e):
        applied.append(e.status)
        return await apply(e)
    monkeypatch.setattr(ctx.projection, "apply", counted)
    assert await project(ctx, event) == []
    assert applied == []
    assert await project(ctx, Lifecycle(taskId="t1", status="PROGRESS", exportedRows=7)) == []
    assert applied == ["PROGRESS"] and (await ctx.projection.get("t1"))["exportedRows"] == 7
