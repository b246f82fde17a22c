"""Write while fetching (issue 12, items 1 and 2) on in-memory members: the
task's file grows page by page in page order, a redelivered page is not
written twice, a worker that did not see the first pages catches up from
their shards, a page that does not fit falls back to building from shards,
and the fetch route follows its own next command in process (no broker round
trip between pages), prefetching page n+1 while page n is sent."""
from __future__ import annotations

import asyncio
import csv
import io
import json
import tracemalloc

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from export_harness import request, running, spec
from plait import topics as T
from plait.events import FetchPage, PageBatch
from plait.errors import PermanentError
from sinks.values import rows_to_batch, with_int_digits
from streams import files
from streams.context import Context
from streams.finalize import finalize
from streams.layout import QUALITY_KEY, legacy_shard_key
from plait.events import FinalizeRequested
from streams.handlers import AHEAD_PAGES, after_fetch, fetch
from streams.runtime import Route, Runtime
from streams.shards import after_write_shard, write_shard

pytestmark = pytest.mark.timeout(30)


def page(seq: int, rows: list[dict], last: bool = False, task: str = "t1", s=None) -> PageBatch:
    return PageBatch(taskId=task, seq=seq, rows=rows, rowCount=len(rows),
                     rowsBefore=seq * len(rows), isLast=last, spec=s or spec())


def typed_spec():
    """A parquet export declaring its columns (``id`` int, ``name`` string):
    its pages take the fast decode, which reads the envelope apart."""
    from plait.spec import ExportSpec

    return ExportSpec.model_validate(spec(fmt="parquet").model_dump() | {"documentConfig": {
        "fileName": "out", "fileFormat": "parquet",
        "columns": [{"fieldName": "id", "type": "int"}, {"fieldName": "name", "type": "string"}]}})


def ids(seq: int, n: int = 10) -> list[dict]:
    return [{"id": seq * n + i, "name": f"n{seq * n + i}"} for i in range(n)]


def file_rows(ctx: Context, done) -> list[list[str]]:
    text = ctx.store.get_bytes(done.file.key).decode("utf-8-sig")
    return list(csv.reader(io.StringIO(text)))[1:]


def no_rebuild(monkeypatch) -> None:
    """Fail the test if the file is rebuilt from shards instead of grown."""
    def refuse(*a, **k):
        raise AssertionError("built from shards, not grown")
    monkeypatch.setattr(files, "build_file", refuse)


async def test_the_file_grows_page_by_page_and_the_last_page_only_closes_it(make_ctx,
                                                                           monkeypatch):
    ctx = make_ctx()
    await running(ctx, "t1")
    no_rebuild(monkeypatch)
    for seq in range(3):
        await write_shard(ctx, page(seq, ids(seq)))
        tf = ctx.files["t1"]
        assert tf.next_seq == seq + 1  # progress: pages 0..seq are in the file
    emits = await write_shard(ctx, page(3, ids(3), last=True))
    done = emits[-1].payload
    assert done.status == "SUCCESS" and done.file.rows == 40
    assert [int(r[0]) for r in file_rows(ctx, done)] == list(range(40))
    await after_write_shard(ctx, page(3, ids(3), last=True), emits)
    assert ctx.files == {} and ctx.store.list("shards/") == []


async def test_a_redelivered_page_is_written_once(make_ctx, monkeypatch):
    ctx = make_ctx()
    await running(ctx, "t1")
    no_rebuild(monkeypatch)
    for seq in (0, 1, 1, 0, 1, 2):  # at-least-once: pages come again, in partition order
        await write_shard(ctx, page(seq, ids(seq)))
    emits = await write_shard(ctx, page(3, ids(3), last=True))
    assert [int(r[0]) for r in file_rows(ctx, emits[-1].payload)] == list(range(40))


async def test_a_new_worker_mid_task_catches_up_from_the_shards(make_ctx):
    # given worker A wrote pages 0..2 (shards and its growing file) and was killed
    a = make_ctx()
    await running(a, "t1")
    for seq in range(3):
        await write_shard(a, page(seq, ids(seq)))
    # when worker B (same store, checkpoints, projection; no file) gets page 2
    # again (uncommitted offset) and then the last page
    b = Context(a.settings, a.topics, a.store, a.projection, a.http, a.checkpoints, a.slots,
                a.workers, worker_id="w-b")
    await write_shard(b, page(2, ids(2)))
    assert b.files["t1"].next_seq == 3  # caught up 0..1 from shards, then appended 2
    emits = await write_shard(b, page(3, ids(3), last=True))
    # then the file holds every row exactly once, in order
    assert [int(r[0]) for r in file_rows(b, emits[-1].payload)] == list(range(40))


def parquet_shard(batch, quality: dict) -> bytes:
    """A shard as an earlier version stored it: Parquet, quality counts in the schema metadata."""
    meta = {QUALITY_KEY: json.dumps(quality).encode()}
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_batches([with_int_digits(batch).replace_schema_metadata(meta)]),
                   buf, compression="lz4", use_dictionary=False, write_statistics=False)
    return buf.getvalue()


def stored(ctx: Context, seq: int, legacy: bool = False):
    """Store page ``seq`` of task t1 as its shard, as a fetch step does (``legacy``: as an earlier
    version did, Parquet at the ``.parquet`` key); (key, batch, quality)."""
    batch, quality = rows_to_batch(ids(seq), spec().documentConfig, page=seq)
    key = files.shard_key("t1", seq, 0)
    if legacy:
        ctx.store.put_bytes(legacy_shard_key(key), parquet_shard(batch, quality))
    else:
        ctx.store.put_bytes(key, files.encode_shard(batch, quality))
    return key, batch, quality


@pytest.mark.parametrize("legacy", [False, True], ids=["arrow", "parquet-of-an-earlier-version"])
async def test_next_pages_stored_elsewhere_are_taken_from_their_shards_one_probe_each(
        make_ctx, monkeypatch, legacy):
    # given worker A's file holds page 0, and pages 1 and 2 were stored by a worker whose
    # events A never sees
    a = make_ctx()
    await running(a, "t1")
    await write_shard(a, page(0, ids(0)))
    for seq in (1, 2):
        stored(a, seq, legacy)

    def refuse(*_a):
        raise AssertionError("listed every shard of the task")
    monkeypatch.setattr(files, "rescan", refuse)
    # when the last page reaches A ahead of them
    emits = await write_shard(a, page(3, ids(3), last=True))
    # then 1 and 2 come from their shards, each found by its own key, and the file is whole
    assert [int(r[0]) for r in file_rows(a, emits[-1].payload)] == list(range(40))


async def test_a_task_running_across_an_upgrade_keeps_the_pages_an_earlier_version_stored(
        make_ctx):
    # given an earlier version stored pages 0 and 1 as Parquet shards, then stopped
    b = make_ctx()
    await running(b, "t1")
    for seq in (0, 1):
        stored(b, seq, legacy=True)
    # when this version's worker (no file yet) gets page 2, then the last page
    await write_shard(b, page(2, ids(2)))
    assert b.files["t1"].next_seq == 3  # 0..1 caught up from the Parquet shards
    emits = await write_shard(b, page(3, ids(3), last=True))
    # then the file holds every row exactly once, in order
    assert [int(r[0]) for r in file_rows(b, emits[-1].payload)] == list(range(40))


async def test_a_file_built_from_shards_of_both_versions_holds_every_row_in_order(make_ctx):
    # given pages 0 and 2 stored as Parquet by an earlier version, 1 and 3 by this one
    ctx = make_ctx()
    for seq in range(4):
        stored(ctx, seq, legacy=seq % 2 == 0)
    # when the file is built from the shards (no grown file)
    built = files.build_file(ctx.store, "t1", 3, spec().documentConfig)
    # then it holds every row once, in page order, and a missing shard is still named
    text = ctx.store.get_bytes(built.key).decode("utf-8-sig")
    assert [int(r[0]) for r in list(csv.reader(io.StringIO(text)))[1:]] == list(range(40))
    ctx.store.delete_prefix(legacy_shard_key(files.shard_key("t1", 2)))
    with pytest.raises(PermanentError, match=r"shards missing for pages \[2\]"):
        files.build_file(ctx.store, "t1", 3, spec().documentConfig)


async def test_a_next_page_fetched_here_waits_for_its_own_event(make_ctx):
    # given page 1 was fetched on this worker (stored and handed off), its event not yet written
    a = make_ctx()
    await running(a, "t1")
    await write_shard(a, page(0, ids(0)))
    key, batch, quality = stored(a, 1)
    files.hand_off(a, key, batch, quality)
    # when page 2 arrives first, then page 1's event
    await write_shard(a, page(2, ids(2)))
    assert a.files["t1"].next_seq == 1  # page 1 not read back from its shard
    fetched = page(1, ids(1))
    fetched.shardKey = key
    await write_shard(a, fetched)
    # then both are in the file, page 1 from the batch handed off
    assert a.files["t1"].next_seq == 3 and key not in a.handed
    emits = await write_shard(a, page(3, ids(3), last=True))
    assert [int(r[0]) for r in file_rows(a, emits[-1].payload)] == list(range(40))


@pytest.mark.parametrize("fmt,rows", [("csv", 10), ("parquet", 10_000)],
                         ids=["csv", "parquet-pages-over-BATCH_ROWS"])
async def test_killed_while_finishing_a_redrive_builds_the_same_file_from_shards(make_ctx, fmt,
                                                                                 rows):
    # given the last page was written and last_seq recorded, but the worker died
    # before SUCCESS (its growing file is gone with it); Parquet's row groups follow the
    # batches written, so pages over files.BATCH_ROWS rows must be cut alike both ways
    s = spec(fmt=fmt)
    a = make_ctx()
    await running(a, "t1", s)
    for seq in range(7):
        await write_shard(a, page(seq, ids(seq, rows), s=s))
    grown = await write_shard(a, page(7, ids(7, rows), last=True, s=s))
    expected = a.store.get_bytes(grown[-1].payload.file.key)
    await a.checkpoints.set("t1", last_seq=7)
    b = Context(a.settings, a.topics, a.store, a.projection, a.http, a.checkpoints, a.slots,
                a.workers, worker_id="w-b")
    # when the sweeper's FinalizeRequested reaches another worker
    [done] = await finalize(b, FinalizeRequested(taskId="t1", lastSeq=7, spec=s))
    # then it builds byte-identical output from the shards
    assert b.store.get_bytes(done.payload.file.key) == expected
    assert done.payload.file.sha256 == grown[-1].payload.file.sha256


async def test_a_page_that_widens_a_type_falls_back_to_the_shards(make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1")
    await write_shard(ctx, page(0, [{"id": 1, "v": 1}, {"id": 2, "v": 2}]))
    await write_shard(ctx, page(1, [{"id": 3, "v": 2.5}]))  # int -> float: does not fit
    assert not ctx.files["t1"].grown  # the order is kept; the file stopped growing
    emits = await write_shard(ctx, page(2, [{"id": 4, "v": 3}], last=True))
    assert [r for r in file_rows(ctx, emits[-1].payload)] == [
        ["1", "1"], ["2", "2"], ["3", "2.5"], ["4", "3"]]


async def test_a_cancelled_task_drops_its_growing_file(make_ctx):
    from plait.events import Lifecycle
    ctx = make_ctx()
    await running(ctx, "t1")
    await write_shard(ctx, page(0, ids(0)))
    tf = ctx.files["t1"]
    await ctx.projection.apply(Lifecycle(taskId="t1", status="CANCELLED"))
    assert await write_shard(ctx, page(1, ids(1))) == []
    assert ctx.files == {} and not tf.dir.exists()


async def test_memory_stays_flat_while_the_file_grows(make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1")
    rows = [{"id": i, "name": "x" * 40} for i in range(2000)]
    tracemalloc.start()
    try:
        peaks = []
        for seq in range(30):
            await write_shard(ctx, page(seq, rows))
            ctx.store.objects.clear()  # the store is elsewhere in production
            peaks.append(tracemalloc.get_traced_memory()[0])
            tracemalloc.reset_peak()
    finally:
        tracemalloc.stop()
    # memory after page 29 is no larger than after page 5 (plus slack): flat
    assert peaks[-1] < peaks[5] + 2 * 1024 * 1024, peaks


# ------------------------------------------------------- following in process
class FakeApp:
    def topic(self, *a, **k):
        return object()

    def agent(self, *a, **k):
        return lambda fn: fn


async def test_the_fetch_route_follows_its_pages_without_a_broker_round_trip(make_ctx,
                                                                            data_api):
    ctx = make_ctx()
    await running(ctx, "t1")
    for seq in range(4):
        data_api.pages[seq] = ([{"id": seq * 10 + i} for i in range(10)], seq == 3)
    runtime = Runtime(FakeApp(), ctx, [])
    sent, marks_at_send = [], []

    async def send(emits, tp=None):
        await asyncio.sleep(0.01)  # the broker's ack takes a while: the next fetch runs
        marks_at_send.append(len(data_api.requests))  # data API calls when page n is acked
        sent.extend(emits)

    runtime.rt.send = send
    route = Route(T.FETCH, fetch, after_fetch, timeout=10, attempts=2, follow=True)
    agent = runtime.agent(route)
    await agent.handle(None, FetchPage(taskId="t1", seq=0, spec=spec(),
                                       runtimeContext={"page": 0}), {})
    # every page was sent in order, and no FetchPage went to the broker
    assert [(e.topic, e.payload.seq) for e in sent] == [(T.PAGES, s) for s in range(4)]
    # page n+1 was already being fetched while page n was sent
    assert all(asked >= n + 2 for n, asked in enumerate(marks_at_send[:3])), marks_at_send
    assert [r["runtimeContext"]["page"] for r in data_api.requests] == [0, 1, 2, 3]  # once each
    marks = await ctx.checkpoints.get("t1")
    assert marks["fetched"] == "3" and marks["next_seq"] == "3"


async def test_a_chain_resumes_from_the_recorded_cursor(make_ctx, data_api):
    # given pages 0..1 fetched and recorded, then the worker died
    ctx = make_ctx()
    await running(ctx, "t1")
    for seq in range(4):
        data_api.pages[seq] = ([{"id": seq * 10 + i} for i in range(10)], seq == 3)
    await ctx.checkpoints.set("t1", request=request("t1").model_dump_json())
    runtime = Runtime(FakeApp(), ctx, [])
    sent = []

    async def send(emits, tp=None):
        sent.extend(emits)
        if emits[-1].payload.seq == 1:
            raise ConnectionError("worker killed")  # after page 1 is out, nothing more

    runtime.rt.send = send
    agent = runtime.agent(Route(T.FETCH, fetch, after_fetch, timeout=10, follow=True))
    with pytest.raises(ConnectionError):
        await agent.handle(None, FetchPage(taskId="t1", seq=0, spec=spec(),
                                           runtimeContext={"page": 0}), {})
    # when the sweeper re-drives from the checkpoint (last recorded: page 0)
    from streams.sweeper import redrive
    cmds = [e.payload for e in await redrive(ctx, "t1") if e.topic == T.FETCH]
    assert [(c.seq, c.runtimeContext, c.rowsBefore) for c in cmds] == [(1, {"page": 1}, 10)]
    sent.clear()
    runtime.rt.send = lambda emits, tp=None: _extend(sent, emits)
    await agent.handle(None, cmds[0], {})
    # then the rest comes once from there (page 1 again: the page writer overwrites its shard)
    assert [e.payload.seq for e in sent] == [1, 2, 3]


async def _extend(sent, emits):
    sent.extend(emits)


async def test_page_n_plus_1_is_requested_while_page_n_is_processed(make_ctx, data_api):
    ctx = make_ctx()
    await running(ctx, "t1")
    for seq in range(3):
        data_api.pages[seq] = ([{"id": seq * 10 + i} for i in range(10)], seq == 2)
    cmd = FetchPage(taskId="t1", seq=0, spec=spec(), runtimeContext={"page": 0})
    for seq in range(3):
        emits = await fetch(ctx, cmd)
        # page seq+1 is asked for before its step runs (at most AHEAD_PAGES
        # beyond this one), in order, and never twice
        for _ in range(500):
            pages_asked = [r["runtimeContext"]["page"] for r in data_api.requests]
            if len(pages_asked) >= min(seq + 2, 3):
                break
            await asyncio.sleep(0.01)
        assert pages_asked == list(range(len(pages_asked))), pages_asked
        assert min(seq + 2, 3) <= len(pages_asked) <= min(seq + 1 + AHEAD_PAGES, 3)
        if seq < 2:
            cmd = emits[-1].payload
    assert ctx.ahead == {}  # nothing left ahead after the last page


async def test_with_a_row_cap_page_n_plus_1_is_asked_once_page_n_is_decoded(make_ctx, data_api):
    """A row cap may end the export on this page: the next page is asked for
    only once the page is decoded (not from its envelope), once, and taken
    by the next step."""
    ctx = make_ctx()
    await running(ctx, "t1")
    for seq in range(3):
        data_api.pages[seq] = ([{"id": seq * 10 + i} for i in range(10)], False)
    cmd = FetchPage(taskId="t1", seq=0, spec=spec(max_rows=25), runtimeContext={"page": 0})
    batches = []
    for seq in range(3):
        emits = await fetch(ctx, cmd)
        batches.append(emits[0].payload)
        if seq < 2:
            assert [(a.seq, a.cursor) for a in ctx.ahead["t1"]] == [(seq + 1, {"page": seq + 1})]
            cmd = emits[-1].payload
    assert [r["runtimeContext"]["page"] for r in data_api.requests] == [0, 1, 2]  # once each
    assert [(b.rowCount, b.isLast, b.truncated) for b in batches] == \
        [(10, False, False), (10, False, False), (5, True, True)]
    assert ctx.ahead == {}


async def test_a_failing_step_forgets_the_page_asked_ahead(make_ctx, data_api, monkeypatch):
    ctx = make_ctx()
    await running(ctx, "t1")
    for seq in range(3):
        data_api.pages[seq] = ([{"id": seq * 10 + i} for i in range(10)], False)
    import streams.handlers as handlers

    def broken(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(handlers, "page_shard", broken)
    with pytest.raises(OSError):
        await fetch(ctx, FetchPage(taskId="t1", seq=0, spec=spec(), runtimeContext={"page": 0}))
    assert ctx.ahead == {}


async def test_the_last_progress_is_projected_before_success_as_a_rebuild_would(make_ctx):
    from streams.runtime import ExportHooks
    ctx = make_ctx()
    await running(ctx, "t1")
    for seq in range(2):
        await write_shard(ctx, page(seq, ids(seq)))
    emits = await write_shard(ctx, page(2, ids(2), last=True))
    applied = []
    apply = ctx.projection.apply

    async def recording(event):
        applied.append(event.status)
        return await apply(event)

    ctx.projection.apply = recording
    await ExportHooks(ctx, set()).before_send(None, emits)
    # the same order the lifecycle topic holds: PROGRESS, then SUCCESS
    assert applied == ["PROGRESS", "SUCCESS"]
    state = await ctx.projection.get("t1")
    assert state["status"] == "SUCCESS" and state["exportedRows"] == 30


@pytest.mark.parametrize("fmt", ["csv", "xlsx", "parquet", "jsonl"])
async def test_a_page_handed_off_in_process_writes_what_its_shard_gives(make_ctx, data_api,
                                                                         fmt):
    # given pages with the cells normalization treats specially (mixed
    # types, big ints, decimals, instants, nested values, all-null columns)
    nasty = [{"id": 2**53 + 1, "m": "N/A", "d": 0.10, "t": "2013-01-01T10:00:00Z",
              "j": {"b": [1, 2]}, "z": None},
             {"id": 7, "m": 3, "d": 12.5, "t": "2024-03-10T02:30:00", "j": None, "z": None}]
    for seq in range(3):
        data_api.pages[seq] = (nasty + ids(seq, 3), seq == 2)
    outputs = []
    for keep in (True, False):
        ctx = make_ctx()
        await running(ctx, "t1")
        cmd = FetchPage(taskId="t1", seq=0, spec=spec(fmt=fmt), runtimeContext={"page": 0})
        done = None
        for seq in range(3):
            emits = await fetch(ctx, cmd)
            batch = emits[0].payload
            # when the page writer of the same worker takes the page handed off
            # (keep) or, as on another worker, reads its shard back
            assert (batch.shardKey in ctx.handed) is True
            if not keep:
                ctx.handed.clear()
            written = await write_shard(ctx, batch)
            assert batch.shardKey not in ctx.handed  # taken, not kept
            if seq < 2:
                cmd = emits[-1].payload
            else:
                done = written[-1].payload
        outputs.append(ctx.store.get_bytes(done.file.key))
        assert done.status == "SUCCESS" and done.file.rows == 15
    # then the file is the same bytes either way
    assert outputs[0] == outputs[1]


def test_handed_off_pages_are_bounded(make_ctx, monkeypatch):
    ctx = make_ctx()
    monkeypatch.setattr(files, "HANDOFF_BYTES", 3500)
    batch = pa.RecordBatch.from_pydict({"x": list(range(200))})  # 1,600 bytes
    for seq in range(5):
        files.hand_off(ctx, files.shard_key("t1", seq), batch, {})
    # only the newest fit; the writer reads the older ones from their shards
    assert list(ctx.handed) == [files.shard_key("t1", 3), files.shard_key("t1", 4)]
    assert files.take_handed(ctx, files.shard_key("t1", 0)) is None


async def fetch_three_pages(ctx: Context, s, data_api) -> None:
    """Run the fetch steps of pages 0..2 of task t1 in order: each page asked
    once, batches in order, nothing left prepared after the last page."""
    cmd = FetchPage(taskId="t1", seq=0, spec=s, runtimeContext={"page": 0})
    batches = []
    for seq in range(3):
        emits = await fetch(ctx, cmd)
        batches.append(emits[0].payload)
        if seq < 2:
            cmd = emits[-1].payload
    assert [r["runtimeContext"]["page"] for r in data_api.requests] == [0, 1, 2]  # once each
    assert [(b.seq, b.rowCount, b.isLast) for b in batches] == [(0, 10, False), (1, 10, False),
                                                                (2, 10, True)]
    assert ctx.ahead == {}


async def test_page_n_plus_1_is_requested_before_page_n_rows_are_parsed(make_ctx, data_api,
                                                                        monkeypatch):
    """The fast decode reads a page's envelope (its cursor) apart from its rows:
    page n+1 is asked for while page n's rows are still being parsed, once,
    and the next step takes that answer (docs/architecture.md, "Write while
    fetching")."""
    import threading

    import sinks.fastpage as fastpage
    s = typed_spec()
    ctx = make_ctx()
    await running(ctx, "t1", s)
    for seq in range(3):
        data_api.pages[seq] = (ids(seq), seq == 2)
    asked_while_parsing = []
    read_json = fastpage.pj.read_json

    def parse(source, *a, **k):  # in the decoding thread: wait (a while) for the next page's request
        import json
        # the rows alone are parsed ({"rows": [...]}); page seq holds ids seq*10..
        nxt = json.loads(source.getvalue())["rows"][0]["id"] // 10 + 1

        def asked():
            return any(r["runtimeContext"].get("page") == nxt for r in data_api.requests)
        for _ in range(200):
            if asked():
                break
            threading.Event().wait(0.01)
        asked_while_parsing.append(asked())
        return read_json(source, *a, **k)

    monkeypatch.setattr(fastpage.pj, "read_json", parse)
    await fetch_three_pages(ctx, s, data_api)
    # pages 1 and 2 were asked for while the rows of pages 0 and 1 were parsed
    assert asked_while_parsing == [True, True, False]


async def test_page_n_plus_1_is_decoded_while_page_n_is_parsed(make_ctx, data_api,
                                                               monkeypatch):
    """One export's pages are parsed two at a time: page n+1, asked for from
    page n's envelope, is decoded as soon as it arrives, while page n's rows
    are still being parsed in another thread (docs/architecture.md, "Data
    flow of an export", step 3); each page is asked once, the batches come
    out in order and nothing is left prepared after the last page."""
    import json
    import threading

    import sinks.fastpage as fastpage
    s = typed_spec()
    ctx = make_ctx()
    await running(ctx, "t1", s)
    for seq in range(3):
        data_api.pages[seq] = (ids(seq), seq == 2)
    parsing = {seq: threading.Event() for seq in range(3)}
    overlapped = []
    read_json = fastpage.pj.read_json

    def parse(source, *a, **k):  # in a decoding thread
        seq = json.loads(source.getvalue())["rows"][0]["id"] // 10  # the rows alone are parsed
        parsing[seq].set()
        if seq + 1 in parsing and not data_api.pages[seq][1]:
            # page seq's rows wait (a while) for page seq+1's parse to begin
            overlapped.append(parsing[seq + 1].wait(5))
        return read_json(source, *a, **k)

    monkeypatch.setattr(fastpage.pj, "read_json", parse)
    await fetch_three_pages(ctx, s, data_api)
    assert overlapped == [True, True]


async def test_a_page_refused_after_its_envelope_forgets_the_page_asked_ahead(make_ctx, data_api,
                                                                              monkeypatch):
    """The envelope's cursor is a hint: when the page's rows are then refused,
    the request made for the next page is cancelled and forgotten."""
    from plait.errors import PermanentError
    s = typed_spec()
    ctx = make_ctx()
    await running(ctx, "t1", s)
    data_api.pages[0] = ([{"id": 1, "name": "a"}, {"id": "x", "name": "b"}], False)  # an id that is no int
    data_api.pages[1] = (ids(1), True)
    import streams.handlers as handlers

    def refuse(*a, **k):
        raise PermanentError("page 0: refused")
    monkeypatch.setattr(handlers, "page_shard", refuse)
    with pytest.raises(PermanentError):
        await fetch(ctx, FetchPage(taskId="t1", seq=0, spec=s, runtimeContext={"page": 0}))
    assert ctx.ahead == {}


async def test_progress_is_reported_at_most_every_interval_and_always_for_the_last_page(
        make_ctx, monkeypatch):
    """The page writer reports the first page it writes of a task, then at
    most every PROGRESS_EVERY seconds, and the last page always (its PROGRESS
    says ``writing``); the projection still ends with every row."""
    import streams.shards as shards
    now = [1000.0]
    monkeypatch.setattr(shards.time, "monotonic", lambda: now[0])
    ctx = make_ctx()
    await running(ctx, "t1")
    reported = []
    for seq in range(5):
        emits = await write_shard(ctx, page(seq, ids(seq)))
        reported.append([e.payload.exportedRows for e in emits])
        now[0] += shards.PROGRESS_EVERY / 2
    assert reported == [[10], [], [30], [], [50]]
    emits = await write_shard(ctx, page(5, ids(5), last=True))
    assert [(e.payload.status, e.payload.exportedRows) for e in emits] == \
        [("PROGRESS", 60), ("SUCCESS", 60)]
    # a file that does not grow here (built from the shards at the end) reports every page
    await running(ctx, "t2")
    await write_shard(ctx, page(0, ids(0), task="t2"))
    ctx.files["t2"].stop()
    for seq in (1, 2):
        emits = await write_shard(ctx, page(seq, ids(seq), task="t2"))
        assert [e.payload.exportedRows for e in emits] == [10 * (seq + 1)]


async def test_a_worker_taking_over_a_task_reports_its_first_page_at_once(make_ctx):
    """The last reporter's id is how the sweeper tells who drives a task
    (streams.sweeper.owner_alive): a worker catching up reports at once."""
    a = make_ctx()
    await running(a, "t1")
    for seq in range(2):
        await write_shard(a, page(seq, ids(seq)))
    b = make_ctx(worker_id="w-b")
    b.store, b.projection, b.checkpoints = a.store, a.projection, a.checkpoints
    b.worker_id = "w-b"
    emits = await write_shard(b, page(2, ids(2)))
    assert [(e.payload.status, e.payload.workerId) for e in emits] == [("PROGRESS", "w-b")]


async def test_a_page_waiting_for_its_turn_to_decode_does_not_ask_ahead_yet(make_ctx, data_api):
    """Memory: a task waiting for a decode slot (other tasks' pages are
    being decoded) holds its own answer only; it asks for its next page once
    its turn came (docs/architecture.md, "Write while fetching")."""
    s = typed_spec()
    ctx = make_ctx()
    await running(ctx, "t1", s)
    for seq in range(2):
        data_api.pages[seq] = (ids(seq), seq == 1)
    from streams.context import DECODE_SLOTS
    for _ in range(DECODE_SLOTS):  # other pages are being decoded
        await ctx.decoding.acquire()
    step = asyncio.ensure_future(fetch(ctx, FetchPage(taskId="t1", seq=0, spec=s,
                                                      runtimeContext={"page": 0})))
    for _ in range(20):
        await asyncio.sleep(0.01)
    assert [r["runtimeContext"]["page"] for r in data_api.requests] == [0] and not ctx.ahead.get("t1")
    for _ in range(DECODE_SLOTS):
        ctx.decoding.release()
    emits = await step
    assert [r["runtimeContext"]["page"] for r in data_api.requests] == [0, 1]
    assert [(a.seq, a.cursor) for a in ctx.ahead["t1"]] == [(1, {"page": 1})]
    assert emits[-1].payload.seq == 1
    from streams.handlers import forget_ahead
    forget_ahead(ctx, "t1")


async def test_a_page_whose_task_ended_while_its_shard_was_read_is_dropped(make_ctx,
                                                                           monkeypatch):
    """A fetch fails permanently while the page writer is on an earlier page:
    the task's cleanup deletes the shard the writer is about to read. The
    page is dropped (it was a KeyError: dead-lettered as an internal error,
    and its failure hook cleaned the task up a second time, at once)."""
    from plait.events import Lifecycle
    from streams import shards
    from streams.layout import shard_key

    ctx = make_ctx()
    await running(ctx, "t1")
    s = spec()
    real = shards._decode_page

    def ended_meanwhile(store, pg):
        asyncio.run_coroutine_threadsafe(ctx.projection.apply(Lifecycle(
            taskId="t1", status="FAILED", sysCode=s.sysCode, bizType=s.bizType,
            userId=s.userId, errorMessage="page 3: HTTP 400")), loop).result()
        return real(store, pg)

    loop = asyncio.get_running_loop()
    monkeypatch.setattr(shards, "_decode_page", ended_meanwhile)
    gone = PageBatch(taskId="t1", seq=1, shardKey=shard_key("t1", 1), rowCount=10,
                     rowsBefore=10, isLast=False, spec=s)
    assert await write_shard(ctx, gone) == []
    assert "t1" not in ctx.files


async def test_a_missing_shard_of_a_running_task_still_fails_it(make_ctx):
    from streams.layout import shard_key

    ctx = make_ctx()
    await running(ctx, "t1")
    gone = PageBatch(taskId="t1", seq=1, shardKey=shard_key("t1", 1), rowCount=10,
                     rowsBefore=10, isLast=False, spec=spec())
    with pytest.raises(KeyError):
        await write_shard(ctx, gone)
