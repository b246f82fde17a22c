"""Page writing: one Parquet shard per page, at a key derived from
(task id, seq), so a redelivered page overwrites its own shard and nothing is
counted twice (docs/architecture.md, "Data flow of an export", step 4); and the page appended to the
task's output file growing on this worker (``streams.files``), so after the
last page only the tail is left to write. The last page's handler closes,
uploads and reports the file in place: pages are keyed by task id, so one
partition, hence one worker at a time, owns a task's pages
(``docs/architecture.md``, "Write while fetching")."""
from __future__ import annotations

import asyncio
import json
import time

import pyarrow as pa

from plait import metrics, tracing
from plait.events import PageBatch
from plait.lifecycle import TERMINAL
from plait.errors import PermanentError
from sinks.values import all_dicts, loads_exact, rows_to_batch
from streams.context import Context, Emit
from streams.emits import lifecycle
from streams.files import (PageOrder, TaskFile, decode_shard, drop, encode_shard, finish, grow,
                           report_stage, rescan, stage_reporter, success, take_handed)
from streams.layout import PageKey, cleanup, shard_key, shard_prefix
from streams.partitions import task_progress
from streams.quota import count_pushed


def _decode_page(store, page: PageBatch) -> tuple[pa.RecordBatch, dict[str, int], bytes | None]:
    """Blocking: the page's rows as a batch, its quality counts and its shard
    to store (None when the fetcher stored it already: ``shardKey``)."""
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
    batch, quality = rows_to_batch(rows, page.spec.documentConfig, page=page.seq)
    return batch, quality, encode_shard(batch, quality)


async def write_shard(ctx: Context, page: PageBatch) -> list[Emit]:
    """PageBatch -> shard in object storage, the page placed in the task's
    growing file (``streams.files.grow``: appended in (partition, seq) order
    as the pages before it are in, else kept as its shard until they are),
    PROGRESS; once every page of every partition is in, the file closed,
    uploaded and SUCCESS. A page of an ended task is dropped.

    Order matters for re-drives: a partition's end (``isLast``) is recorded
    before its shard is stored, the shard before the page is placed, and
    ``last_seq`` before the file is finished, so a worker dying at any point
    leaves shards and checkpoints for whoever takes over (the redelivered
    page, or the sweeper's FinalizeRequested). A page missing while later
    pages of its partition arrived is recorded (checkpoint ``missing``) for
    the sweeper's ``PLAIT_PUSH_PAGE_TIMEOUT_SECONDS``.

    Stages (``docs/events.md``, ``stage``): each page's PROGRESS says
    ``fetching`` (the file grows along); the completing page's PROGRESS says
    ``writing`` and is sent at once (the tail is written and the file closed
    next), then ``uploading`` before the upload; SUCCESS follows. Finishing is
    the span ``export.finalize`` (with ``export.write_file`` and
    ``export.upload``), as on the re-drive path.

    Raises ``PermanentError`` (task FAILED) when rows break the column spec,
    the writer refuses them or pages disagree on their partitions; ``KeyError``
    when its shard or blob is missing and the task has not ended (a page whose
    task ended and was cleaned up while it was read is dropped: its shard is
    gone with the task's).
    """
    state = await ctx.projection.get(page.taskId)
    if state and state["status"] in TERMINAL:
        drop(ctx, page.taskId)
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
    if data is not None:
        await asyncio.to_thread(ctx.store.put_bytes,
                                shard_key(page.taskId, page.seq, page.partition), data)
        await count_pushed(ctx, page)  # a pushed page's rows count against the daily quota
    await asyncio.to_thread(grow, ctx, tf, key, batch, quality)
    if await ctx.projection.status(page.taskId) in TERMINAL:  # cancelled meanwhile: the
        # task's cleanup may have run before this shard landed; leave nothing behind
        await asyncio.to_thread(ctx.store.delete_prefix, shard_prefix(page.taskId))
        drop(ctx, page.taskId)
        return []
    if not tf.order.complete:
        await _mark_missing(ctx, tf)
        if not (page.isLast or due(ctx, page.taskId)):
            return []
    exported, total = await task_progress(ctx, page)  # summed over partitions
    progress = lifecycle(page.spec, page.taskId, "PROGRESS", seq=page.seq,
                         exportedRows=exported, totalRows=total, workerId=ctx.worker_id,
                         stage="fetching")
    if not tf.order.complete:
        return [progress]
    return await _complete(ctx, page, tf, progress)


async def _page_batch(ctx: Context, page: PageBatch
                      ) -> tuple[pa.RecordBatch, dict[str, int], bytes | None] | None:
    """The page's batch, quality counts and shard bytes to store (None: the
    fetcher stored it); None when its shard or blob is gone with its ended task."""
    handed = take_handed(ctx, page.shardKey) if page.shardKey is not None else None
    if handed is not None:  # fetched on this worker: no need to read its shard back
        return handed[0], handed[1], None
    try:
        return await asyncio.to_thread(_decode_page, ctx.store, page)
    except KeyError:  # its shard or blob is gone: the task's cleanup ran meanwhile
        if await ctx.projection.status(page.taskId) not in TERMINAL:
            raise
        drop(ctx, page.taskId)
        return None


async def _task_file(ctx: Context, page: PageBatch) -> TaskFile:
    """The task's growing file on this worker; opened from the checkpoints
    (partition ends, the missing page recorded) when this worker has none,
    and caught up from the stored shards unless this is a pull task's first
    page (its pages come in order from one fetch chain)."""
    tf = ctx.files.get(page.taskId)
    if tf is not None:
        return tf
    marks = await ctx.checkpoints.get(page.taskId)
    ends = {int(k[4:]): int(v) for k, v in marks.items() if k.startswith("end:")}
    order = PageOrder(int(marks.get("partitions", page.partitions)), ends)
    tf = TaskFile(page.taskId, page.spec.documentConfig, order)
    if "missing" in marks:
        tf.missing_mark = PageKey(*json.loads(marks["missing"])["page"])
    if page.shardKey is None or (page.partition, page.seq) != (0, 0):
        try:
            await asyncio.to_thread(rescan, ctx.store, tf)
        except BaseException:
            tf.discard()
            raise
    ctx.files[page.taskId] = tf
    return tf


async def _mark_missing(ctx: Context, tf: TaskFile) -> None:
    """Record (or clear) the task's first missing page in its checkpoints
    (``missing``: ``{"page": [partition, seq], "since": epoch seconds}``) when
    it changed; the sweeper fails the task once it is missing too long."""
    missing = tf.order.missing()
    if missing == tf.missing_mark:
        return
    if missing is None:
        await ctx.checkpoints.clear(tf.task_id, "missing")
    else:
        await ctx.checkpoints.set(tf.task_id, missing={"page": list(missing),
                                                       "since": time.time()})
    tf.missing_mark = missing


async def _complete(ctx: Context, page: PageBatch, tf: TaskFile, progress: Emit) -> list[Emit]:
    """Every page is in: record ``last_seq`` (and each partition's end), then
    finish the file in place and report SUCCESS; only PROGRESS when the task
    was finalized already (a redelivered page)."""
    marks = await ctx.checkpoints.get(page.taskId)
    if "finalized" in marks:
        return [progress]
    ends = tf.order.ends_list()
    truncated = page.truncated or "cut" in marks
    await ctx.checkpoints.set(page.taskId, last_seq=ends[-1], ends=ends,
                              truncated=int(truncated))
    if tf.missing_mark is not None:
        await ctx.checkpoints.clear(page.taskId, "missing")
    doc = page.spec.documentConfig
    with tracing.span("export.finalize", **{"plait.task_id": page.taskId,
                                            "plait.last_seq": ends[-1]}), \
            metrics.StageTimer("export.finalize"):
        # the completing page's PROGRESS goes out now (not after the handler),
        # so the lifecycle topic reads fetching -> writing -> uploading -> SUCCESS
        sent = await report_stage(ctx, page.spec, page.taskId, "writing", progress)
        on_stage = stage_reporter(ctx, page.spec, page.taskId)
        built = await asyncio.to_thread(finish, ctx, page.taskId, ends, doc, on_stage)
        done = await success(ctx, page.spec, page.taskId, built, truncated)
    return [done] if sent else [progress, done]


#: Seconds between the ``fetching`` PROGRESS reports of a task whose file
#: grows on this worker: the first page it writes reports, then the first
#: page written at least this long after the last report, and the last page
#: always. A report per page (~50 per second on a fast data API) cost a
#: lifecycle event sent and projected per page, and nobody reads progress
#: that often (the API shows the projection; SSE streams its changes).
PROGRESS_EVERY = 0.5


def due(ctx: Context, task_id: str) -> bool:
    """Whether the page just appended to ``task_id``'s growing file should be
    reported (:data:`PROGRESS_EVERY`); True when the file does not grow here
    (built from shards at the end: every page reports). Marks it reported."""
    tf = ctx.files.get(task_id)
    if tf is None or not tf.grown:
        return True
    now = time.monotonic()
    if tf.reported_at is not None and now - tf.reported_at < PROGRESS_EVERY:
        return False
    tf.reported_at = now
    return True


async def after_write_shard(ctx: Context, page: PageBatch, emits: list[Emit]) -> None:
    """After SUCCESS (sent by the page that completed the file) is acked:
    mark finalized and delete the shards and page blobs."""
    if any(getattr(e.payload, "status", None) == "SUCCESS" for e in emits):
        await ctx.checkpoints.set(page.taskId, finalized=1)
        await cleanup(ctx, page.taskId)
