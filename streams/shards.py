"""Shard writing: one Parquet file per page, at a key derived from
(task id, seq), so a redelivered page overwrites its own shard and nothing is
counted twice (docs/architecture.md, "Data flow of an export", step 4)."""
from __future__ import annotations

import asyncio
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq

from plait import topics as T
from plait.events import FinalizeRequested, PageBatch
from plait.lifecycle import TERMINAL
from sinks.values import json_number, rows_to_batch
from streams.context import Context, Emit
from streams.emits import lifecycle
from streams.layout import QUALITY_KEY, shard_key

def encode_shard(batch: pa.RecordBatch, quality: dict[str, int]) -> bytes:
    """A record batch as Parquet bytes, quality counts in the schema metadata."""
    meta = dict(batch.schema.metadata or {}) | {QUALITY_KEY: json.dumps(quality).encode()}
    table = pa.Table.from_batches([batch.replace_schema_metadata(meta)])
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


async def write_shard(ctx: Context, page: PageBatch) -> list[Emit]:
    """PageBatch -> shard in object storage, PROGRESS, and FinalizeRequested
    after the last page. A page of an ended task is dropped.

    Raises ``PermanentError`` (task FAILED) when rows break the column spec.
    """
    state = await ctx.projection.get(page.taskId)
    if state and state["status"] in TERMINAL:
        return []
    rows = page.rows
    if rows is None:
        raw = await asyncio.to_thread(ctx.store.get_bytes, page.blobKey)
        rows = json.loads(raw, parse_float=json_number)
    batch, quality = rows_to_batch(rows, page.spec.documentConfig, page=page.seq)
    data = encode_shard(batch, quality)
    key = shard_key(page.taskId, page.seq)
    await asyncio.to_thread(ctx.store.put_bytes, key, data)
    if await ctx.projection.status(page.taskId) in TERMINAL:  # cancelled meanwhile
        await asyncio.to_thread(ctx.store.delete_prefix, key)
        return []
    emits = [lifecycle(page.spec, page.taskId, "PROGRESS", seq=page.seq,
                       exportedRows=page.rowsBefore + page.rowCount,
                       totalRows=page.totalRows, workerId=ctx.worker_id, stage="fetching")]
    if page.isLast:
        emits.append(Emit(T.FINALIZE, page.taskId, FinalizeRequested(
            taskId=page.taskId, lastSeq=page.seq, truncated=page.truncated, spec=page.spec)))
    return emits


async def after_write_shard(ctx: Context, page: PageBatch, emits: list[Emit]) -> None:
    """After the last page: record where finalizing starts (for re-drives)."""
    if page.isLast:
        await ctx.checkpoints.set(page.taskId, last_seq=page.seq, truncated=int(page.truncated))
