"""Dedupe stage: episodes and their expiry (docs/alerting.md, "Resolution without a human")."""
from __future__ import annotations

import dataclasses
from typing import Any

from alerting.dedupe import DEDUPED, decide
from alerting.group import apply_verdict
from alerting.model import Alert, LedgerEntry, Outcome, Status
from alerting.routing import Route
from alerting.stages.base import StageBase


class Dedupe(StageBase):
    """Episodes and their expiry; the verdict is :func:`alerting.dedupe.decide`."""

    def start(self) -> None:
        if "next_expiry" not in self.state and self.state["episodes"]:
            self.state["next_expiry"] = 0.0  # state without expiries: one scan backfills them

    def _keep_episode(self, fp: str, ep: dict[str, Any], alert: Alert, route: Route,
                      now: float) -> None:
        """Store episode ``ep`` under ``fp`` with its route and receiver (``config.fanout``)."""
        ep["fp"] = fp
        if route.id != "0":
            ep["route"], ep["route_key"] = route.id, route.key
        if route.receiver != self._route_of(route.id).receiver:
            ep["receiver"] = route.receiver
        self.state["episodes"][fp] = ep
        if ep["status"] == "firing" and alert.status.value == "firing":
            self._set_expiry(ep, alert, now)

    def _deduplicated(self, fp: str, verdict: str, ep: Any, labels: Any, rid: str,
                      now: float) -> LedgerEntry | None:
        """The ``deduplicated`` entry of a verdict in :data:`alerting.dedupe.DEDUPED`, else None."""
        if verdict not in DEDUPED:
            return None
        if verdict == "deescalation":
            self.state["counters"]["deescalations"] += 1
        return self._final(rid, Outcome.DEDUPLICATED, now, fp=fp, reason=DEDUPED[verdict])

    def _set_expiry(self, ep: dict[str, Any], alert: Alert, now: float) -> None:
        """Expiry of firing ``ep``: the alert's future ``endsAt``, else ``now +
        timing.resolve_timeout`` (Alertmanager's rule); every firing receipt moves it."""
        ends = alert.ends_at
        ep["expires_at"] = ends if ends is not None and ends > now \
            else now + self.config.timing.resolve_timeout
        nxt = self.state.get("next_expiry")
        if nxt is None or ep["expires_at"] < nxt:
            self.state["next_expiry"] = ep["expires_at"]

    def _expire(self, now: float) -> None:
        """Resolve firing episodes past ``expires_at`` as if a resolve had arrived (no raw alert,
        no ledger entry); scans only when the earliest expiry is due."""
        st = self.state
        nxt = st.get("next_expiry")
        if nxt is None or now + 1e-9 < nxt:
            return
        upcoming = None
        for fp, ep in list(st["episodes"].items()):
            if ep["status"] != "firing":
                continue
            exp = ep.get("expires_at")
            if exp is None:  # state from before expiry existed
                exp = ep["expires_at"] = ep["last_seen"] + self.config.timing.resolve_timeout
            if exp > now + 1e-9:
                upcoming = exp if upcoming is None else min(upcoming, exp)
                continue
            alert = Alert.from_dict(ep["alert"])
            resolved = dataclasses.replace(alert, status=Status.RESOLVED, ends_at=exp, time=exp)
            verdict, new = decide(ep, resolved, now, self.config.dedupe.cooldown)
            new["fp"] = fp
            new["auto_resolved"] = True
            st["episodes"][fp] = new
            st["counters"]["auto_resolved"] = st["counters"].get("auto_resolved", 0) + 1
            if self._inhibit:
                self._index_source(fp, new, resolved.match_labels())
            if new.get("silenced_by") or new.get("inhibited_by"):
                self._muted_alert(fp, verdict, new, "silenced_by", new.get("silenced_by"), now)
            elif new["group"] is not None and new["group"] in st["groups"]:
                self._touch(st["groups"][new["group"]], (fp,))
                apply_verdict(st["groups"][new["group"]], verdict, new, None, now)
            else:
                st["episodes"].pop(fp, None)  # never grouped: nothing to tell
        st["next_expiry"] = upcoming
