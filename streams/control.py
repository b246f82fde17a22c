"""Control commands and the lifecycle projector (plain handlers)."""
from __future__ import annotations

from plait.events import CancelRequested, Lifecycle
from plait.lifecycle import TERMINAL
from streams.context import Context, Emit
from streams.emits import ended, record, start
from streams.layout import cleanup


async def cancel(ctx: Context, cmd: CancelRequested) -> list[Emit]:
    """CancelRequested -> CANCELLED, unless the task already ended.

    The fetcher sees the status before its next page and stops; the shard
    writer and finalizer drop work of an ended task.
    """
    state = await ctx.projection.get(cmd.taskId)
    if state is None or state["status"] in TERMINAL:
        return []
    return [ended(cmd.taskId, "CANCELLED", cmd.reason, ctx.worker_id, state)]


async def after_cancel(ctx: Context, cmd: CancelRequested, emits: list[Emit]) -> None:
    """Delete the cancelled task's shards: no file is published."""
    await cleanup(ctx, cmd.taskId)


async def project(ctx: Context, event: Lifecycle) -> list[Emit]:
    """Fold a lifecycle event into the Redis projection. A terminal event frees
    the task's slots, and the waiting tasks that now fit start.

    Most events are in the projection already (the runtime applies what it
    sends first, ``streams.runtime.ExportHooks.before_send``): a plain read
    shows that (``streams.emits.record``)."""
    await record(ctx, event)
    if event.status not in TERMINAL:
        return []
    state = await ctx.projection.get(event.taskId)
    if state and state.get("sysCode"):
        await ctx.slots.release(event.taskId, state["sysCode"], state.get("bizType", ""),
                                state.get("userId", ""))
    return [e for req in await ctx.slots.promote() for e in start(ctx, req)]
