"""Token bucket per receiver (an outbound rate limit Alertmanager lacks): ``{"tokens",
"updated_at"}``, at most ``burst`` tokens, one more every ``refill_interval`` s, one per message.
A message without a token is not dropped: its groups merge into the next message."""
from __future__ import annotations

from typing import Any

#: Tolerance for float refill arithmetic (0.2 + 0.8 must give a whole token).
EPSILON = 1e-9


def new_bucket(burst: int, now: float) -> dict[str, Any]:
    """A full bucket at ``now`` (seconds)."""
    return {"tokens": float(burst), "updated_at": now}


def refill(bucket: dict[str, Any], now: float, burst: int, refill_interval: float) -> dict[str, Any]:
    """The bucket refilled to ``now`` (capped at ``burst``; a backwards clock adds nothing), new."""
    elapsed = max(0.0, now - bucket["updated_at"])
    tokens = min(float(burst), bucket["tokens"] + elapsed / refill_interval)
    return {"tokens": tokens, "updated_at": max(now, bucket["updated_at"])}


def available(bucket: dict[str, Any], now: float, burst: int, refill_interval: float) -> bool:
    """True when a token can be taken at ``now``."""
    return refill(bucket, now, burst, refill_interval)["tokens"] >= 1.0 - EPSILON


def take(bucket: dict[str, Any], now: float, burst: int,
         refill_interval: float) -> tuple[bool, dict[str, Any]]:
    """Take one token at ``now``: ``(taken, bucket after)`` (only refilled when not taken)."""
    b = refill(bucket, now, burst, refill_interval)
    if b["tokens"] >= 1.0 - EPSILON:
        return True, {"tokens": max(0.0, b["tokens"] - 1.0), "updated_at": b["updated_at"]}
    return False, b


def next_token_at(bucket: dict[str, Any], now: float, burst: int, refill_interval: float) -> float:
    """Earliest time (seconds) a token is available; ``now`` when one already is."""
    b = refill(bucket, now, burst, refill_interval)
    missing = 1.0 - b["tokens"]
    return now if missing <= EPSILON else now + missing * refill_interval
