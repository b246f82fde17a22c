"""A record the alert path cannot send: dead-lettered, counted, alerted.

Records are built within :data:`plait.records.MAX_RECORD_BYTES` (docs/kafka-rules.md #17); what
still does not fit is never handed to the producer (it would fail the batch at every restart): it
goes to ``export.dlq`` cut to fit, counts in ``plait_alert_records_too_large_total{topic}`` and
raises the native alert ``AlertRecordTooLarge`` (critical, asset = topic); the worker goes on.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from alerting.intake import format_time
from plait.events import DeadLetter
from plait.metrics import ALERT_RECORDS_TOO_LARGE as TOO_LARGE
from plait.records import MAX_RECORD_BYTES, cut_utf8, record_bytes

#: The alert ends this long after the last record too large (seconds).
RESOLVE_AFTER = 3600.0
#: Most bytes of a too-large record's value copied into its dead letter.
KEPT_BYTES = 64 * 1024


def too_large_alert(topic: str, size: int, now: float) -> dict[str, Any]:
    """The native raw alert ``AlertRecordTooLarge`` for a ``size``-byte record meant for ``topic``
    (base name); it ends :data:`RESOLVE_AFTER` after the last one."""
    return {"rule": "AlertRecordTooLarge", "asset": topic, "severity": "critical",
            "status": "firing", "labels": {"topic": topic, "source": "plait.alerting"},
            "annotations": {"summary": f"a {size}-byte record for {topic} was kept in export.dlq "
                                       f"(most {MAX_RECORD_BYTES} bytes)"},
            "time": now, "endsAt": format_time(now + RESOLVE_AFTER)}


def letter(topic: str, partition: int | None, key: bytes | None, value: bytes,
           reason: str) -> DeadLetter:
    """Dead letter of an oversize record: topic, partition, key, reason, start of its value."""
    text = key.decode(errors="replace")[:1024] if key else None
    return DeadLetter(topic=topic, partition=partition, key=text, error=reason[:2000],
                      errorClass="RecordTooLarge",
                      payload=cut_utf8(value[:KEPT_BYTES].decode(errors="replace"), KEPT_BYTES))


@dataclass
class Guard:
    """Checks records before they are sent and keeps oversize ones: ``await keep(dead letter,
    key)`` to ``export.dlq``, ``await alert(raw alert)`` to ``alerts.raw``."""

    keep: Callable[[DeadLetter, str], Awaitable[None]]
    alert: Callable[[dict[str, Any]], Awaitable[None]]
    held: list[tuple[str, int, DeadLetter, str]] = field(default_factory=list)

    def fits(self, topic: str, partition: int | None, key: bytes | None, value: bytes | None) -> bool:
        """True when the record may be sent; else it is held for :meth:`flush` and counted."""
        size = record_bytes(key, value)
        if size <= MAX_RECORD_BYTES:
            return True
        self.hold(topic, partition, key, value)
        return False

    def hold(self, topic: str, partition: int | None, key: bytes | None, value: bytes | None) -> None:
        """Keep a record that will not be sent (counted now, dead-lettered by :meth:`flush`)."""
        size = record_bytes(key, value)
        TOO_LARGE.labels(topic=topic).inc()
        reason = f"record of {size} bytes for {topic}; most {MAX_RECORD_BYTES}"
        self.held.append((topic, size, letter(topic, partition, key, value or b"", reason),
                          key.decode(errors="replace")[:1024] if key else ""))

    async def flush(self) -> int:
        """Send held dead letters and one alert per topic; returns how many. Raises what sending
        raised (held records are dropped either way)."""
        held, self.held = self.held, []
        largest: dict[str, int] = {}
        for topic, size, dead, key in held:
            await self.keep(dead, key)
            largest[topic] = max(size, largest.get(topic, 0))
        for topic, size in largest.items():
            await self.alert(too_large_alert(topic, size, time.time()))
        return len(held)
