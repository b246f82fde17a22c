"""The alert funnel (:mod:`alerting.stages` in order) over one JSON state
(:class:`alerting.stages.state.FunnelState`). Every method is a pure step of (state, event, now),
``now`` in epoch seconds: no I/O. The agents call :meth:`Funnel.take` per routed alert,
:meth:`Funnel.step` about each second, report sends via :meth:`Funnel.delivered` /
:meth:`Funnel.delivery_failed`, and restart the group timers after a configuration reload
(:meth:`Funnel.restart_timers`).

Ledger: every raw alert (id ``r<n>``) ends in exactly one outcome; ``received = delivered +
deduplicated + silenced + inhibited + merged + rejected + pending`` at all times. A muted raw
alert is final at once; its episode stays marked and joins its group once nothing mutes it.
"""
from __future__ import annotations

import copy
from typing import Any

from alerting.commands import routed
from alerting.config import AlertingConfig, ReceiverConfig
from alerting.dedupe import decide
from alerting.group import due_at
from alerting.intake import normalize
from alerting.model import Alert, AlertRejected, LedgerEntry, Message, Outcome, Severity
from alerting.routing import Decision, Route, routes_for
from alerting.stages import STAGES
from alerting.stages.dispatch import base_name
from alerting.stages.state import STATE_VERSION, FunnelState, Step, new_state

__all__ = ["Funnel", "STATE_VERSION", "new_state"]


class Funnel(*STAGES):  # type: ignore[misc]
    """The whole funnel for one validated ``config``; ``state`` from a previous ``Funnel.state``
    (None: empty)."""

    def __init__(self, config: AlertingConfig, state: FunnelState | None = None) -> None:
        self.state = state if state is not None else new_state()
        # a receiver the state holds and the configuration lost (a worker started on a file
        # without it) settles its groups as type none, as a reload does (keep_removed_receivers)
        held = {base_name(n) for n in self.state["receivers"]}.union(
            g["receiver"] for g in self.state["groups"].values())
        known = {r.name for r in config.receivers}
        if held - known:
            config = config.model_copy(update={"receivers": [*config.receivers, *(
                ReceiverConfig(name=n, type="none") for n in sorted(held - known))]})
        self.config = config
        self.ticked = {}
        self.changed = {}
        self._norm = {"asset_labels": tuple(config.normalize.asset_labels),
                      "default_severity": Severity[config.normalize.default_severity.upper()]}
        for stage in STAGES:
            stage.start(self)

    def ingest(self, raw: Any, now: float, raw_id: str | None = None, *,
               decision: Decision | None = None,
               traceparent: str | None = None,
               received_at: float | None = None) -> list[LedgerEntry]:
        """Normalize one raw alert (native, Alertmanager or :class:`Alert`) and :meth:`take` it
        on ``decision``, else on every route (:func:`alerting.commands.routed`). Returns the ledger
        entries made final; never raises for bad input."""
        try:
            alert = normalize(raw, now, **self._norm)
        except AlertRejected as e:
            return [self.reject(str(e), now, raw_id)]
        if decision is not None:
            return self.take(alert, decision, now, raw_id, traceparent=traceparent,
                             received_at=received_at)
        rid = raw_id or f"r{self.state['seq']['raw'] + 1}"
        try:
            decisions = routed(self.config, alert, rid)
        except Exception as e:  # nothing changed yet: a forged alert is one rejection
            return [self.reject(f"(alert): unreadable alert: {type(e).__name__}: {e}", now, rid)]
        out: list[LedgerEntry] = []
        for copy_id, d in decisions:  # ``continue``: one copy per further route
            out += self.take(alert, d, now, copy_id, traceparent=traceparent,
                             received_at=received_at)
        return out

    def take(self, alert: Alert, decision: Decision, now: float, raw_id: str | None = None, *,
             traceparent: str | None = None, received_at: float | None = None) -> list[LedgerEntry]:
        """Take one checked alert at ``now`` (s) on the router's ``decision`` (receiver,
        fingerprint, route). ``traceparent`` becomes its group's delivery parent; ``received_at``
        (s) starts a new group's ``group_wait``, as Alertmanager's dispatcher. Returns the entries
        made final (none while pending in a group); never raises for bad input."""
        st, c = self.state, self.state["counters"]
        st["seq"]["raw"] += 1
        rid = raw_id or f"r{st['seq']['raw']}"
        c["received"] += 1
        if alert.invalid_unicode:
            c["invalid_unicode"] = c.get("invalid_unicode", 0) + 1
        try:
            labels = alert.match_labels()
            route = self._route_of(decision.route, decision.receiver)
        except Exception as e:  # nothing changed yet: a bug or a forged alert is one rejection
            return [self._final(rid, Outcome.REJECTED, now,
                                reason=f"(alert): unreadable alert: {type(e).__name__}: {e}")]
        return self._take(alert, decision.fingerprint, labels, rid, route, now,
                          traceparent, received_at)

    def _take(self, alert: Alert, fp: str, labels: dict[str, str], rid: str, route: Route,
              now: float, traceparent: str | None = None,
              received_at: float | None = None) -> list[LedgerEntry]:
        """One alert (or continue copy) through dedupe, inhibit, silence, group."""
        try:
            verdict, ep = decide(self.state["episodes"].get(fp), alert, now,
                                 self.config.dedupe.cooldown)
        except Exception as e:  # nothing changed yet: a bug or a forged alert is one rejection
            return [self._final(rid, Outcome.REJECTED, now,
                                reason=f"(alert): unreadable alert: {type(e).__name__}: {e}")]
        if ep is not None:
            self._keep_episode(fp, ep, alert, route, now)
        for stage in (self._inhibit_alert, self._silence_alert, self._deduplicated):
            entry = stage(fp, verdict, ep, labels, rid, now)
            if entry is not None:
                return [entry]
        self._group_alert(fp, verdict, ep, rid, route, now, traceparent, received_at)
        return []

    def reject(self, reason: str, now: float, raw_id: str | None = None) -> LedgerEntry:
        """Count a raw alert that could not be normalized as ``rejected`` (``reason``)."""
        self.state["seq"]["raw"] += 1
        self.state["counters"]["received"] += 1
        return self._final(raw_id or f"r{self.state['seq']['raw']}", Outcome.REJECTED, now,
                           reason=reason)

    def open_alerts(self, now: float) -> list[dict[str, Any]]:
        """Every firing alert as Alertmanager's ``gettableAlert`` (``GET /api/v2/alerts``), times
        RFC 3339, ``status`` ``{"state": "active"|"suppressed", "silencedBy", "inhibitedBy"}``; one
        pass over the open episodes."""
        from alerting.intake import format_time

        out = []
        for fp, ep in self.state["episodes"].items():
            if ep["status"] != "firing":
                continue
            alert = Alert.from_dict(ep["alert"])
            silenced = [ep["silenced_by"]] if ep.get("silenced_by") else []
            inhibited = list(ep.get("inhibited_by") or [])
            out.append({
                "fingerprint": fp,
                "labels": dict(alert.labels) if alert.source == "alertmanager" else alert.match_labels(),
                "annotations": dict(alert.annotations),
                "startsAt": format_time(ep["started_at"]), "updatedAt": format_time(ep["last_seen"]),
                # when it resolves unless re-sent (Alertmanager shows the same)
                "endsAt": format_time(ep.get("expires_at")),
                **({"generatorURL": alert.generator_url} if alert.generator_url else {}),
                "receivers": [{"name": self._receiver_for(alert)}],
                "status": {"state": "suppressed" if silenced or inhibited else "active",
                           "silencedBy": silenced, "inhibitedBy": inhibited},
            })
        return out

    def _receiver_for(self, alert: Alert) -> str:
        return routes_for(self.config, alert.match_labels())[0].receiver

    def step(self, now: float, only: list[str] | None = None) -> Step:
        """:meth:`tick` with its final entries and changed groups (a ``Step``)."""
        messages = self.tick(now, only)
        return Step(messages, self.drain_ledger(), dict(self.ticked), dict(self.changed))

    def tick(self, now: float, only: list[str] | None = None) -> list[Message]:
        """Advance to ``now`` (s): release ended mutes, evaluate due groups, and return the
        messages to send (one per receiver at most: new under the token bucket, or a due retry);
        final entries go to :meth:`drain_ledger`. ``only``: the group ids that may be due (the
        runner's index); None looks at every open group."""
        self.ticked, self.changed = {}, {}
        self._expire_foreign(now)
        self._release_muted(now)
        self._expire(now)
        later: dict[str, list[tuple[float, str]]] = {}
        groups = self.state["groups"]
        if only is None:
            items = list(groups.items())
        else:
            ids = dict.fromkeys(only)
            ids.update(dict.fromkeys(sorted(self.ticked)))
            items = [(gid, groups[gid]) for gid in ids if gid in groups]
        for gid, g in items:
            due = due_at(g, *self._timing(g))
            if due is None:
                continue
            if g.get("route") and self._held(g, now):
                continue  # a mute / outside an active time interval: sent when it ends
            if due <= now + 1e-9:
                self._evaluate(g, now)
            else:
                later.setdefault(self._lane(g), []).append((due, gid))
        out = []
        for name in list(self.state["receivers"]):  # evaluating may open a lane
            if name in later:
                self._pull_forward(name, later[name], now)
            msg = self._dispatch(name, now)
            if msg is not None:
                out.append(msg)
        return out

    def _final(self, rid: str, outcome: Outcome, now: float, fp: str = "",
               message_id: str | None = None, silence_id: str | None = None,
               reason: str = "", inhibited_by: tuple[int, list[str]] | None = None) -> LedgerEntry:
        c = self.state["counters"]
        c[outcome.value] = c.get(outcome.value, 0) + 1
        if outcome is Outcome.SILENCED:
            c["silenced_by"][silence_id] = c["silenced_by"].get(silence_id, 0) + 1
        if inhibited_by is not None:  # counted per rule (index in inhibit_rules): bounded
            per_rule = c.setdefault("inhibited_by_rule", {})
            per_rule[str(inhibited_by[0])] = per_rule.get(str(inhibited_by[0]), 0) + 1
            return LedgerEntry(rid, outcome.value, now, fp, message_id, silence_id, reason,
                               list(inhibited_by[1]))
        if outcome is Outcome.DEDUPLICATED:
            c["dedupe_reasons"][reason] = c["dedupe_reasons"].get(reason, 0) + 1
        return LedgerEntry(rid, outcome.value, now, fp, message_id, silence_id, reason)

    def drain_ledger(self) -> list[LedgerEntry]:
        """Entries made final by :meth:`tick` since the last drain."""
        out = [LedgerEntry(**e) for e in self.state["ledger_out"]]
        self.state["ledger_out"] = []
        return out

    def pending(self) -> int:
        """Raw alerts not final yet (in groups, outboxes or flight), counted from the state by a
        walk of every open alert."""
        return sum(self.group_pending(g) for g in self.state["groups"].values()) + self.queued_pending()

    @staticmethod
    def group_pending(group: dict[str, Any]) -> int:
        """Raw alerts waiting in one open group's members."""
        return sum(len(m["raw"]) for m in group["members"].values())

    def queued_pending(self) -> int:
        """Raw alerts in the receivers' outboxes and messages in flight."""
        n = 0
        for rs in self.state["receivers"].values():
            sections = rs["outbox"] + (rs["inflight"]["sections"] if rs["inflight"] else [])
            n += sum(len(raws) for s in sections for _fp, _seq, raws in s["snapshot"])
        return n

    def counters(self, pending: int | None = None) -> dict[str, Any]:
        """A copy of every counter plus ``pending`` (the caller's count, or None to count here) and
        ``balanced`` (the ledger equation holds); ``inhibited_by_rule`` keys are rule indexes."""
        c = copy.deepcopy(self.state["counters"])
        c.setdefault("inhibited", 0)
        c.setdefault("inhibited_by_rule", {})
        c["pending"] = self.pending() if pending is None else pending
        c["balanced"] = c["received"] == sum(c[k] for k in (
            "delivered", "deduplicated", "silenced", "inhibited", "merged", "rejected", "pending"))
        return c
