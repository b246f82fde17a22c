"""Task states and the rules between them: CREATED -> WAITING -> RUNNING -> SUCCESS | FAILED |
CANCELLED | TIMEOUT. A terminal status is final and repeats are ignored (at-least-once delivery);
PROGRESS and RUNNING reports dated no later than the end fold in as if they came first, so the live
projection and the topic-order projector agree."""
from __future__ import annotations

from typing import Any

from plait.events import Lifecycle
from plait.spec import ExportSpec

TERMINAL = frozenset({"SUCCESS", "FAILED", "CANCELLED", "TIMEOUT"})
ACTIVE = frozenset({"CREATED", "WAITING", "RUNNING"})
REPORTS = frozenset({"PROGRESS", "RUNNING"})

TRANSITIONS: dict[str, frozenset[str]] = {
    "CREATED": frozenset({"WAITING", "RUNNING"}) | TERMINAL,
    "WAITING": frozenset({"RUNNING"}) | TERMINAL,
    "RUNNING": TERMINAL,
    **{t: frozenset() for t in TERMINAL},
}

_COPIED = ("sysCode", "bizType", "bizDesc", "userId", "fileName", "fileFormat", "fingerprint",
           "timeout", "totalRows", "truncated", "errorMessage", "workerId", "quality", "stage")


def event(spec: ExportSpec, task_id: str, status: str, **fields: Any) -> Lifecycle:
    """A lifecycle event of ``task_id`` carrying the task's identity fields
    (sysCode, bizType, userId, fileName, fileFormat: alert rules group by them)."""
    doc = spec.documentConfig
    return Lifecycle(taskId=task_id, status=status, sysCode=spec.sysCode, bizType=spec.bizType,
                     userId=spec.userId, fileName=doc.fileName, fileFormat=doc.fileFormat,
                     **fields)


def created(spec: ExportSpec, task_id: str, fingerprint: str, at: str) -> Lifecycle:
    """The CREATED event of an export task (API, scheduler and admission
    alike): identity, ``bizDesc``, ``fingerprint`` and ``jobConfig.timeout``;
    ``at`` RFC 3339."""
    return event(spec, task_id, "CREATED", at=at, fingerprint=fingerprint,
                 timeout=spec.jobConfig.timeout, bizDesc=spec.bizDesc)


def can_move(current: str | None, new: str) -> bool:
    """True when a task in ``current`` (None: unknown task) may take ``new``."""
    if current is None:
        return new in ("CREATED", "PROGRESS") or new in TRANSITIONS
    if new == "PROGRESS":
        return current == "RUNNING"
    return new in TRANSITIONS[current]


def apply(state: dict[str, Any] | None, event: Lifecycle) -> dict[str, Any] | None:
    """Fold ``event`` into ``state`` (None: unseen task); the new state, or None when nothing
    changes."""
    current = state.get("status") if state else None
    late = state is not None and (
        (current in TERMINAL and event.status in REPORTS
         and event.at <= (state.get("finishedAt") or ""))
        or (event.status == "CREATED" and current != "CREATED"
            and event.at <= state["createdAt"]))
    if not late:
        if current == event.status and event.status != "RUNNING":
            return None
        if current != event.status and not can_move(current, event.status):
            return None
    new = dict(state or {"taskId": event.taskId, "createdAt": event.at,
                         "exportedRows": 0, "status": "CREATED"})
    for key in _COPIED:
        value = getattr(event, key)
        if key == "stage" and (new["status"] in TERMINAL or event.status in TERMINAL):
            continue
        if value is not None and not (late and new.get(key) is not None):
            new[key] = value
    if event.exportedRows is not None:
        new["exportedRows"] = max(new.get("exportedRows") or 0, event.exportedRows)
    if event.file is not None:
        new["file"] = event.file.model_dump()
    if event.status in REPORTS:
        new["heartbeatAt"] = max(new.get("heartbeatAt") or "", event.at)
    if late and event.status == "RUNNING":
        new.setdefault("startedAt", event.at)
    if late and event.status == "CREATED":
        new["createdAt"] = min(new["createdAt"], event.at)
    elif not late and event.status != "PROGRESS" and event.status != current:
        new["status"] = event.status
        if event.status == "RUNNING":
            new.setdefault("startedAt", event.at)
        if event.status in TERMINAL:
            new["finishedAt"] = event.at
            new.pop("stage", None)
    total = new.get("totalRows")
    if new["status"] == "SUCCESS":
        new["progress"] = 1.0
    elif total:
        new["progress"] = round(min(1.0, (new.get("exportedRows") or 0) / total), 4)
    else:
        new["progress"] = None
    new["updatedAt"] = max(new.get("updatedAt") or "", event.at)
    return None if new == state else new
