"""Group stage (Alertmanager's dispatcher: ``group_by``, ``group_wait``, ``group_interval``,
``repeat_interval``): episodes join groups per route; due groups go to the receiver's outbox."""
from __future__ import annotations

import dataclasses
from typing import Any

from alerting import outbox as outbox_
from alerting.group import (apply_verdict, build_sections, commit_sections, count_member, due_at,
                            group_key, join_traces, new_group, note_insert, restart_timer,
                            set_trace)
from alerting.model import Alert, Outcome
from alerting.routing import Route, group_route, muted_at, route_by_id, routes_for
from alerting.stages.base import StageBase


class Grouping(StageBase):
    """Aggregation groups of one funnel."""

    def start(self) -> None:
        #: route id -> Route (settings inherited), for carried decisions
        self._routes: dict[str, Route] = {}

    def _group_alert(self, fp: str, verdict: str, ep: dict[str, Any], rid: str, route: Route,
                     now: float, traceparent: str | None, received_at: float | None) -> None:
        """A passing alert joins its group, opened at ``received_at`` when given (Alertmanager
        counts ``group_wait`` from receipt)."""
        if ep.get("silenced_by") or ep.get("inhibited_by"):
            self._unmute(fp, ep)
        opened = now if received_at is None else min(now, received_at)
        g = self._group_for(ep, opened, route)
        apply_verdict(g, verdict, ep, rid, now, traceparent)
        note_insert(g, ep["started_at"], self._timing(g)[0], now)

    def restart_timers(self, at: float, previous: Any = None) -> list[str]:
        """A configuration reload at ``at`` (epoch s): every group opened before it takes its
        route's timing from the configuration in use and restarts its timer
        (:func:`alerting.group.restart_timer`). Once per reload: ``at`` is kept as the state's
        ``reloaded_at`` and a reload no later than it changes nothing (a replay, or a partition
        taken over by a worker that reloaded earlier). A group that names its route by place only
        (opened before groups kept their route's key) is given the key of the route at that place
        in ``previous``, the configuration before the reload, when known. Returns the ids of the
        groups changed."""
        st = self.state
        done = st.get("reloaded_at")
        if done is not None and done >= at:
            return []
        st["reloaded_at"] = at
        out = []
        for gid, g in st["groups"].items():
            if g["opened_at"] >= at:
                continue
            stamped = False
            if g.get("route") and "route_key" not in g and previous is not None:
                before = route_by_id(previous, g["route"])
                if before is not None:
                    g["route_key"], stamped = before.key, True
            route = group_route(self.config, g) if g.get("route") else None
            if route is not None:  # Alertmanager's new group takes the new route's options
                g["timing"] = route.timing()
                g["route"] = route.id  # its place in this configuration
            if restart_timer(g, at, self._timing(g)[0]) or stamped:
                out.append(gid)
        return out

    def _route_of(self, rid: str, receiver: str | None = None) -> Route:
        """The route ``rid`` (the root if the config lost it), for ``receiver`` when given."""
        route = self._routes.get(rid)
        if route is None:
            route = route_by_id(self.config, rid) or route_by_id(self.config, "0")
            self._routes[rid] = route
        if receiver is not None and route.receiver != receiver:
            route = dataclasses.replace(route, receiver=receiver)
        return route

    def _route(self, ep: dict[str, Any]) -> Route:
        """An episode's route: the one it was taken for, else the first the alert reaches now."""
        route = group_route(self.config, ep) if ep.get("route") else None
        if route is None:
            route = routes_for(self.config, Alert.from_dict(ep["alert"]).match_labels())[0]
        if ep.get("receiver") and ep["receiver"] != route.receiver:  # config.fanout's copy
            route = dataclasses.replace(route, receiver=ep["receiver"])
        return route

    def _group_for(self, ep: dict[str, Any], now: float,
                   route: Route | None = None) -> dict[str, Any]:
        groups = self.state["groups"]
        if ep["group"] in groups:
            return groups[ep["group"]]
        alert = Alert.from_dict(ep["alert"])
        if route is None:  # the router's decision, else the episode's route
            route = self._route(ep)
        # the route's key is part of the group key below the root (nested routes group apart)
        key = route.receiver if route.id == "0" else f"{route.receiver}@{route.key}"
        gid, labels = group_key(key, alert, list(route.group_by))
        if gid not in groups and route.id != "0":
            # a group opened before groups were keyed by route key: by its place
            old, _ = group_key(f"{route.receiver}@{route.id}", alert, list(route.group_by))
            gid = old if old in groups and "route_key" not in groups[old] else gid
        if gid not in groups:
            groups[gid] = new_group(gid, route.receiver, labels, now)
            if route.id != "0":
                groups[gid].update(route=route.id, route_key=route.key, timing=route.timing())
        ep["group"] = gid
        return groups[gid]

    def _touch(self, g: dict[str, Any], fps: Any = ()) -> None:
        """Note in :attr:`ticked` that this tick changes group ``g`` (with its members before) and
        in :attr:`changed` the member fingerprints ``fps`` it sets or removes."""
        self.ticked.setdefault(g["id"], list(g["members"]))
        self.changed.setdefault(g["id"], set()).update(fps)

    def _timing(self, g: dict[str, Any]) -> tuple[float, float, float]:
        """(group_wait, group_interval, repeat_interval) of group ``g`` in seconds."""
        t = self.config.timing
        return g.get("timing") or (t.group_wait, t.group_interval, t.repeat_interval)

    def _remind(self, g: dict[str, Any], now: float) -> bool:
        """True when group ``g``'s repeat_interval has passed by ``now``."""
        at = due_at(dict(g, news_at=None), *self._timing(g))
        return at is not None and at <= now + 1e-9

    def _held(self, g: dict[str, Any], now: float) -> bool:
        """True while time intervals mute the group's route (docs/alerting.md, "Routes")."""
        route = group_route(self.config, g)
        return route is not None and muted_at(self.config, route, now)

    def _evaluate(self, g: dict[str, Any], now: float) -> None:
        st = self.state
        rc = self.config.receiver(g["receiver"])
        muted = self._muter(now) if self._silences or self._inhibit else (lambda m: None)
        lane = self._lane(g)
        outbox = st["receivers"][lane]["outbox"]
        # a queued, unsent section of this group is rebuilt
        stale = outbox_.unqueue(g, outbox, self._queued.setdefault(lane, {}))
        if stale is None:
            return
        self._touch(g, [fp for s in stale["sections"] for fp, _q, _r in s["snapshot"]])
        self._dequeued(lane, stale["sections"])
        refused = g.pop("refused_at", None) is not None  # its last message was refused
        if rc.format == "alertmanager":
            _told_when_queued(g, stale["sections"])
        sections, effects = build_sections(g, self.config.grouping.batch_size,
                                           rc.format == "alertmanager",
                                           self.config.dedupe.suppress_transient, muted,
                                           rc.send_resolved)
        dropped = effects["transient"] + effects["quiet"]
        # what commit_sections and the muted/dropped handling below change
        self._touch(g, [fp for fp, m in g["members"].items() if m["sent_seq"] != m["news_seq"] or "tp" in m])
        self._touch(g, [fp for s in sections for fp, _q, _r in s["snapshot"]])
        self._touch(g, dropped + list(effects["muted"]))
        last_sent = g["last_sent_at"]
        # no reminder before repeat_interval: the only news was left out, or undone (a told
        # alert resolved and fired again), so the firing set is the one told (DedupStage
        # needsUpdate, IsFiringSubset)
        no_news = (sections and sections[0]["reminder"] and not stale["sections"]
                   and not refused and not self._remind(g, now))
        if no_news:
            sections = []
        commit_sections(g, sections, now)
        if no_news or (not sections and dropped):
            g["last_sent_at"] = last_sent  # nothing sent: the repeat_interval clock runs on
        for s in sections:
            s.update(merged=stale["merged"], set=f"{g['id']}@{now}")
            if stale["sections"]:  # rebuilt: the older queued sections' trace goes first
                set_trace(s, *join_traces(stale["sections"] + [s]))
        self._drop(g, effects["transient"], "transient", now)
        self._quiet(g, effects["quiet"], bool(sections), effects["muted"], now)
        for fp, (key, by) in effects["muted"].items():
            m = g["members"][fp]
            if m["status"] == "resolved":
                del g["members"][fp]  # resolved: not in notified_firing
                self._end_member(fp)
                for r in m["raw"]:
                    entry = (self._final(r, Outcome.SILENCED, now, fp=fp, silence_id=by)
                             if key == "silenced_by" else
                             self._final(r, Outcome.INHIBITED, now, fp=fp, inhibited_by=by))
                    st["ledger_out"].append(entry.to_dict())
            elif fp in st["episodes"]:
                self._mark(fp, st["episodes"][fp], key, by[1] if key == "inhibited_by" else by)
        if not g["members"]:
            del st["groups"][g["id"]]
        outbox[stale["at"]:stale["at"]] = sections
        self._enqueued(lane, sections)

    def _quiet(self, g: dict[str, Any], fps: list[str], sent: bool, muted: Any,
               now: float) -> None:
        """Resolved members ``fps`` of a receiver without send_resolved, at a flush that ``sent``
        a message or not (``muted``: the fingerprints muted now). Alertmanager's notification log
        keeps the firing set it last told until it tells another, and a resolve alone tells
        nothing (DedupStage ``needsUpdate``), so while the group sends nothing and something in it
        still fires (and either fires unmuted or all it holds is muted), a member told firing
        stays as told (resolved, no news, its raws ended, its episode open): firing again, it is
        no news. Otherwise such members leave."""
        members = g["members"]
        # members kept as told earlier left Alertmanager's group at that flush (dispatch.go
        # deletes resolved alerts after each flush); it still logs its firing set unless every
        # alert left is muted (the pipeline stops before DedupStage) or one of them fires
        others = {fp: m for fp, m in members.items()
                  if not (m["status"] == "resolved" and m["news"] is None)}
        unmuted = [m for fp, m in others.items() if fp not in muted]
        keep = (not sent and any(m["status"] == "firing" for m in others.values())
                and (not unmuted or any(m["status"] == "firing" for m in unmuted)))
        told = [fp for fp in fps if keep and members[fp]["notified"]]
        self._drop(g, [fp for fp in fps if fp not in told], "send_resolved", now)
        c = self.state["counters"]
        for fp in told:
            m = members[fp]
            self._settle_raws(m, "send_resolved", now)
            m["news"] = None  # its resolve is not news: the told firing set stands
            c["resolved_not_sent"] = c.get("resolved_not_sent", 0) + 1
        if not keep:  # the told firing set is replaced: members kept as told leave
            gone = [fp for fp, m in members.items()
                    if m["status"] == "resolved" and m["news"] is None and fp not in muted]
            self._touch(g, gone)
            for fp in gone:
                del members[fp]
                self._end_member(fp)

    def _settle_raws(self, m: dict[str, Any], reason: str, now: float) -> None:
        """End member ``m``'s waiting raws ``deduplicated`` with ``reason``."""
        for r in m["raw"]:
            self.state["ledger_out"].append(self._final(r, Outcome.DEDUPLICATED, now, fp=m["fp"],
                                                        reason=reason).to_dict())
        m["raw"] = []

    def _drop(self, g: dict[str, Any], fps: list[str], reason: str, now: float) -> None:
        """Members ``fps`` leave group ``g`` untold, their raws ``deduplicated`` with ``reason``:
        ``transient`` (resolved before sent) or ``send_resolved`` (receiver takes no resolves)."""
        c = self.state["counters"]
        counter = "transient_suppressed" if reason == "transient" else "resolved_not_sent"
        for fp in fps:
            m = g["members"].pop(fp)
            count_member(g, m, -1)
            self._end_member(fp)
            c[counter] = c.get(counter, 0) + 1
            self._settle_raws(m, reason, now)

    def _end_member(self, fp: str) -> None:
        """A resolved member left: its episode ends unless it fired again while muted."""
        ep = self.state["episodes"].get(fp)
        if ep is None or ep["status"] == "resolved":
            self._unmute(fp, self.state["episodes"].pop(fp, None))


def _told_when_queued(g: dict[str, Any], sections: list[dict[str, Any]]) -> None:
    """Members of group ``g`` that its queued ``sections`` list firing count as told (``sent``):
    Alertmanager tells a group at the flush that decides it, with no queue behind other groups'
    messages, so their resolve is news even when the receiver's queue held them until then
    (without this, the DedupStage rule of :func:`alerting.group.build_sections` would drop the
    resolve of a group never told, as if it had never been due)."""
    for s in sections:
        for a in s["alerts"]:
            m = g["members"].get(a["fingerprint"])
            if m is not None and a["status"] == "firing":
                m["sent"] = True
