"""Token-bucket stage: per receiver, one message per token
(``bucket.burst``, one token back every ``refill_interval`` s), and
critical groups pulled forward when tokens are scarce (docs/alerting.md,
"Critical first")."""
from __future__ import annotations

from typing import Any

from alerting import bucket as tb
from alerting.stages.base import StageBase


class Bucket(StageBase):
    """Token buckets of the funnel's receivers."""

    def _take_token(self, name: str, rs: dict[str, Any], now: float) -> bool:
        """Take one token of receiver ``name``'s bucket at ``now``; False
        (counted in ``rate_limited_ticks``) when it is empty."""
        bc = self.config.receiver(name).bucket
        b = rs["bucket"] or tb.new_bucket(bc.burst, now)
        ok, rs["bucket"] = tb.take(b, now, bc.burst, bc.refill_interval)
        if not ok:
            self.state["counters"]["rate_limited_ticks"] += 1
        return ok

    def _pull_forward(self, name: str, later: list[tuple[float, str]], now: float) -> None:
        """Critical first when tokens are scarce (docs/alerting.md, "Critical first").

        Rule: when receiver ``name`` is about to build a message (sections
        queued, nothing in flight, a token free) and the groups queued plus
        its groups due within one refill interval outnumber the tokens in its
        bucket, so they could not each have a message of their own, those
        groups are evaluated now (at most ``refill_interval`` seconds early)
        and share this message; :meth:`~alerting.stages.dispatch.Dispatch._dispatch` then takes sections of
        groups holding critical alerts first. Without scarcity nothing moves:
        Alertmanager's timers hold as configured."""
        rs = self.state["receivers"][name]
        if not rs["outbox"] or rs["inflight"] is not None:
            return
        bc = self.config.receiver(name).bucket
        bucket = tb.refill(rs["bucket"] or tb.new_bucket(bc.burst, now), now, bc.burst,
                           bc.refill_interval)
        tokens = int(bucket["tokens"] + tb.EPSILON)
        if tokens < 1:
            return
        soon = sorted((due, gid) for due, gid in later if due <= now + bc.refill_interval + 1e-9)
        if not soon or len(self._queued.get(name, ())) + len(soon) <= tokens:
            return
        for _due, gid in soon:
            g = self.state["groups"].get(gid)
            if g is not None:
                self._evaluate(g, now)
