"""Page writing: one shard per (task id, seq), so a redelivery overwrites
its own (docs/architecture.md, "Data flow of an export", step 4), appended to
the task's growing file; the last page finishes the file in place
(docs/architecture.md, "Write while fetching")."""
from __future__ import annotations

import asyncio
import json
import time

import pyarrow as pa

from plait import metrics, tracing
from plait import topics as T
from plait.events import DeadLetter, PageBatch
from plait.lifecycle import TERMINAL
from plait.logs import get_logger
from plait.errors import PermanentError
from sinks.values import all_dicts, loads_exact, rows_to_batch
from streams.context import Context, Emit
from streams.emits import lifecycle
from streams.files import (PageOrder, TaskFile, decode_shard, drop, encode_shard, finish,
                           get_shard, grow, report_stage, rescan, stage_reporter, success,
                           take_handed)
from streams.layout import PageKey, cleanup, shard_key, shard_prefix
from streams.partitions import task_progress
from streams.quota import count_pushed

log = get_logger("plait.shards")


def _decode_page(store, page: PageBatch) -> tuple[pa.RecordBatch, dict[str, int], bytes | None]:
    """Blocking: (batch, quality, shard bytes or None when already stored)."""
    if page.shardKey is not None:
        batch, quality = decode_shard(store.get_bytes(page.shardKey))
        return batch, quality, None
    rows = page.rows
    if rows is None and page.rowsJson is not None:
        try:
            rows = loads_exact(page.rowsJson.encode("utf-8", "surrogatepass"))
        except ValueError as exc:
            raise PermanentError(f"page {page.seq} of partition {page.partition}: field "
                                 f"rowsJson is not JSON ({str(exc)[:200]})") from exc
        if not isinstance(rows, list) or not all_dicts(rows):
            raise PermanentError(f"page {page.seq} of partition {page.partition}: field "
                                 f"rowsJson is not a JSON array of objects")
    elif rows is None:
        rows = loads_exact(store.get_bytes(page.blobKey))
    batch, quality = rows_to_batch(rows, page.spec.documentConfig, page=page.seq,
                                   partition=page.partition)
    return batch, quality, encode_shard(batch, quality)


async def write_shard(ctx: Context, page: PageBatch) -> list[Emit]:
    """PageBatch -> shard, page placed in the growing file, PROGRESS; the
    completing page finishes the file and sends SUCCESS. Each checkpoint is
    written before the step it guards, so a re-drive can resume anywhere.
    Raises ``PermanentError`` on bad rows or partitions, ``KeyError`` when a
    live task's shard or blob is missing."""
    state = await ctx.projection.get(page.taskId)
    if state and state["status"] in TERMINAL:
        drop(ctx, page.taskId)
        if page.shardKey is None and state["status"] == "SUCCESS":
            return await _past_the_end(ctx, page)
        return []
    decoded = await _page_batch(ctx, page)
    if decoded is None:
        return []
    batch, quality, data = decoded
    key = PageKey(page.partition, page.seq)
    tf = await _task_file(ctx, page)
    tf.order.note(key, page.isLast, page.partitions)
    if page.isLast:  # durable before its shard: a catch-up elsewhere knows the end
        cut = {"cut": 1} if page.truncated else {}  # any partition cut: the task is truncated
        await ctx.checkpoints.set(page.taskId, **{f"end:{page.partition}": page.seq,
                                                  "partitions": page.partitions}, **cut)
    accepted = None  # a pushed page's task: rows accepted so far, counted once per page
    if data is not None:
        # a repeated page goes on as its first copy: its rows are counted once, and a file
        # built again from the shards (another worker, a schema change) reads that copy
        stored = shard_key(page.taskId, page.seq, page.partition)
        if await asyncio.to_thread(ctx.store.exists, stored):
            batch, quality = await asyncio.to_thread(lambda: decode_shard(get_shard(ctx.store,
                                                                                    stored)))
        else:
            await asyncio.to_thread(ctx.store.put_bytes, stored, data)
        accepted = await count_pushed(ctx, page, batch.num_rows)
    await asyncio.to_thread(grow, ctx, tf, key, batch, quality)
    return await _grown(ctx, page, tf, accepted, page.isLast)


async def _past_the_end(ctx: Context, page: PageBatch) -> list[Emit]:
    """A pushed page reaching its task after SUCCESS: a repeat of a page in the file goes
    (at-least-once delivery), one past its partition's ``isLast`` page is kept in ``export.dlq``
    naming both, since its rows are not in the file (docs/events.md, "Push contract: many
    producers, pages in any order")."""
    end = await ctx.checkpoints.field(page.taskId, f"end:{page.partition}")
    if end is None or page.seq <= int(end):
        return []
    error = (f"page {page.seq} of partition {page.partition} came after the task ended SUCCESS "
             f"with page {end} as that partition's isLast: its rows are not in the file")
    log.warning("task %s: %s", page.taskId, error)
    return [Emit(T.DLQ, page.taskId, DeadLetter(
        topic=ctx.topics.name(T.PAGES), key=page.taskId, error=error, errorClass="PermanentError",
        payload=page.model_dump_json(exclude={"spec"})[:100_000]))]


def page_run(page: PageBatch) -> str | None:
    """The run :func:`write_pages` takes ``page`` in: its task id when its shard is stored
    (``shardKey``: a pulled page), else None (handled alone by :func:`write_shard`)."""
    return page.taskId if page.shardKey is not None else None


async def write_pages(ctx: Context, pages: list[PageBatch]) -> list[Emit]:
    """Pulled pages of one task (same :func:`page_run`), in the order consumed, written as
    :func:`write_shard` writes them one after another, with one projection read, one thread
    hand-off and one status check for the run instead of one each per page: the page writer of
    a partitioned export takes every page of its task on one worker, so this is what keeps it
    up with the fetching workers (docs/architecture.md, "Write while fetching"). Pages are
    decoded one at a time as they are appended. The PROGRESS and SUCCESS are those of the
    run's last page. Raises as :func:`write_shard`."""
    last = pages[-1]
    state = await ctx.projection.get(last.taskId)
    if state and state["status"] in TERMINAL:
        drop(ctx, last.taskId)
        return []
    tf = await _task_file(ctx, pages[0])
    ends: dict[str, int] = {}
    for page in pages:
        tf.order.note(PageKey(page.partition, page.seq), page.isLast, page.partitions)
        if page.isLast:
            ends[f"end:{page.partition}"] = page.seq
    if ends:  # durable before the pages are appended, as write_shard does
        cut = {"cut": 1} if any(p.truncated for p in pages if p.isLast) else {}
        await ctx.checkpoints.set(last.taskId, **ends, partitions=last.partitions, **cut)
    items = [(PageKey(p.partition, p.seq), p.shardKey, take_handed(ctx, p.shardKey))
             for p in pages]
    try:
        await asyncio.to_thread(_grow_stored, ctx, tf, items)
    except KeyError:
        if await ctx.projection.status(last.taskId) not in TERMINAL:
            raise
        drop(ctx, last.taskId)
        return []
    return await _grown(ctx, last, tf, None, bool(ends))


def _grow_stored(ctx: Context, tf: TaskFile,
                 items: list[tuple[PageKey, str, tuple[pa.RecordBatch, dict[str, int]] | None]]
                 ) -> None:
    """Blocking: :func:`streams.files.grow` each ``(page, shard key, handed batch or None)``,
    reading the shard of a page not handed off. ``KeyError`` when a shard is missing."""
    for key, stored, handed in items:
        batch, quality = handed or decode_shard(ctx.store.get_bytes(stored))
        grow(ctx, tf, key, batch, quality)


async def _grown(ctx: Context, page: PageBatch, tf: TaskFile, accepted: int | None,
                 report: bool) -> list[Emit]:
    """After ``page`` is in the growing file: the PROGRESS (when ``report``, else at most
    every :data:`PROGRESS_EVERY`), and SUCCESS once the file holds every page; nothing when
    the task ended meanwhile (its shards deleted, its file dropped)."""
    if await ctx.projection.status(page.taskId) in TERMINAL:  # cleanup may have run already
        await asyncio.to_thread(ctx.store.delete_prefix, shard_prefix(page.taskId))
        drop(ctx, page.taskId)
        return []
    if not tf.order.complete:
        await _mark_missing(ctx, tf)
        if not (report or due(ctx, page.taskId)):
            return []
    if accepted is None:
        exported, total = await task_progress(ctx, page)  # summed over partitions
    else:
        exported, total = accepted, page.totalRows if page.partitions == 1 else None
    progress = lifecycle(page.spec, page.taskId, "PROGRESS", seq=page.seq,
                         exportedRows=exported, totalRows=total, workerId=ctx.worker_id,
                         stage="fetching")
    if not tf.order.complete:
        return [progress]
    return await _complete(ctx, page, tf, progress)


async def _page_batch(ctx: Context, page: PageBatch
                      ) -> tuple[pa.RecordBatch, dict[str, int], bytes | None] | None:
    """:func:`_decode_page`, or None when its ended task's shard is gone."""
    handed = take_handed(ctx, page.shardKey) if page.shardKey is not None else None
    if handed is not None:
        return handed[0], handed[1], None
    try:
        return await asyncio.to_thread(_decode_page, ctx.store, page)
    except KeyError:
        if await ctx.projection.status(page.taskId) not in TERMINAL:
            raise
        drop(ctx, page.taskId)
        return None


async def _task_file(ctx: Context, page: PageBatch) -> TaskFile:
    """The task's growing file here; else opened from checkpoints and shards."""
    tf = ctx.files.get(page.taskId)
    if tf is not None:
        return tf
    marks = await ctx.checkpoints.get(page.taskId)
    ends = {int(k[4:]): int(v) for k, v in marks.items() if k.startswith("end:")}
    order = PageOrder(int(marks.get("partitions", page.partitions)), ends)
    tf = TaskFile(page.taskId, page.spec.documentConfig, order)
    if "missing" in marks:  # the gaps another owner saw open keep their clocks
        mark = json.loads(marks["missing"])
        for p, seq, since in mark.get("gaps") or [[*mark["page"], mark["since"]]]:
            order.known[PageKey(p, seq)] = since
        tf.missing_mark = [(k, t) for k, t in order.known.items()]
    # pages stored before this one may have gone to another worker: any page but a pulled
    # first page, and any page of a task with partitions (their chains run apart)
    if page.shardKey is None or (page.partition, page.seq) != (0, 0) or page.partitions > 1:
        try:
            await asyncio.to_thread(rescan, ctx.store, tf)
        except BaseException:
            tf.discard()
            raise
    ctx.files[page.taskId] = tf
    return tf


async def _mark_missing(ctx: Context, tf: TaskFile) -> None:
    """Checkpoint ``missing`` = ``{"page": [partition, seq], "since": epoch s, "gaps": [[partition,
    seq, since]]}``: the page missing longest (the sweeper's), and every partition's first gap
    (:meth:`streams.files.PageOrder.gaps`), so a worker that opens the file after this one keeps
    their clocks. Written when the gaps change."""
    gaps = tf.order.gaps(time.time())
    if gaps == tf.missing_mark:
        return
    if not gaps:
        await ctx.checkpoints.clear(tf.task_id, "missing")
    else:
        page, since = min(gaps, key=lambda g: (g[1], g[0]))  # missing longest: the sweeper's
        await ctx.checkpoints.set(tf.task_id, missing={
            "page": list(page), "since": since, "gaps": [[*k, t] for k, t in gaps]})
    tf.missing_mark = gaps


async def _complete(ctx: Context, page: PageBatch, tf: TaskFile, progress: Emit) -> list[Emit]:
    """Checkpoint the ends, finish the file, SUCCESS (once per task)."""
    marks = await ctx.checkpoints.get(page.taskId)
    if "finalized" in marks:
        return [progress]
    ends = tf.order.ends_list()
    truncated = page.truncated or "cut" in marks
    await ctx.checkpoints.set(page.taskId, last_seq=ends[-1], ends=ends,
                              truncated=int(truncated))
    if tf.missing_mark:
        await ctx.checkpoints.clear(page.taskId, "missing")
    doc = page.spec.documentConfig
    with tracing.span("export.finalize", **{"plait.task_id": page.taskId,
                                            "plait.last_seq": ends[-1]}), \
            metrics.StageTimer("export.finalize"):
        sent = await report_stage(ctx, page.spec, page.taskId, "writing", progress)
        on_stage = stage_reporter(ctx, page.spec, page.taskId)
        built = await asyncio.to_thread(finish, ctx, page.taskId, ends, doc, on_stage)
        done = await success(ctx, page.spec, page.taskId, built, truncated)
    return [done] if sent else [progress, done]


#: Least seconds between ``fetching`` PROGRESS reports of a growing file.
PROGRESS_EVERY = 0.5


def due(ctx: Context, task_id: str) -> bool:
    """Whether to report the page just appended (:data:`PROGRESS_EVERY`)."""
    tf = ctx.files.get(task_id)
    if tf is None or not tf.grown:
        return True
    now = time.monotonic()
    if tf.reported_at is not None and now - tf.reported_at < PROGRESS_EVERY:
        return False
    tf.reported_at = now
    return True


async def after_write_shard(ctx: Context, page: PageBatch, emits: list[Emit]) -> None:
    """After SUCCESS is acked: mark finalized, delete shards and blobs."""
    if any(getattr(e.payload, "status", None) == "SUCCESS" for e in emits):
        await ctx.checkpoints.set(page.taskId, finalized=1)
        await cleanup(ctx, page.taskId)
