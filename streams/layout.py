"""Where a task's intermediate data lives in object storage, and its cleanup.

- ``pages/{taskId}/{seq:08d}.json``: a fetched page too big to travel inline
  in its PageBatch (``Settings.page_inline_max_bytes``).
- ``shards/{taskId}/{seq:08d}.parquet``: one Parquet shard per page, the
  page's quality counts (JSON) in the schema metadata under ``QUALITY_KEY``.
  Keys derive from (task id, seq), so a redelivered page overwrites its own
  shard (docs/kafka-rules.md #1).

Final files go to ``results/{taskId}/{file name}`` (``streams.finalize``).
:func:`cleanup` also forgets what the task holds on this worker.
"""
from __future__ import annotations

import asyncio

from streams.context import Context

#: Schema metadata key holding a shard's quality counts (JSON).
QUALITY_KEY = b"plait.quality"


def shard_prefix(task_id: str) -> str:
    """Object-store prefix of a task's shards."""
    return f"shards/{task_id}/"


def shard_key(task_id: str, seq: int) -> str:
    """Object key of page ``seq``'s shard (zero-padded so keys sort by seq)."""
    return f"{shard_prefix(task_id)}{seq:08d}.parquet"


def page_prefix(task_id: str) -> str:
    """Object-store prefix of a task's out-of-line page blobs."""
    return f"pages/{task_id}/"


def page_key(task_id: str, seq: int) -> str:
    """Object key of page ``seq``'s blob (rows as a JSON array)."""
    return f"{page_prefix(task_id)}{seq:08d}.json"


def forget_ahead(ctx: Context, task_id: str) -> None:
    """Cancel and forget the pages prepared ahead for ``task_id`` on this
    worker (``Context.ahead``, ``streams.handlers.prepare``), if any; their
    outcome is read when they end, never raised. Idempotent."""
    for entry in ctx.ahead.pop(task_id, ()):
        entry.future.cancel()
        entry.future.add_done_callback(lambda f: f.cancelled() or f.exception())


async def cleanup(ctx: Context, task_id: str) -> None:
    """Delete a task's shards and page blobs from object storage (in a thread,
    docs/kafka-rules.md #6), its growing file and its pages prepared ahead
    on this worker; idempotent."""
    forget_ahead(ctx, task_id)
    tf = ctx.files.pop(task_id, None)
    if tf is not None:
        await asyncio.to_thread(tf.discard)
    prefix = shard_prefix(task_id)
    for key in [k for k in ctx.handed if k.startswith(prefix)]:  # pages kept for the writer
        ctx.handed.pop(key, None)
    await asyncio.to_thread(ctx.store.delete_prefix, shard_prefix(task_id))
    await asyncio.to_thread(ctx.store.delete_prefix, page_prefix(task_id))
