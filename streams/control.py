"""Control commands and the lifecycle projector (plain handlers)."""
from __future__ import annotations

from plait.events import CancelRequested, Lifecycle
from plait.lifecycle import TERMINAL
from streams.context import Context, Emit
from streams.emits import ended, record, start
from streams.layout import cleanup


async def cancel(ctx: Context, cmd: CancelRequested) -> list[Emit]:
    """CancelRequested -> CANCELLED, unless the task already ended."""
    state = await ctx.projection.get(cmd.taskId)
    if state is None or state["status"] in TERMINAL:
        return []
    return [ended(cmd.taskId, "CANCELLED", cmd.reason, ctx.worker_id, state)]


async def after_cancel(ctx: Context, cmd: CancelRequested, emits: list[Emit]) -> None:
    await cleanup(ctx, cmd.taskId)


async def project(ctx: Context, event: Lifecycle) -> list[Emit]:
    """Fold a lifecycle event; a terminal one frees slots and starts waiters."""
    await record(ctx, event)
    if event.status not in TERMINAL:
        return []
    state = await ctx.projection.get(event.taskId)
    if state and state.get("sysCode"):
        await ctx.slots.release(event.taskId, state["sysCode"], state.get("bizType", ""),
                                state.get("userId", ""))
    return [e for req in await ctx.slots.promote() for e in start(ctx, req)]
