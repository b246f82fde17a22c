"""Finalizing on a re-drive (the sweeper's FinalizeRequested): the file from
shards, uploaded, SUCCESS (docs/architecture.md, "Data flow of an export", step 5)."""
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
    """FinalizeRequested -> file uploaded and SUCCESS; skips ended tasks."""
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
    await ctx.checkpoints.set(cmd.taskId, finalized=1)
    await cleanup(ctx, cmd.taskId)
