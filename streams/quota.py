"""Daily row quotas: pages charged (``plait.quotas.charge``, ``count_page``),
each task once; a pulled page is cut where the quota ends (SUCCESS,
truncated, ``daily_quota_cut``)."""
from __future__ import annotations

import asyncio

from plait import quotas
from plait.events import FetchPage, PageBatch
from streams.context import Context
from streams.files import encode_shard


def _caller(ctx: Context, sys_code: str):
    caller = ctx.callers.by_sys_code(sys_code) if ctx.callers is not None else None
    return caller if caller is not None and caller.dailyRows is not None else None


async def within_quota(ctx: Context, cmd: FetchPage, taken: tuple) -> tuple:
    """A fetched page's tuple charged to the quota; cut to the last page when over."""
    caller = _caller(ctx, cmd.spec.sysCode)
    if caller is None:
        return taken
    page, rows, last, truncated, shard, batch, quality = taken
    cp = ctx.checkpoints
    # a partition's chain counts its rows in the task's own checkpoint hash
    allowed = await quotas.charge(cp.redis, cp.prefix, caller, cmd.taskId, cmd.rowsBefore + rows,
                                  partition=cmd.partition if cmd.partitions > 1 else None)
    keep = allowed - cmd.rowsBefore
    if keep >= rows:
        return taken
    batch = batch.slice(0, max(0, keep))
    quality = {**quality, quotas.QUOTA_NOTE: 1}
    shard = await asyncio.to_thread(encode_shard, batch, quality)
    return page, batch.num_rows, True, True, shard, batch, quality


async def count_pushed(ctx: Context, page: PageBatch, rows: int) -> int:
    """Count a pushed page of ``rows`` rows once for its task, and against its
    caller's quota (never cut: the API refuses when used up); the task's rows
    accepted so far, over every partition and producer, this page's included."""
    return await ctx.checkpoints.count_page(page.taskId, f"{page.partition}:{page.seq}", rows,
                                            _caller(ctx, page.spec.sysCode))
