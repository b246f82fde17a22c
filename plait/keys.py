"""Redis key formats, in one place (``P`` = ``Settings.redis_prefix``).

Only the keys moved here so far; the others are still documented where they
are written (``plait.projection``, ``streams.checkpoints``, ``streams.slots``,
``alerting.topics``).

``P:worker:{workerId}``
    String ``1``, set by every worker heartbeat with a TTL of
    ``Settings.stale_after_seconds``: present while the worker lives. The
    sweeper re-drives a stale task only when its last worker's key is gone.
"""
from __future__ import annotations


def worker_key(prefix: str, worker_id: str) -> str:
    """Redis key a live worker refreshes on every heartbeat (expires when it dies)."""
    return f"{prefix}:worker:{worker_id}"
