"""Topic names of Plait, in one place.

Every topic is keyed by task id unless said otherwise (docs/topics.md).
Names get ``Settings.topic_prefix`` in front so test runs never share topics.
"""
from __future__ import annotations

from dataclasses import dataclass

REQUESTS = "export.requests"
FETCH = "export.fetch"
PAGES = "export.pages"
FINALIZE = "export.finalize"
LIFECYCLE = "export.lifecycle"
CONTROL = "export.control"
DLQ = "export.dlq"
ALERTS_RAW = "alerts.raw"
#: keyed by receiver (the API and the router decide it); partitions must match the table's changelog
ALERTS_FUNNEL = "alerts.funnel"
ALERTS_NOTIFICATIONS = "alerts.notifications"
ALERTS_LEDGER = "alerts.ledger"
AUDIT = "audit"  # keyed by sysCode
SCHEDULE_SLOTS = "schedules.slots"  # keyed by schedule id; docs/topics.md

ALL = (REQUESTS, FETCH, PAGES, FINALIZE, LIFECYCLE, CONTROL, DLQ,
       ALERTS_RAW, ALERTS_FUNNEL, ALERTS_NOTIFICATIONS, ALERTS_LEDGER, AUDIT, SCHEDULE_SLOTS)


@dataclass(frozen=True)
class Topics:
    """Resolved topic names for one deployment (prefix applied)."""

    prefix: str = ""

    def name(self, base: str) -> str:
        return f"{self.prefix}{base}"

    def all(self) -> list[str]:
        return [self.name(t) for t in ALL]
