"""Token-bucket stage: per receiver one message per token (``bucket.burst``, one back every
``refill_interval`` s); critical groups first when tokens are scarce."""
from __future__ import annotations

from typing import Any

from alerting import bucket as tb
from alerting.stages.base import StageBase
from alerting.stages.dispatch import base_name


class Bucket(StageBase):
    """Token buckets of the funnel's receivers."""

    def _take_token(self, name: str, rs: dict[str, Any], now: float) -> bool:
        """Take one token of receiver ``name``'s bucket (a lane takes its receiver's: the
        receiver's state holds it); False when it is empty."""
        receiver = base_name(name)
        bc = self.config.receiver(receiver).bucket
        rs = self.state["receivers"][receiver]
        b = rs["bucket"] or tb.new_bucket(bc.burst, now)
        ok, rs["bucket"] = tb.take(b, now, bc.burst, bc.refill_interval)
        if not ok:
            self.state["counters"]["rate_limited_ticks"] += 1
        return ok

    def _pull_forward(self, name: str, later: list[tuple[float, str]], now: float) -> None:
        """Critical first (docs/alerting.md, "Critical first"): when receiver ``name`` is about to
        send and its queued groups plus those due within one refill interval outnumber its tokens,
        the due ones are evaluated now to share this message, critical sections first. Without
        scarcity Alertmanager's timers hold."""
        rs = self.state["receivers"][name]
        if not rs["outbox"] or rs["inflight"] is not None:
            return
        bc = self.config.receiver(base_name(name)).bucket
        bucket = self.state["receivers"][base_name(name)]["bucket"]
        bucket = tb.refill(bucket or tb.new_bucket(bc.burst, now), now, bc.burst,
                           bc.refill_interval)
        tokens = int(bucket["tokens"] + tb.EPSILON)
        if tokens < 1:
            return
        soon = sorted((due, gid) for due, gid in later if due <= now + bc.refill_interval + 1e-9)
        if not soon or len(self._queued.get(name, ())) + len(soon) <= tokens:
            return
        for _due, gid in soon:
            g = self.state["groups"].get(gid)
            if g is not None and "refused_at" not in g:  # a refused group waits for its flush
                self._evaluate(g, now)
