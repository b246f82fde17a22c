"""Task states and the rules that move a task between them (pure functions).

States: CREATED -> WAITING -> RUNNING -> SUCCESS | FAILED | CANCELLED | TIMEOUT.
PROGRESS is a report, not a state: it updates counters of a RUNNING task and
its ``stage`` (fetching -> writing -> uploading; dropped once the task ends).
A terminal task never changes status again, whatever arrives late; repeats
are ignored, so at-least-once delivery of lifecycle events is harmless.

The fold does not depend on the order reports and the end arrive in: the live
projection writes state changes through at once (``streams.runtime.send``)
while the projector folds ``export.lifecycle`` in topic order, and a rebuild
replays the topic only, so a report (PROGRESS, RUNNING heartbeat) dated no
later than the end may reach a terminal task after the end. It is folded as
if it had come first (max()ed counts and times, fields the task lacks); a
report dated after the end changes nothing. Likewise a CREATED that reaches
a task already moved on (admit's CREATED sent after the RUNNING of a slot
promotion that raced it) fills the fields the task lacks and its createdAt.
"""
from __future__ import annotations

from typing import Any

from plait.events import Lifecycle
from plait.spec import ExportSpec

TERMINAL = frozenset({"SUCCESS", "FAILED", "CANCELLED", "TIMEOUT"})
ACTIVE = frozenset({"CREATED", "WAITING", "RUNNING"})
#: Statuses that report on a running task rather than move it.
REPORTS = frozenset({"PROGRESS", "RUNNING"})

#: status -> statuses it may move to.
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
    """Fold one lifecycle event into a task's projected state.

    Args:
        state: the current projection (camelCase keys, see ``api`` responses) or
            None for a task never seen.
        event: the lifecycle event.
    Returns:
        The new state, or None when the event changes nothing (a repeat, an
        event dated after a terminal task's end, or a transition the rules
        forbid). A report dated no later than a terminal task's end folds in
        as if it had arrived before the end (module docstring).
    """
    current = state.get("status") if state else None
    late = state is not None and (
        (current in TERMINAL and event.status in REPORTS
         and event.at <= (state.get("finishedAt") or ""))
        # admit's CREATED can follow the RUNNING of a promotion that raced it
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
            continue  # an ended task is in no stage, whatever report comes late
        # a late report only fills what the end did not say: in topic order the end came after
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
    total = new.get("totalRows")  # timestamps below are max()ed: replay order does not matter
    if new["status"] == "SUCCESS":
        new["progress"] = 1.0
    elif total:
        new["progress"] = round(min(1.0, (new.get("exportedRows") or 0) / total), 4)
    else:
        new["progress"] = None
    new["updatedAt"] = max(new.get("updatedAt") or "", event.at)
    return None if new == state else new
