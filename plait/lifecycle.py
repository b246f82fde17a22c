"""Task states and the rules that move a task between them (pure functions).

States: CREATED -> WAITING -> RUNNING -> SUCCESS | FAILED | CANCELLED | TIMEOUT.
PROGRESS is a report, not a state: it updates counters of a RUNNING task and
its ``stage`` (fetching -> writing -> uploading; dropped once the task ends).
A terminal task never changes again, whatever arrives late; repeats are
ignored, so at-least-once delivery of lifecycle events is harmless.
"""
from __future__ import annotations

from typing import Any

from plait.events import Lifecycle

TERMINAL = frozenset({"SUCCESS", "FAILED", "CANCELLED", "TIMEOUT"})
ACTIVE = frozenset({"CREATED", "WAITING", "RUNNING"})

#: status -> statuses it may move to.
TRANSITIONS: dict[str, frozenset[str]] = {
    "CREATED": frozenset({"WAITING", "RUNNING"}) | TERMINAL,
    "WAITING": frozenset({"RUNNING"}) | TERMINAL,
    "RUNNING": TERMINAL,
    **{t: frozenset() for t in TERMINAL},
}

_COPIED = ("sysCode", "bizType", "bizDesc", "userId", "fileName", "fileFormat", "fingerprint",
           "timeout", "totalRows", "truncated", "errorMessage", "workerId", "quality", "stage")


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
        The new state, or None when the event changes nothing (a repeat, a late
        event for a terminal task, or a transition the rules forbid).
    """
    current = state.get("status") if state else None
    if current == event.status and event.status != "RUNNING":
        return None
    if current != event.status and not can_move(current, event.status):
        return None
    new = dict(state or {"taskId": event.taskId, "createdAt": event.at,
                         "exportedRows": 0, "status": "CREATED"})
    for key in _COPIED:
        value = getattr(event, key)
        if value is not None:
            new[key] = value
    if event.exportedRows is not None:
        new["exportedRows"] = max(new.get("exportedRows") or 0, event.exportedRows)
    if event.file is not None:
        new["file"] = event.file.model_dump()
    if event.status in ("PROGRESS", "RUNNING"):
        new["heartbeatAt"] = max(new.get("heartbeatAt") or "", event.at)
    if event.status != "PROGRESS" and event.status != current:
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
    return new
