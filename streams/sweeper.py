"""The sweeper (docs/architecture.md, "Data flow of an export", step 7):
times out tasks, re-drives stale ones whose worker is gone, starts waiting
tasks. One worker per interval (a Redis lock)."""
from __future__ import annotations

import json
import time

from plait import topics as T
from plait.clock import parse_iso
from plait.events import ExportRequested, FetchPage, FinalizeRequested, Lifecycle
from streams.context import Context, Emit
from streams.emits import ended, fetch_page, start
from streams.partitions import REDRIVEN, redrive_chains, redrive_tries


async def redrive(ctx: Context, task_id: str, state: dict | None = None) -> list[Emit]:
    """Re-emit a stale task's next command from its checkpoints; FAILED after
    ``max_redrives`` at the same point, a fetch re-drive no worker claimed
    yet not counting (``streams.partitions.redrive_tries``, the rule of the
    partitions' chains too)."""
    marks = await ctx.checkpoints.get(task_id)
    if "finalized" in marks or "request" not in marks:
        return []
    req = ExportRequested.model_validate_json(marks["request"])
    if "last_seq" in marks:
        ends = json.loads(marks.get("ends", "null"))
        point, cmd = "finalize", Emit(T.FINALIZE, task_id, FinalizeRequested(
            taskId=task_id, lastSeq=int(marks["last_seq"]),
            lastSeqs=ends if ends and len(ends) > 1 else None,
            truncated=marks.get("truncated") == "1", spec=req.spec))
    elif req.spec.dataConfig.mode == "pull":
        seq = int(marks.get("next_seq", 0))
        point, cmd = f"fetch:{seq}", fetch_page(FetchPage(
            taskId=task_id, seq=seq, runtimeContext=json.loads(marks.get("next_ctx", "null"))
            or req.spec.dataConfig.runtimeContext, rowsBefore=int(marks.get("rows_before", 0)),
            spec=req.spec))
    else:
        return []  # push mode
    count = redrive_tries(marks, point)
    if count > ctx.settings.max_redrives:
        return [ended(task_id, "FAILED", f"re-driven {count - 1} times at {point} without "
                                         "progress", ctx.worker_id, state)]
    # a fetch re-drive waits for a worker to claim it (streams.partitions.claim)
    unclaimed = {"fetcher": REDRIVEN + ctx.worker_id} if point != "finalize" else {}
    await ctx.checkpoints.set(task_id, redrive_point=point, redrives=count, **unclaimed)
    if isinstance(cmd.payload, FetchPage):
        cmd.payload.attempt = count
    heartbeat = Emit(T.LIFECYCLE, task_id, Lifecycle(
        taskId=task_id, status="RUNNING", workerId=f"sweeper@{ctx.worker_id}"))
    return [heartbeat, cmd]


async def sweep(ctx: Context, now: float | None = None) -> tuple[list[Emit], list[str]]:
    """One sweep: (events to send, ids of tasks ended)."""
    now = now or time.time()
    emits: list[Emit] = []
    ended_ids: list[str] = []
    for task_id in await ctx.projection.active():
        state = await ctx.projection.get(task_id)
        if state is None:
            continue
        timeout = state.get("timeout")
        if timeout and now - parse_iso(state["createdAt"]) > timeout:
            emits.append(ended(task_id, "TIMEOUT", f"task exceeded jobConfig.timeout="
                                                   f"{timeout:g}s", ctx.worker_id, state))
            ended_ids.append(task_id)
        elif state["status"] == "RUNNING" and (failed := await missing_too_long(
                ctx, task_id, state, now)):
            emits.append(failed)
            ended_ids.append(task_id)
        elif state["status"] == "RUNNING":
            beat = parse_iso(state.get("heartbeatAt") or state["createdAt"])
            stale = (now - beat > ctx.settings.stale_after_seconds
                     and not await owner_alive(ctx, task_id, state))
            chains = await redrive_chains(ctx, task_id, state, now, stale)
            if chains is not None:  # a partitioned task: its chains one by one
                emits.extend(chains)
            elif stale:
                emits.extend(await redrive(ctx, task_id, state))
    for req in await ctx.slots.promote(now):
        emits.extend(start(ctx, req))
    return emits, ended_ids


async def missing_too_long(ctx: Context, task_id: str, state: dict,
                           now: float) -> Emit | None:
    """FAILED when a page is missing past ``PLAIT_PUSH_PAGE_TIMEOUT_SECONDS``."""
    raw = await ctx.checkpoints.field(task_id, "missing")
    if raw is None:
        return None
    mark = json.loads(raw)
    limit = ctx.settings.push_page_timeout_seconds
    if now - mark["since"] <= limit:
        return None
    partition, seq = mark["page"]
    return ended(task_id, "FAILED", f"page {seq} of partition {partition} missing for more "
                                    f"than {limit:g}s (PLAIT_PUSH_PAGE_TIMEOUT_SECONDS) while "
                                    f"later pages of that partition arrived",
                 ctx.worker_id, state)


async def owner_alive(ctx: Context, task_id: str, state: dict) -> bool:
    """Whether the last reporter beats and, while fetching, the ``fetcher``
    too: its in-process fetch chain leaves no FetchPage on the broker (a
    ``redrive@…`` fetcher, a re-drive no worker claimed, never beats). A
    task without ``next_seq`` is fetching page 0, as :func:`redrive` reads it."""
    if not await worker_alive(ctx, state.get("workerId")):
        return False
    marks = await ctx.checkpoints.get(task_id)
    fetcher = marks.get("fetcher")
    fetching = ("last_seq" not in marks
                and int(marks.get("next_seq", 0)) > int(marks.get("fetched", -1)))
    if fetcher and fetching:
        return await worker_alive(ctx, fetcher)
    return True


async def worker_alive(ctx: Context, worker_id: str | None) -> bool:
    if not worker_id:
        return False
    return await ctx.workers.alive(worker_id.removeprefix("sweeper@"))


async def take_turn(ctx: Context, interval: float) -> bool:
    """True when this worker holds the sweep lock for this interval."""
    return await ctx.workers.take_turn(ctx.worker_id, interval)
