"""Redis key formats, in one place (``P`` = ``Settings.redis_prefix``).

Only the keys moved here so far; the others are still documented where they
are written (``plait.projection``, ``streams.checkpoints``, ``streams.slots``,
``alerting.topics``).

``P:worker:{workerId}``
    String ``1``, set by every worker heartbeat with a TTL of
    ``Settings.stale_after_seconds``: present while the worker lives. The
    sweeper re-drives a stale task only when its last worker's key is gone;
    the container health check (``streams.health``) looks for it.

``P:sweeper``
    String: the id of the worker whose sweeper turn it is, set NX with a TTL
    of 0.9 x ``Settings.sweep_interval_seconds`` (one sweep per interval).
"""
from __future__ import annotations


def worker_key(prefix: str, worker_id: str) -> str:
    """Redis key a live worker refreshes on every heartbeat (expires when it dies)."""
    return f"{prefix}:worker:{worker_id}"


def sweeper_key(prefix: str) -> str:
    """Redis key of the sweeper's turn (one sweep per interval across workers)."""
    return f"{prefix}:sweeper"
