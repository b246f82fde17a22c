"""Finalizing on a re-drive: the sweeper's FinalizeRequested for a task whose
last page was written but whose worker died before SUCCESS. Builds the file
from the task's shards in (partition, seq) order (or uses the file grown on this worker
when it is complete), uploads it and reports SUCCESS with rows, bytes, sha256
and a signed link (docs/architecture.md, "Data flow of an export", step 5). In the normal flow the
last page's handler finishes the file in place (``streams.shards``)."""
from __future__ import annotations

import asyncio

from plait.events import FinalizeRequested
from plait.lifecycle import TERMINAL
from streams.context import Context, Emit
from streams.files import (Built, build_file, finish, report_stage, sha256_file,
                           stage_reporter, success)
from streams.layout import cleanup

__all__ = ["Built", "after_finalize", "build_file", "finalize", "sha256_file"]


async def finalize(ctx: Context, cmd: FinalizeRequested) -> list[Emit]:
    """FinalizeRequested -> the file in object storage and SUCCESS.

    Skips a task already finalized or ended (cancelled, timed out). Reports
    the stages ``writing`` (before the file is built) and ``uploading`` (before
    its upload) as PROGRESS (``docs/events.md``, ``stage``); the handler is
    the span ``export.finalize`` (``plait.agent``), with ``export.write_file``
    and ``export.upload`` inside.
    """
    marks = await ctx.checkpoints.get(cmd.taskId)
    state = await ctx.projection.get(cmd.taskId)
    if "finalized" in marks or (state and state["status"] in TERMINAL):
        return []
    doc = cmd.spec.documentConfig
    await report_stage(ctx, cmd.spec, cmd.taskId, "writing")
    built = await asyncio.to_thread(finish, ctx, cmd.taskId, cmd.lastSeqs or cmd.lastSeq, doc,
                                    stage_reporter(ctx, cmd.spec, cmd.taskId))
    return [await success(ctx, cmd.spec, cmd.taskId, built, cmd.truncated)]


async def after_finalize(ctx: Context, cmd: FinalizeRequested, emits: list[Emit]) -> None:
    """Once SUCCESS is acked: mark finalized and delete shards and page blobs."""
    await ctx.checkpoints.set(cmd.taskId, finalized=1)
    await cleanup(ctx, cmd.taskId)
