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
import time

import pyarrow as pa

from plait import metrics, tracing
from plait.events import PageBatch
from plait.lifecycle import TERMINAL
from sinks.values import loads_exact, rows_to_batch
from streams.context import Context, Emit
from streams.emits import lifecycle
from streams.files import (decode_shard, drop, encode_shard, finish, grow, report_stage,
                           stage_reporter, success, take_handed)
from streams.layout import cleanup, shard_key, shard_prefix
from streams.quota import count_pushed


def _decode_page(store, page: PageBatch) -> tuple[pa.RecordBatch, dict[str, int], bytes | None]:
    """Blocking: the page's rows as a batch, its quality counts and its shard
    to store (None when the fetcher stored it already: ``shardKey``)."""
    if page.shardKey is not None:
        batch, quality = decode_shard(store.get_bytes(page.shardKey))
        return batch, quality, None
    rows = page.rows
    if rows is None:
        rows = loads_exact(store.get_bytes(page.blobKey))
    batch, quality = rows_to_batch(rows, page.spec.documentConfig, page=page.seq)
    return batch, quality, encode_shard(batch, quality)


async def write_shard(ctx: Context, page: PageBatch) -> list[Emit]:
    """PageBatch -> shard in object storage, the page appended to the task's
    growing file, PROGRESS; after the last page, the file closed, uploaded and
    SUCCESS. A page of an ended task is dropped.

    Order matters for re-drives: the shard is stored before the page is
    appended, and ``last_seq`` is recorded before the file is finished, so a
    worker dying at any point leaves shards 0..seq for whoever takes over
    (the redelivered page, or the sweeper's FinalizeRequested).

    Stages (``docs/events.md``, ``stage``): each page's PROGRESS says
    ``fetching`` (the file grows along); the last page's PROGRESS says
    ``writing`` and is sent at once (the tail is written and the file closed
    next), then ``uploading`` before the upload; SUCCESS follows. Finishing is
    the span ``export.finalize`` (with ``export.write_file`` and
    ``export.upload``), as on the re-drive path.

    Raises ``PermanentError`` (task FAILED) when rows break the column spec or
    the writer refuses them; ``KeyError`` when its shard or blob is missing
    and the task has not ended (a page whose task ended and was cleaned up
    while it was read is dropped: its shard is gone with the task's).
    """
    state = await ctx.projection.get(page.taskId)
    if state and state["status"] in TERMINAL:
        drop(ctx, page.taskId)
        return []
    handed = take_handed(ctx, page.shardKey) if page.shardKey is not None else None
    if handed is not None:  # fetched on this worker: no need to read its shard back
        (batch, quality), data = handed, None
    else:
        try:
            batch, quality, data = await asyncio.to_thread(_decode_page, ctx.store, page)
        except KeyError:  # its shard or blob is gone: the task's cleanup ran meanwhile
            if await ctx.projection.status(page.taskId) not in TERMINAL:
                raise
            drop(ctx, page.taskId)
            return []
    key = shard_key(page.taskId, page.seq)
    if data is not None:  # a pushed page: its rows count against the daily quota
        await asyncio.to_thread(ctx.store.put_bytes, key, data)
        await count_pushed(ctx, page)
    doc = page.spec.documentConfig
    await asyncio.to_thread(grow, ctx, page.taskId, page.seq, batch, quality, doc)
    if await ctx.projection.status(page.taskId) in TERMINAL:  # cancelled meanwhile: the
        # task's cleanup may have run before this shard landed; leave nothing behind
        await asyncio.to_thread(ctx.store.delete_prefix, shard_prefix(page.taskId))
        drop(ctx, page.taskId)
        return []
    progress = lifecycle(page.spec, page.taskId, "PROGRESS", seq=page.seq,
                         exportedRows=page.rowsBefore + page.rowCount,
                         totalRows=page.totalRows, workerId=ctx.worker_id, stage="fetching")
    if not page.isLast:
        return [progress] if due(ctx, page.taskId) else []
    marks = await ctx.checkpoints.get(page.taskId)
    if "finalized" in marks:
        return [progress]
    await ctx.checkpoints.set(page.taskId, last_seq=page.seq, truncated=int(page.truncated))
    with tracing.span("export.finalize", **{"plait.task_id": page.taskId,
                                            "plait.last_seq": page.seq}), \
            metrics.StageTimer("export.finalize"):
        # the last page's PROGRESS goes out now (not after the handler), so
        # the lifecycle topic reads fetching -> writing -> uploading -> SUCCESS
        sent = await report_stage(ctx, page.spec, page.taskId, "writing", progress)
        on_stage = stage_reporter(ctx, page.spec, page.taskId)
        built = await asyncio.to_thread(finish, ctx, page.taskId, page.seq, doc, on_stage)
        done = await success(ctx, page.spec, page.taskId, built, page.truncated)
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
    if tf is None:
        return True
    now = time.monotonic()
    if tf.reported_at is not None and now - tf.reported_at < PROGRESS_EVERY:
        return False
    tf.reported_at = now
    return True


async def after_write_shard(ctx: Context, page: PageBatch, emits: list[Emit]) -> None:
    """After the last page's SUCCESS is acked: mark finalized and delete the
    shards and page blobs."""
    if page.isLast and any(getattr(e.payload, "status", None) == "SUCCESS" for e in emits):
        await ctx.checkpoints.set(page.taskId, finalized=1)
        await cleanup(ctx, page.taskId)
