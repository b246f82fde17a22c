"""Rules turning export lifecycle events into raw alerts: a task ending ``FAILED``
(``ExportFailed``, critical) or ``TIMEOUT`` (``ExportTimeout``, warning) fires on asset
``<sysCode>/<bizType>`` (repeats dedupe and group), task id and owner in labels, error in
annotations; a task running ``slow_task_after`` s fires ``ExportSlow`` (warning) on
``<sysCode>/<bizType>/<taskId>`` until it ends; ``dlq_threshold`` dead letters within
``dlq_window`` s fire ``DLQGrowth`` (critical) on ``export.dlq`` until a window passes without one.

Resolution without a human (docs/alerting.md): failures carry ``endsAt`` = event time +
``rules.failed_resolve_after``, and the next ``SUCCESS`` of that sysCode/bizType resolves them
(:func:`recovery_alerts`, sent when ``plait.keys.export_failed_marker`` records a failure).
"""
from __future__ import annotations

from collections import deque
from typing import Any

from plait.events import Lifecycle
from plait.lifecycle import TERMINAL

from alerting.intake import format_time, parse_time

RULES = {"FAILED": ("ExportFailed", "critical"), "TIMEOUT": ("ExportTimeout", "warning")}


def export_asset(event: Lifecycle) -> str:
    """``<sysCode>/<bizType>`` (``unknown`` for a missing part)."""
    return f"{event.sysCode or 'unknown'}/{event.bizType or 'unknown'}"


def lifecycle_alert(event: Lifecycle, resolve_after: float | None = None) -> dict[str, Any] | None:
    """The native raw alert for ``event`` (``endsAt`` = event time + ``resolve_after`` s), or
    None when no rule applies."""
    rule = RULES.get(event.status)
    if rule is None:
        return None
    name, severity = rule
    asset = export_asset(event)
    labels = {"taskId": event.taskId, "sysCode": event.sysCode or "",
              "bizType": event.bizType or "", "source": "plait.export"}
    if event.userId:
        labels["userId"] = event.userId
    what = "failed" if event.status == "FAILED" else "timed out"
    summary = f"export of {event.bizType or 'unknown'} for {event.sysCode or 'unknown'} {what} (task {event.taskId})"
    annotations = {"summary": summary}
    if event.errorMessage:
        annotations["description"] = event.errorMessage[:2000]
    alert = {"rule": name, "asset": asset, "severity": severity, "status": "firing",
             "labels": labels, "annotations": annotations, "time": event.at}
    if resolve_after is not None:
        at = parse_time(event.at, "at")
        if at is not None:
            alert["endsAt"] = format_time(at + resolve_after)
    return alert


def recovery_alerts(event: Lifecycle, failed_task: str | None = None) -> list[dict[str, Any]]:
    """Resolved ``ExportFailed``/``ExportTimeout`` (same fingerprint) for the asset of a task that
    ended ``SUCCESS``, else []; ``taskId`` is ``failed_task``, ``resolvedBy`` the succeeding one."""
    if event.status != "SUCCESS":
        return []
    labels = {"taskId": failed_task or event.taskId, "sysCode": event.sysCode or "",
              "bizType": event.bizType or "", "source": "plait.export",
              "resolvedBy": event.taskId}
    return [{"rule": name, "asset": export_asset(event), "severity": severity,
             "status": "resolved", "labels": dict(labels), "time": event.at, "endsAt": event.at,
             "annotations": {"summary": f"export of {event.bizType or 'unknown'} for "
                                        f"{event.sysCode or 'unknown'} succeeded again "
                                        f"(task {event.taskId})"}}
            for name, severity in RULES.values()]


def slow_task_alert(event: Lifecycle, created_at: float, now: float, after: float,
                    fired: bool) -> dict[str, Any] | None:
    """``ExportSlow`` for a task: firing once when still active ``after`` s past ``created_at``
    (Unix s), resolved when a task that fired ends; else None."""
    asset = f"{event.sysCode or 'unknown'}/{event.bizType or 'unknown'}/{event.taskId}"
    labels = {"taskId": event.taskId, "sysCode": event.sysCode or "",
              "bizType": event.bizType or "", "source": "plait.export"}
    if event.status in TERMINAL:
        status = "resolved" if fired else None
    else:
        status = "firing" if not fired and now - created_at > after else None
    if status is None:
        return None
    return {"rule": "ExportSlow", "asset": asset, "severity": "warning", "status": status,
            "labels": labels, "time": event.at,
            "annotations": {"summary": f"export {event.taskId} running over {after:g}s"}}


class DlqWatch:
    """Dead letters in a sliding window (s): when ``DLQGrowth`` fires and resolves. No I/O."""

    def __init__(self, window: float, threshold: int) -> None:
        self.window, self.threshold = window, threshold
        self.times: deque[float] = deque()
        self.firing = False

    def _alert(self, status: str, now: float) -> dict[str, Any]:
        return {"rule": "DLQGrowth", "asset": "export.dlq", "severity": "critical",
                "status": status, "labels": {"source": "plait.export"},
                "annotations": {"summary": f"{len(self.times)} dead letters in the last "
                                           f"{self.window:g}s (threshold {self.threshold})"},
                "time": now}

    def observe(self, now: float) -> dict[str, Any] | None:
        """One dead letter at ``now``; returns the firing alert when the threshold is crossed (once
        per episode)."""
        self.times.append(now)
        return self.check(now) if not self.firing else None

    def check(self, now: float) -> dict[str, Any] | None:
        """Expire old entries; firing or resolved alert on a change, else None."""
        while self.times and now - self.times[0] > self.window:
            self.times.popleft()
        if not self.firing and len(self.times) >= self.threshold:
            self.firing = True
            return self._alert("firing", now)
        if self.firing and not self.times:
            self.firing = False
            return self._alert("resolved", now)
        return None
