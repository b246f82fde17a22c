"""Events several export stages emit, built in one place.

Handlers, shards, finalize, control and the sweeper all report lifecycle
changes and start tasks; they take these builders from here instead of from
each other, so no stage imports another.
"""
from __future__ import annotations

from plait import topics as T
from plait.events import ExportRequested, FetchPage, Lifecycle
from plait.spec import ExportSpec
from streams.context import Context, Emit

#: Lifecycle fields that say whose task it is.
IDENTITY = ("sysCode", "bizType", "userId", "fileName", "fileFormat")


def lifecycle(spec: ExportSpec, task_id: str, status: str, **fields) -> Emit:
    """A lifecycle event for ``task_id`` carrying the task's identity fields."""
    doc = spec.documentConfig
    return Emit(T.LIFECYCLE, task_id, Lifecycle(
        taskId=task_id, status=status, sysCode=spec.sysCode, bizType=spec.bizType,
        userId=spec.userId, fileName=doc.fileName, fileFormat=doc.fileFormat, **fields))


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
    spec's initial one when None), keyed by its chain (``FetchPage.chainId``:
    the task id for a task of one partition)."""
    cmd = FetchPage(taskId=req.taskId, seq=seq, partition=partition, partitions=partitions,
                    runtimeContext=req.spec.dataConfig.runtimeContext if cursor is None
                    else cursor, rowsBefore=rows_before, spec=req.spec)
    return Emit(T.FETCH, cmd.chainId, cmd)


def ended(task_id: str, status: str, message: str, worker_id: str,
          state: dict | None = None) -> Emit:
    """A terminal lifecycle event decided without the spec at hand (sweeper,
    cancel), carrying the task's identity from its projected ``state`` (alert
    rules group by it)."""
    return Emit(T.LIFECYCLE, task_id, Lifecycle(
        taskId=task_id, status=status, errorMessage=message, workerId=worker_id,
        **{k: (state or {}).get(k) for k in IDENTITY}))
