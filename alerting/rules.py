"""Rules that turn export lifecycle events into raw alerts.

- a task ends ``FAILED``: rule ``ExportFailed``, severity critical;
- a task ends ``TIMEOUT``: rule ``ExportTimeout``, severity warning.

Both are firing alerts on asset ``<sysCode>/<bizType>`` (so repeats of the
same kind of export are deduplicated and grouped), with the task id and its
owner in the labels and the error in the annotations.
"""
from __future__ import annotations

from typing import Any

from plait.events import Lifecycle

RULES = {"FAILED": ("ExportFailed", "critical"), "TIMEOUT": ("ExportTimeout", "warning")}


def lifecycle_alert(event: Lifecycle) -> dict[str, Any] | None:
    """The native raw alert for ``event``, or None when no rule applies."""
    rule = RULES.get(event.status)
    if rule is None:
        return None
    name, severity = rule
    asset = f"{event.sysCode or 'unknown'}/{event.bizType or 'unknown'}"
    labels = {"taskId": event.taskId, "sysCode": event.sysCode or "",
              "bizType": event.bizType or "", "source": "plait.export"}
    if event.userId:
        labels["userId"] = event.userId
    summary = f"export {event.taskId} {event.status.lower()}"
    annotations = {"summary": summary}
    if event.errorMessage:
        annotations["description"] = event.errorMessage[:2000]
    return {"rule": name, "asset": asset, "severity": severity, "status": "firing",
            "labels": labels, "annotations": annotations, "time": event.at}
