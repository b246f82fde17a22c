"""Object-store keys of a task's intermediate data, and its cleanup:
``pages/{taskId}/...json`` (blobs too big to go inline) and
``shards/{taskId}/[p{partition:05d}/]{seq:08d}.arrow``, keyed by
(task id, :class:`PageKey`) so a redelivery overwrites its own
(docs/kafka-rules.md #1). Shards stored as ``.parquet`` by an earlier version are still read
(:func:`legacy_shard_key`), so an export running across an upgrade keeps its pages."""
from __future__ import annotations

import asyncio
from typing import Iterator, NamedTuple

from streams.context import Context

#: Schema metadata key holding a shard's quality counts (JSON).
QUALITY_KEY = b"plait.quality"


class PageKey(NamedTuple):
    """A page's place in its file; tuples compare in file order."""

    partition: int
    seq: int


def page_keys(ends: list[int]) -> Iterator[PageKey]:
    """Every page of a task in file order; ``ends[p]`` is partition p's last seq."""
    for partition, last in enumerate(ends):
        for seq in range(last + 1):
            yield PageKey(partition, seq)


def shard_prefix(task_id: str) -> str:
    """Object-store prefix of a task's shards."""
    return f"shards/{task_id}/"


#: A shard's file name ends with this (an Arrow IPC file, ``streams.files.encode_shard``).
SHARD_SUFFIX = ".arrow"
#: What an earlier version's shards (Parquet) end with.
LEGACY_SHARD_SUFFIX = ".parquet"


def shard_key(task_id: str, seq: int, partition: int = 0) -> str:
    """Page (``partition``, ``seq``)'s shard key; keys sort in file order."""
    if partition == 0:
        return f"{shard_prefix(task_id)}{seq:08d}{SHARD_SUFFIX}"
    return f"{shard_prefix(task_id)}p{partition:05d}/{seq:08d}{SHARD_SUFFIX}"


def legacy_shard_key(key: str) -> str:
    """Where an earlier version stored the shard of :func:`shard_key` ``key``."""
    return key.removesuffix(SHARD_SUFFIX) + LEGACY_SHARD_SUFFIX


def parse_shard_key(task_id: str, key: str) -> PageKey | None:
    """The :class:`PageKey` of a shard key of ``task_id``, else None."""
    rest = key.removeprefix(shard_prefix(task_id))
    partition = 0
    if rest.startswith("p") and "/" in rest:
        head, rest = rest[1:].split("/", 1)
        if not head.isdigit():
            return None
        partition = int(head)
    name = next((rest[:-len(s)] for s in (SHARD_SUFFIX, LEGACY_SHARD_SUFFIX) if rest.endswith(s)),
                "")
    if rest == key or not name.isdigit():
        return None
    return PageKey(partition, int(name))


def page_prefix(task_id: str) -> str:
    """Object-store prefix of a task's out-of-line page blobs."""
    return f"pages/{task_id}/"


def page_key(task_id: str, seq: int, partition: int = 0) -> str:
    """Page (``partition``, ``seq``)'s blob key (rows as a JSON array)."""
    if partition == 0:
        return f"{page_prefix(task_id)}{seq:08d}.json"
    return f"{page_prefix(task_id)}p{partition:05d}/{seq:08d}.json"


def forget_ahead(ctx: Context, chain_id: str) -> None:
    """Cancel the pages prepared ahead for ``chain_id`` (a task id or ``FetchPage.chainId``);
    idempotent."""
    for entry in ctx.ahead.pop(chain_id, ()):
        entry.future.cancel()
        entry.future.add_done_callback(lambda f: f.cancelled() or f.exception())


async def cleanup(ctx: Context, task_id: str) -> None:
    """Delete a task's shards, blobs and local state, every partition's (docs/kafka-rules.md #6)."""
    for chain_id in [c for c in ctx.ahead if c == task_id or c.startswith(f"{task_id}#")]:
        forget_ahead(ctx, chain_id)
    tf = ctx.files.pop(task_id, None)
    if tf is not None:
        await asyncio.to_thread(tf.discard)
    prefix = shard_prefix(task_id)
    for key in [k for k in ctx.handed if k.startswith(prefix)]:
        ctx.handed_bytes -= ctx.handed.pop(key)[0].nbytes
    await asyncio.to_thread(ctx.store.delete_prefix, shard_prefix(task_id))
    await asyncio.to_thread(ctx.store.delete_prefix, page_prefix(task_id))
