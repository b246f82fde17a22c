"""Push mode, many producers, pages in any order, on in-memory members: the
file is written in (partition, seq) order as pages become contiguous, pages
that arrive ahead wait as their shards, a repeated page is written once, a
worker that did not see the earlier pages catches up from the shards, and a
page missing too long fails the task naming its partition and seq."""
from __future__ import annotations

import csv
import io
import random

import pyarrow.parquet as pq
import pytest

from export_harness import running
from plait.errors import PermanentError
from plait.events import PageBatch
from plait.spec import ExportSpec
from streams import files
from streams.files import PageOrder
from streams.layout import (PageKey, legacy_shard_key, page_keys, parse_shard_key,
                            shard_key)
from streams.shards import after_write_shard, write_shard
from streams.sweeper import sweep

pytestmark = pytest.mark.timeout(30)

SPEC = ExportSpec.model_validate({
    "sysCode": "s", "bizType": "push", "userId": "u", "dataConfig": {"mode": "push"},
    "documentConfig": {"fileName": "pushed", "fileFormat": "csv"}})
#: A format whose file grows in file order (not concatenable: one file of row groups)
IN_ORDER = SPEC.model_copy(update={"documentConfig": SPEC.documentConfig.model_copy(
    update={"fileFormat": "parquet"})})

#: partition -> its pages (ids continue across partitions, so file order is id order)
PAGES = {0: 3, 1: 4}


def rows_of(partition: int, seq: int) -> list[dict]:
    first = 100 * partition + 10 * seq
    return [{"id": first + i} for i in range(10)]


def page(partition: int, seq: int, task: str = "t1", spec: ExportSpec = SPEC) -> PageBatch:
    return PageBatch(taskId=task, seq=seq, partition=partition, partitions=len(PAGES),
                     rows=rows_of(partition, seq), rowCount=10,
                     isLast=seq == PAGES[partition] - 1, spec=spec)


def all_pages() -> list[tuple[int, int]]:
    return [(p, s) for p, n in PAGES.items() for s in range(n)]


def expected_ids() -> list[int]:
    return [r["id"] for p, s in all_pages() for r in rows_of(p, s)]


def file_ids(ctx, done) -> list[int]:
    if done.file.fileFormat == "parquet":
        return pq.read_table(io.BytesIO(ctx.store.get_bytes(done.file.key)))["id"].to_pylist()
    text = ctx.store.get_bytes(done.file.key).decode("utf-8-sig")
    return [int(r[0]) for r in list(csv.reader(io.StringIO(text)))[1:]]


async def feed(ctx, order, spec: ExportSpec = SPEC) -> list:
    """Write the pages in ``order``; the emits of each, with the after-hook run."""
    out = []
    for p, s in order:
        emits = await write_shard(ctx, page(p, s, spec=spec))
        await after_write_shard(ctx, page(p, s, spec=spec), emits)
        out.append(emits)
    return out


def success_of(emitted: list) -> list:
    return [e.payload for emits in emitted for e in emits if e.payload.status == "SUCCESS"]


def test_page_keys_sort_in_file_order_and_round_trip():
    keys = [PageKey(1, 0), PageKey(0, 10), PageKey(0, 2), PageKey(2, 1)]
    assert sorted(keys) == [PageKey(0, 2), PageKey(0, 10), PageKey(1, 0), PageKey(2, 1)]
    assert sorted(shard_key("t", k.seq, k.partition) for k in keys) == [
        shard_key("t", k.seq, k.partition) for k in sorted(keys)]
    assert all(parse_shard_key("t", shard_key("t", k.seq, k.partition)) == k for k in keys)
    assert parse_shard_key("t", "shards/t/x.arrow") is None
    assert parse_shard_key("t", "shards/t/00000003.csv") is None
    # an earlier version's shards (Parquet) keep their place
    assert parse_shard_key("t", legacy_shard_key(shard_key("t", 3, 2))) == PageKey(2, 3)
    assert legacy_shard_key(shard_key("t", 3)) == "shards/t/00000003.parquet"
    for ends, after in [({0: 2}, PageKey(1, 0)), ({}, PageKey(0, 3))]:
        order = PageOrder(partitions=2, ends=ends)
        for seq in range(3):
            order.passed(PageKey(0, seq))
        assert order.next == after and order.heads()[0] == after
    assert list(page_keys([1, 0])) == [PageKey(0, 0), PageKey(0, 1), PageKey(1, 0)]


def test_a_page_is_missing_only_when_a_later_page_of_its_partition_arrived():
    order = PageOrder(partitions=2)
    order.ahead |= {PageKey(1, 0), PageKey(1, 1)}  # partition 1 waits for partition 0
    assert order.gaps(10.0) == []
    order.ahead.add(PageKey(1, 3))
    assert order.gaps(11.0) == [(PageKey(1, 2), 11.0)]
    # a gap that shows later keeps its own time, and does not move the first one's
    order.ahead.add(PageKey(0, 2))
    assert order.gaps(12.0) == [(PageKey(0, 0), 12.0), (PageKey(1, 2), 11.0)]
    # once 1/2 comes, 0/0 is missing since 0/2 was seen, not since 1/2 came
    order.ahead.add(PageKey(1, 2))
    assert order.gaps(13.0) == [(PageKey(0, 0), 12.0)]


async def test_a_gap_that_fills_does_not_restart_the_clock_of_another(make_ctx, monkeypatch):
    # given pages 0/1 and 1/1 both missing from t=100
    clock = [100.0]
    monkeypatch.setattr("streams.shards.time.time", lambda: clock[0])
    ctx = make_ctx(push_page_timeout_seconds=20)
    await running(ctx, "t1", SPEC)
    await feed(ctx, [(0, 0), (0, 2), (1, 0), (1, 2)])
    # when 0/1 comes at t=115
    clock[0] = 115.0
    await feed(ctx, [(0, 1)])
    # then 1/1 is marked missing since t=100, and the sweeper fails the task at t=121
    mark = __import__("json").loads((await ctx.checkpoints.get("t1"))["missing"])
    assert (mark["page"], mark["since"]) == ([1, 1], 100.0)
    emits, ended = await sweep(ctx, now=121.0)
    assert ended == ["t1"] and [e.payload.status for e in emits] == ["FAILED"]


def test_pages_disagreeing_on_their_partitions_are_refused():
    order = PageOrder(partitions=2)
    with pytest.raises(PermanentError, match="partitions 3 differs from 2"):
        order.note(PageKey(0, 0), False, 3)
    order.note(PageKey(1, 2), True, 2)
    with pytest.raises(PermanentError, match="page 4 of partition 1: isLast was page 2"):
        order.note(PageKey(1, 4), False, 2)


def test_a_partition_beyond_partitions_names_the_field():
    with pytest.raises(ValueError, match="partition 2 is not below partitions 2"):
        PageBatch(taskId="t", seq=0, partition=2, partitions=2, rows=[], rowCount=0, spec=SPEC)


@pytest.mark.parametrize("shuffle_seed", [1, 2, 3])
async def test_two_partitions_shuffled_give_the_file_in_order(make_ctx, shuffle_seed):
    # given two partitions' pages in a random order
    ctx = make_ctx()
    await running(ctx, "t1", SPEC)
    order = all_pages()
    random.Random(shuffle_seed).shuffle(order)
    # when they are written
    emitted = await feed(ctx, order)
    # then exactly one SUCCESS, once every page is in, with every row once, in order
    done = success_of(emitted)
    assert len(done) == 1 and done[0].exportedRows == 70
    assert file_ids(ctx, done[0]) == expected_ids()
    assert ctx.files == {}  # finished and forgotten
    assert ctx.store.list("shards/t1/") == []  # cleaned up after SUCCESS


async def test_pages_ahead_wait_until_the_gap_fills(make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1", IN_ORDER)
    await feed(ctx, [(0, 2), (1, 0), (1, 1)], IN_ORDER)
    tf = ctx.files["t1"]
    assert tf.order.next == PageKey(0, 0) and tf.pages == 0
    assert tf.order.ahead == {PageKey(0, 2), PageKey(1, 0), PageKey(1, 1)}
    assert len(ctx.store.list("shards/t1/")) == 3
    await feed(ctx, [(0, 0)], IN_ORDER)  # fills the front: page 0 only (page 1 still missing)
    assert tf.order.next == PageKey(0, 1) and tf.pages == 1
    await feed(ctx, [(0, 1)], IN_ORDER)  # the gap fills: 0/1, 0/2 (end of 0), 1/0, 1/1 follow
    assert tf.order.next == PageKey(1, 2) and tf.pages == 5


async def test_in_parts_each_partition_goes_in_as_its_pages_come(make_ctx, monkeypatch):
    # given csv (a concatenable format): partition 1's pages do not wait for partition 0's
    ctx = make_ctx()
    await running(ctx, "t1", SPEC)
    read: list[str] = []
    get_bytes = ctx.store.get_bytes
    monkeypatch.setattr(ctx.store, "get_bytes", lambda key: read.append(key) or get_bytes(key))
    await feed(ctx, [(0, 0), (1, 0), (1, 1), (0, 2)])
    tf = ctx.files["t1"]
    assert tf.parts and tf.pages == 3 and tf.order.next == PageKey(0, 1)
    assert tf.order.ahead == {PageKey(0, 2)}  # a gap in its own partition still waits
    done = success_of(await feed(ctx, [(1, 3), (0, 1), (1, 2)]))
    # then the file is in partition order, and no page was read back from its shard
    assert file_ids(ctx, done[0]) == expected_ids()
    assert read == [done[0].file.key]


@pytest.mark.parametrize("fmt,flavour,later,first", [
    ("csv", "excel", [{"name": "b", "id": 2}], [{"id": 1, "name": "a"}]),  # keys in another order
    ("csv", "plain", [{"a": 3, "b": 4, "c": 5}], [{"a": 1, "c": 2}]),  # a null field left out
    ("jsonl", "plain", [{"a": 2, "extra": True, "b": "y"}], [{"a": 1, "b": "x"}]),
], ids=["csv-key-order", "csv-missing-field", "jsonl-extra-field"])
async def test_in_parts_the_first_page_of_all_fixes_the_columns(make_ctx, fmt, flavour, later,
                                                                first):
    # given partition 1's page reaching the writer before partition 0's first page
    spec = SPEC.model_copy(update={"documentConfig": SPEC.documentConfig.model_copy(
        update={"fileFormat": fmt, "csvFlavour": flavour})})
    ctx = make_ctx()
    await running(ctx, "t1", spec)
    for p, rows in [(1, later), (0, first)]:
        emits = await write_shard(ctx, PageBatch(taskId="t1", seq=0, partition=p, partitions=2,
                                                 rows=rows, rowCount=1, isLast=True, spec=spec))
    grown = ctx.store.get_bytes(success_of([emits])[0].file.key)
    # then the file is the one built from the shards (uploaded at the same key, read after):
    # columns as page 0 of partition 0 has them
    built = files.build_file(ctx.store, "t1", [0, 0], spec.documentConfig)
    assert grown == ctx.store.get_bytes(built.key)


async def test_declared_columns_must_show_on_the_first_page_of_the_file_only(make_ctx):
    # given declared columns, and page 0 of partition 1 without one of them
    spec = ExportSpec.model_validate(SPEC.model_dump() | {"documentConfig": {
        "fileName": "pushed", "fileFormat": "csv",
        "columns": [{"fieldName": "id"}, {"fieldName": "name"}]}})
    ctx = make_ctx()
    await running(ctx, "t1", spec)
    for p, rows in [(1, [{"id": 2}]), (0, [{"id": 1, "name": "a"}])]:
        emits = await write_shard(ctx, PageBatch(taskId="t1", seq=0, partition=p, partitions=2,
                                                 rows=rows, rowCount=1, isLast=True, spec=spec))
    # then the file holds both pages, the missing field empty, as one partition would
    text = ctx.store.get_bytes(success_of([emits])[0].file.key).decode("utf-8-sig")
    assert text.splitlines() == ["id,name", "1,a", "2,"]
    # and page 0 of partition 0 without it still fails, naming the field
    await running(ctx, "t2", spec)
    with pytest.raises(PermanentError, match="fieldName 'name' is in no row of the first page"):
        await write_shard(ctx, PageBatch(taskId="t2", seq=0, partition=0, partitions=2,
                                         rows=[{"id": 1}], rowCount=1, spec=spec))


@pytest.mark.parametrize("order", [[(0, 2, False), (0, 1, True)],
                                   [(0, 0, False), (0, 1, False), (0, 2, False), (0, 1, True)]],
                         ids=["later-page-waiting", "later-page-in-the-file"])
async def test_an_is_last_before_a_later_page_of_its_partition_fails_naming_both(make_ctx, order):
    ctx = make_ctx()
    await running(ctx, "t1", SPEC)
    with pytest.raises(PermanentError, match=r"^page 1 of partition 0: isLast, but page 2 of "
                                             r"that partition came before it$"):
        for p, s, last in order:
            await write_shard(ctx, PageBatch(taskId="t1", seq=s, partition=p, partitions=1,
                                             rows=rows_of(p, s), rowCount=10, isLast=last,
                                             spec=SPEC))


async def test_a_page_past_the_is_last_after_success_is_kept_in_the_dlq(make_ctx):
    # given a task of one partition ended SUCCESS at its isLast page 0
    ctx = make_ctx()
    await running(ctx, "t1", SPEC)
    done = await write_shard(ctx, PageBatch(taskId="t1", seq=0, partition=0, partitions=1,
                                            rows=rows_of(0, 0), rowCount=10, isLast=True,
                                            spec=SPEC))
    [ok] = success_of([done])
    await ctx.projection.apply(ok)
    # when page 1 of that partition comes, and page 0 again (a producer's retry)
    late = await write_shard(ctx, page(0, 1))
    again = await write_shard(ctx, page(0, 0))
    # then page 1 goes to export.dlq naming both pages; the repeat goes without a word
    [letter] = late
    assert letter.topic == "export.dlq" and letter.payload.error == (
        "page 1 of partition 0 came after the task ended SUCCESS with page 0 as that "
        "partition's isLast: its rows are not in the file")
    assert again == []


async def test_pages_ahead_wait_decoded_up_to_a_bound_the_rest_as_shards(make_ctx, monkeypatch):
    # given room for one waiting page (10 int64 ids: 80 bytes)
    monkeypatch.setattr(files, "WAITING_BYTES", 100)
    ctx = make_ctx()
    await running(ctx, "t1", IN_ORDER)
    read: list[str] = []
    get_bytes = ctx.store.get_bytes
    monkeypatch.setattr(ctx.store, "get_bytes", lambda key: read.append(key) or get_bytes(key))
    await feed(ctx, [(1, 1), (0, 2), (1, 0)], IN_ORDER)
    # then the waiting page nearest in file order is held, the others are only stored
    tf = ctx.files["t1"]
    assert set(tf.waiting) == {PageKey(0, 2)} and tf.waiting_bytes == 80
    read.clear()
    done = success_of(await feed(ctx, [(0, 0), (0, 1), (1, 2), (1, 3)], IN_ORDER))
    # when the gap fills, the held page is appended as held, the others from their shards
    assert shard_key("t1", 2, 0) not in read
    assert {shard_key("t1", 0, 1), shard_key("t1", 1, 1)} <= set(read)
    assert not tf.waiting and tf.waiting_bytes == 0
    assert file_ids(ctx, done[0]) == expected_ids()


async def test_a_repeated_page_is_written_once(make_ctx):
    ctx = make_ctx()
    await running(ctx, "t1", SPEC)
    order = all_pages()
    emitted = await feed(ctx, [order[3], order[3]] + order[:3] + [order[0], order[3]]
                         + order[4:-1] + [order[1]] + order[-1:])
    done = success_of(emitted)
    assert len(done) == 1 and file_ids(ctx, done[0]) == expected_ids()


@pytest.mark.parametrize("first, repeat_on", [([(1, 3), (0, 0)], "a"), ([(1, 3)], "b")],
                         ids=["stored-then-rebuilt", "held-ahead-on-another-worker"])
async def test_a_repeated_page_with_other_rows_keeps_its_first_copy(make_ctx, first, repeat_on):
    # given worker a took page 1/3 ahead of the file and died; the same page with other rows
    # reaches a (its file is then built from the shards) or b, which holds nothing
    a, b = make_ctx(), make_ctx()
    b.store, b.checkpoints, b.projection = a.store, a.checkpoints, a.projection
    await running(a, "t1", SPEC)
    await feed(a, first)
    other = page(1, 3).model_copy(update={"rows": [{"id": 9000 + i} for i in range(4)],
                                          "rowCount": 4})
    emitted = [await write_shard(a if repeat_on == "a" else b, other)]
    # when worker b writes the rest
    emitted += await feed(b, [k for k in all_pages() if k not in first])
    # then the file and every report hold the first copy
    done = success_of(emitted)
    assert len(done) == 1 and file_ids(b, done[0]) == expected_ids()
    assert done[0].exportedRows == len(expected_ids())


async def test_another_worker_catches_up_from_the_shards(make_ctx):
    # given worker a wrote some pages, in and out of order, then died
    a, b = make_ctx(), make_ctx()
    b.store, b.checkpoints, b.projection = a.store, a.checkpoints, a.projection
    await running(a, "t1", SPEC)
    order = [(1, 3), (0, 0), (1, 0), (0, 2), (0, 1)]
    await feed(a, order)
    # when worker b receives the redelivered last one and the rest
    rest = [(0, 1)] + [k for k in all_pages() if k not in order]
    emitted = await feed(b, rest)
    # then b's file holds every row once, in order
    done = success_of(emitted)
    assert len(done) == 1 and file_ids(b, done[0]) == expected_ids()


async def test_a_page_missing_too_long_fails_naming_partition_and_seq(make_ctx):
    ctx = make_ctx(push_page_timeout_seconds=5)
    await running(ctx, "t1", SPEC)
    await feed(ctx, [(0, 0), (0, 1), (0, 2), (1, 0), (1, 2), (1, 3)])  # 1/1 never comes
    marks = await ctx.checkpoints.get("t1")
    assert '"page": [1, 1]' in marks["missing"]
    since = __import__("json").loads(marks["missing"])["since"]
    # the sweeper leaves it alone within the timeout, then fails it
    emits, ended = await sweep(ctx, now=since + 4)
    assert not [e for e in emits if e.payload.status == "FAILED"] and ended == []
    emits, ended = await sweep(ctx, now=since + 6)
    failed = [e.payload for e in emits if e.payload.status == "FAILED"]
    assert ended == ["t1"] and len(failed) == 1
    assert "page 1 of partition 1 missing" in failed[0].errorMessage


async def test_a_gap_that_fills_clears_the_missing_mark(make_ctx):
    ctx = make_ctx(push_page_timeout_seconds=5)
    await running(ctx, "t1", SPEC)
    await feed(ctx, [(0, 1), (0, 0)])
    assert "missing" not in await ctx.checkpoints.get("t1")
    await feed(ctx, [(1, 2)])
    assert "missing" in await ctx.checkpoints.get("t1")
    await feed(ctx, [(1, 0), (1, 1)])
    assert "missing" not in await ctx.checkpoints.get("t1")


async def test_a_worker_that_takes_the_file_over_keeps_the_gaps_clocks(make_ctx, monkeypatch):
    # given worker a saw 1/1 missing from t=100 and 0/0 from t=105, then died
    clock = [100.0]
    monkeypatch.setattr("streams.shards.time.time", lambda: clock[0])
    a, b = make_ctx(push_page_timeout_seconds=20), make_ctx(push_page_timeout_seconds=20)
    b.store, b.checkpoints, b.projection = a.store, a.checkpoints, a.projection
    await running(a, "t1", SPEC)
    await feed(a, [(1, 0), (1, 2)])
    clock[0] = 105.0
    await feed(a, [(0, 2)])
    # when worker b opens the file at t=110, then 0/0 comes at t=112
    clock[0] = 110.0
    await feed(b, [(1, 3)])
    mark = __import__("json").loads((await b.checkpoints.get("t1"))["missing"])
    assert (mark["page"], mark["since"]) == ([1, 1], 100.0)
    clock[0] = 112.0
    await feed(b, [(0, 0)])
    # then 1/1 still counts from t=100, and fails the task at t=121
    mark = __import__("json").loads((await b.checkpoints.get("t1"))["missing"])
    assert (mark["page"], mark["since"]) == ([1, 1], 100.0)
    emits, ended = await sweep(b, now=121.0)
    assert ended == ["t1"] and [e.payload.status for e in emits] == ["FAILED"]


async def test_a_redrive_finalizes_every_partition_from_the_shards(make_ctx):
    # given every page's shard stored by a worker that died before SUCCESS,
    # its checkpoints saying where each partition ends
    from plait import topics as T
    from plait.events import FinalizeRequested
    from sinks.values import rows_to_batch
    from streams.files import encode_shard
    from streams.finalize import finalize
    from streams.sweeper import redrive
    from export_harness import request
    a, b = make_ctx(), make_ctx()
    b.store, b.checkpoints, b.projection = a.store, a.checkpoints, a.projection
    await running(a, "t1", SPEC)
    await feed(a, all_pages()[:-1])
    batch, quality = rows_to_batch(rows_of(1, 3), SPEC.documentConfig)
    a.store.put_bytes(shard_key("t1", 3, 1), encode_shard(batch, quality))
    await a.checkpoints.set("t1", request=request("t1", SPEC).model_dump_json(), last_seq=3,
                            ends=[2, 3])
    # when the sweeper re-drives it and another worker finalizes
    cmds = [e for e in await redrive(b, "t1") if e.topic == T.FINALIZE]
    assert len(cmds) == 1 and cmds[0].payload.lastSeqs == [2, 3]
    [done] = await finalize(b, cmds[0].payload)
    # then the file holds every partition's rows in order
    assert file_ids(b, done.payload) == expected_ids()
    # and a shard gone missing is named with its partition
    a.store.delete_prefix(shard_key("t1", 1, 1))
    with pytest.raises(PermanentError, match="pages 1 of partition 1"):
        await finalize(b, FinalizeRequested(taskId="t1", lastSeq=3, lastSeqs=[2, 3], spec=SPEC))
