"""Clocks and ids: one place for 'now', so tests can inject a fake clock."""
from __future__ import annotations

import time
import uuid
from datetime import datetime, timezone


def utcnow_iso() -> str:
    """Current UTC time as ISO-8601 with milliseconds and ``Z``."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(value: str) -> float:
    """ISO-8601 timestamp -> Unix seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def new_task_id() -> str:
    """A new task id: 32 hex chars, time-ordered prefix (ms) + random."""
    return f"{int(time.time() * 1000):012x}{uuid.uuid4().hex[:20]}"
