"""The ``schedules.slots`` topic's event (docs/events.md, "SlotEvent"): the
lifecycle of one slot, keyed by schedule id. At least once: a consumer
dedupes by ``(scheduleId, slotMs, status)``."""
from __future__ import annotations

from typing import ClassVar, Literal

from plait.events import Payload


class SlotEvent(Payload):
    """One step of a slot; a skip covers ``count`` slots, ``slots`` lists up to
    100. Times RFC 3339, durations ms."""

    TYPE: ClassVar[str] = "plait.schedules.SlotEvent.v1"
    scheduleId: str
    status: Literal["fired", "skipped", "succeeded", "failed", "cancelled", "paused"]
    slot: str | None = None
    slotMs: int | None = None
    reason: str | None = None
    count: int | None = None
    slots: list[str] | None = None
    taskId: str | None = None
    lateMs: int | None = None
    durationMs: int | None = None
    result: dict | None = None
    workerId: str | None = None
    at: str
