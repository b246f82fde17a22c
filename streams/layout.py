"""Where a task's intermediate data lives in object storage, and its cleanup.

- ``pages/{taskId}/{seq:08d}.json``: a fetched page too big to travel inline
  in its PageBatch (``Settings.page_inline_max_bytes``).
- ``shards/{taskId}/{seq:08d}.parquet`` (partition 0) and
  ``shards/{taskId}/p{partition:05d}/{seq:08d}.parquet`` (partition >= 1):
  one Parquet shard per page, the page's quality counts (JSON) in the schema
  metadata under ``QUALITY_KEY``. Keys derive from (task id, :class:`PageKey`),
  so a redelivered page overwrites its own shard (docs/kafka-rules.md #1),
  and sort as the pages go into the file.

A page's place in a task's file is its :class:`PageKey` ``(partition, seq)``:
partition order first, then page order within a partition. A task fed by one
chain of pages (pull mode, one producer) has partition 0 only.

Final files go to ``results/{taskId}/{file name}`` (``streams.finalize``).
:func:`cleanup` also forgets what the task holds on this worker.
"""
from __future__ import annotations

import asyncio
from typing import Iterator, NamedTuple

from streams.context import Context

#: Schema metadata key holding a shard's quality counts (JSON).
QUALITY_KEY = b"plait.quality"


class PageKey(NamedTuple):
    """Where a page goes in its task's file: ``partition`` (0 first), then
    ``seq`` (0 first) within it. Tuples compare in file order."""

    partition: int
    seq: int


def following(key: PageKey, ends: dict[int, int]) -> PageKey:
    """The page after ``key`` in file order: the next seq of its partition,
    or page 0 of the next partition when ``ends`` (partition -> its last
    seq, as far as known) says ``key`` closes its partition."""
    if ends.get(key.partition) == key.seq:
        return PageKey(key.partition + 1, 0)
    return PageKey(key.partition, key.seq + 1)


def page_keys(ends: list[int]) -> Iterator[PageKey]:
    """Every page of a task in file order; ``ends[p]`` is partition p's last seq."""
    for partition, last in enumerate(ends):
        for seq in range(last + 1):
            yield PageKey(partition, seq)


def shard_prefix(task_id: str) -> str:
    """Object-store prefix of a task's shards."""
    return f"shards/{task_id}/"


def shard_key(task_id: str, seq: int, partition: int = 0) -> str:
    """Object key of page (``partition``, ``seq``)'s shard; zero-padded so
    keys sort in file order (digits sort before ``p``)."""
    if partition == 0:
        return f"{shard_prefix(task_id)}{seq:08d}.parquet"
    return f"{shard_prefix(task_id)}p{partition:05d}/{seq:08d}.parquet"


def parse_shard_key(task_id: str, key: str) -> PageKey | None:
    """The :class:`PageKey` of one of ``task_id``'s shard keys; None for any
    other key."""
    rest = key.removeprefix(shard_prefix(task_id))
    partition = 0
    if rest.startswith("p") and "/" in rest:
        head, rest = rest[1:].split("/", 1)
        if not head.isdigit():
            return None
        partition = int(head)
    name = rest.removesuffix(".parquet")
    if rest == key or name == rest or not name.isdigit():
        return None
    return PageKey(partition, int(name))


def page_prefix(task_id: str) -> str:
    """Object-store prefix of a task's out-of-line page blobs."""
    return f"pages/{task_id}/"


def page_key(task_id: str, seq: int, partition: int = 0) -> str:
    """Object key of page (``partition``, ``seq``)'s blob (rows as a JSON array)."""
    if partition == 0:
        return f"{page_prefix(task_id)}{seq:08d}.json"
    return f"{page_prefix(task_id)}p{partition:05d}/{seq:08d}.json"


def forget_ahead(ctx: Context, chain_id: str) -> None:
    """Cancel and forget the pages prepared ahead for ``chain_id`` (a task id,
    or a partition's ``FetchPage.chainId``) on this worker (``Context.ahead``,
    ``streams.handlers.prepare``), if any; their outcome is read when they
    end, never raised. Idempotent."""
    for entry in ctx.ahead.pop(chain_id, ()):
        entry.future.cancel()
        entry.future.add_done_callback(lambda f: f.cancelled() or f.exception())


async def cleanup(ctx: Context, task_id: str) -> None:
    """Delete a task's shards and page blobs from object storage (in a thread,
    docs/kafka-rules.md #6), its growing file and its pages prepared ahead
    on this worker (every partition's); idempotent."""
    for chain_id in [c for c in ctx.ahead if c == task_id or c.startswith(f"{task_id}#")]:
        forget_ahead(ctx, chain_id)
    tf = ctx.files.pop(task_id, None)
    if tf is not None:
        await asyncio.to_thread(tf.discard)
    prefix = shard_prefix(task_id)
    for key in [k for k in ctx.handed if k.startswith(prefix)]:  # pages kept for the writer
        ctx.handed.pop(key, None)
    await asyncio.to_thread(ctx.store.delete_prefix, shard_prefix(task_id))
    await asyncio.to_thread(ctx.store.delete_prefix, page_prefix(task_id))
