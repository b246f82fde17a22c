"""Event builders shared by the export stages (so no stage imports another),
and :func:`record`, the one writer of the task projection."""
from __future__ import annotations

from typing import Any

from plait import metrics
from plait import topics as T
from plait.events import ExportRequested, FetchPage, Lifecycle
from plait.lifecycle import created as lifecycle_created
from plait.lifecycle import apply as fold
from plait.lifecycle import event
from plait.spec import ExportSpec
from streams.context import Context, Emit

#: Lifecycle fields that say whose task it is.
IDENTITY = ("sysCode", "bizType", "userId", "fileName", "fileFormat")


def lifecycle(spec: ExportSpec, task_id: str, status: str, **fields) -> Emit:
    """A lifecycle event carrying the task's identity fields."""
    return Emit(T.LIFECYCLE, task_id, event(spec, task_id, status, **fields))


def created(req: ExportRequested) -> Emit:
    """The CREATED event of an admitted request."""
    return Emit(T.LIFECYCLE, req.taskId, lifecycle_created(req.spec, req.taskId,
                                                           req.fingerprint, req.requestedAt))


def start(ctx: Context, req: ExportRequested) -> list[Emit]:
    """RUNNING and, in pull mode, the first FetchPage of a task that got its
    slots: one per partition (``streams.partitions``)."""
    emits = [lifecycle(req.spec, req.taskId, "RUNNING", workerId=ctx.worker_id)]
    if req.spec.dataConfig.mode == "pull":
        count = len(req.spec.dataConfig.fragments())
        emits.extend(first_page(req, p, count) for p in range(count))
    return emits


def first_page(req: ExportRequested, partition: int, partitions: int, seq: int = 0,
               cursor: dict | None = None, rows_before: int = 0) -> Emit:
    """``FetchPage`` ``seq`` of ``partition`` of ``partitions`` (cursor: the
    spec's initial one when None), as :func:`fetch_page` sends it."""
    return fetch_page(FetchPage(
        taskId=req.taskId, seq=seq, partition=partition, partitions=partitions,
        runtimeContext=req.spec.dataConfig.runtimeContext if cursor is None else cursor,
        rowsBefore=rows_before, spec=req.spec))


def fetch_page(cmd: FetchPage) -> Emit:
    """``cmd`` on ``export.fetch``, keyed by its chain (``FetchPage.chainId``:
    the task id for a task of one partition). A partitioned task's chain p goes
    to partition p after the task id's own (``plait.agent.spread_partition``),
    not by its key's hash: every record of a chain (first page, re-drives, after
    a restart) on one partition, and a task's chains on distinct partitions, as
    many as the topic has (docs/kafka-rules.md #8)."""
    spread = None if cmd.partitions == 1 else (cmd.taskId, cmd.partition)
    return Emit(T.FETCH, cmd.chainId, cmd, spread)


def ended(task_id: str, status: str, message: str, worker_id: str,
          state: dict | None = None) -> Emit:
    """A terminal event without the spec, identity from ``state`` (alert rules group by it)."""
    return Emit(T.LIFECYCLE, task_id, Lifecycle(
        taskId=task_id, status=status, errorMessage=message, workerId=worker_id,
        **{k: (state or {}).get(k) for k in IDENTITY}))


async def record(ctx: Context, event: Lifecycle) -> dict[str, Any] | None:
    """Apply ``event`` to the projection and count a status change; the new
    state, or None when unchanged (then one read, no transaction)."""
    before = await ctx.projection.get(event.taskId)
    if fold(before, event) is None:
        return None
    new = await ctx.projection.apply(event)
    if new is not None and event.status != "PROGRESS":
        metrics.task_changed(before["status"] if before else None, new)
    return new
