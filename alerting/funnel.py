"""The alert funnel: normalize -> fingerprint/dedupe -> silence -> group ->
token bucket -> webhook delivery, as one object over plain serializable state.

Every method is a pure step of (state, event, now): ``now`` is float epoch
seconds from the caller's clock; there is no I/O and no asyncio here. The
Kafka agents call :meth:`Funnel.ingest` for each raw alert,
:meth:`Funnel.tick` about once a second, send the returned messages with
:mod:`alerting.webhook`, and report back through :meth:`Funnel.delivered` or
:meth:`Funnel.delivery_failed`. ``Funnel.state`` is JSON data (changelog
tables); ``Funnel(config, state)`` resumes from it.

Ledger: every raw alert gets an id (``r<n>``) and ends in exactly one
outcome; at all times ``received = delivered + deduplicated + silenced +
inhibited + merged + rejected + pending`` where ``pending`` is counted from
the state.

Inhibition (docs/alerting.md, "Inhibition"; Alertmanager's ``inhibit_rules``): a
firing alert matching a rule's ``source_matchers`` mutes the alerts matching
its ``target_matchers`` whose ``equal`` labels agree; an alert matching both
sides does not inhibit an alert that matches both too (nor itself), as in
Alertmanager. Inhibition comes before silences (Alertmanager's pipeline
order). An inhibited raw alert is final at once as ``inhibited`` (the entry
names the source fingerprints in ``inhibited_by``); its episode stays open,
marked ``inhibited_by``, and joins its group (is delivered) at the first tick
after its last source resolved, like an alert whose silence ended. A member
already grouped when its source fires is muted at the group's next
evaluation. Sources are indexed per rule by their ``equal`` values (an
in-memory index rebuilt from the episodes, holding firing sources only), so
a lookup costs one dict access per rule, not a scan of all alerts.

Per receiver one message is in flight at a time. While it is retried, due
groups are built into the receiver's outbox; when the in-flight message had
only definite failures (connection refused, an HTTP answer) and its retry is
due, it is superseded by a new message (new idempotency key) carrying its
content plus the outbox, so a receiver that was down gets one up-to-date
message instead of a backlog. After an ambiguous failure (timeout: the
receiver may have acted) the same message is retried with the same key.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any

from alerting import bucket as tb
from alerting import outbox as outbox_
from alerting.config import AlertingConfig
from alerting.dedupe import DEDUPED, decide
from alerting.delivery import is_retryable, next_attempt_at
from alerting.group import (apply_verdict, build_sections, commit_sections, due_at, group_key,
                            join_traces, new_group, note_insert, set_trace, settle)
from alerting.model import Alert, AlertRejected, LedgerEntry, Message, Outcome, Severity, Status
from alerting.intake import normalize
from alerting.routing import Decision, Route, muted_at, route_by_id, routes_for
from alerting.routing import decide as decide_routes
from alerting.matchers import Matcher, parse_matcher
from alerting.silence import Silence, create_silence, silenced_by

STATE_VERSION = 1
_COUNTERS = ("received", "delivered", "merged", "deduplicated", "silenced", "inhibited", "rejected",
             "deescalations", "transient_suppressed", "messages_delivered", "messages_superseded",
             "attempts", "attempts_failed", "attempts_lost", "http_429", "http_5xx",
             "client_errors", "network_errors", "rate_limited_ticks", "invalid_unicode")


def _critical_first(outbox: list[dict[str, Any]]) -> None:
    """Order ``outbox`` in place so that every section of a group holding a
    critical alert comes before the sections of other groups (stable: queue
    order otherwise, numbered parts keep their order); a message takes
    sections from the front, so critical groups are sent first and the rest
    wait to be merged into later messages."""
    hot = {s["group_id"] for s in outbox
           if any(a["severity"] == "critical" for a in s["alerts"])}
    if hot and len(hot) < len({s["group_id"] for s in outbox}):
        outbox.sort(key=lambda s: s["group_id"] not in hot)


def new_state() -> dict[str, Any]:
    """An empty funnel state."""
    return {"version": STATE_VERSION, "seq": {"raw": 0, "message": 0, "silence": 0},
            "episodes": {}, "groups": {}, "silences": {}, "silenced": {}, "receivers": {},
            "counters": dict.fromkeys(_COUNTERS, 0) | {"silenced_by": {}, "dedupe_reasons": {},
                                                       "inhibited_by_rule": {}},
            "ledger_out": []}


class Funnel:
    """The whole funnel for one configuration.

    Args:
        config: validated :class:`~alerting.config.AlertingConfig`.
        state: state from a previous ``Funnel.state`` (JSON round-trip safe);
            None starts empty.
    """

    def __init__(self, config: AlertingConfig, state: dict[str, Any] | None = None) -> None:
        self.config = config
        self.state = state if state is not None else new_state()
        if "silenced" not in self.state:  # the store keeps it in the episodes only
            self.state["silenced"] = {fp: ep["silenced_by"] for fp, ep in self.state["episodes"].items()
                                      if ep.get("silenced_by")}
        self._silences = [Silence.from_dict(s) for s in self.state["silences"].values()]
        self._inhibit: list[tuple[list[Matcher], list[Matcher], tuple[str, ...]]] = [
            ([parse_matcher(m) for m in r.source_matchers],
             [parse_matcher(m) for m in r.target_matchers], tuple(r.equal))
            for r in config.inhibit_rules]
        #: per rule: equal-label values -> {source fp: source also matches the target side}
        self._sources: list[dict[tuple[str, ...], dict[str, bool]]] = [{} for _ in self._inhibit]
        #: source fp -> [(rule index, equal values)] where it is indexed
        self._source_keys: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
        #: fingerprints of firing episodes currently marked inhibited
        self._inhibited: set[str] = set()
        #: a source left the index since the last tick: inhibited alerts are
        #: re-checked (only then; True after a load, to be safe)
        self._sources_left = True
        #: groups the last (or running) tick released or ended alerts into,
        #: each with its member fingerprints from before (the runner writes
        #: them: they may not be among the due groups it asked about)
        self.ticked: dict[str, list[str]] = {}
        if self._inhibit:
            for fp, ep in self.state["episodes"].items():
                self._index_source(fp, ep, Alert.from_dict(ep["alert"]).match_labels())
                if ep.get("inhibited_by"):
                    self._inhibited.add(fp)
        if "next_expiry" not in self.state and self.state["episodes"]:
            self.state["next_expiry"] = 0.0  # state from before expiry: one scan backfills ends
        #: the routing tree has more than first-match routing (continue,
        #: nested routes, per-route grouping / timing / time intervals)
        self._tree = bool(config.route.routes or getattr(config, "fanout", None))
        #: route id -> Route (settings inherited), for carried decisions
        self._routes: dict[str, Route] = {}
        self._norm = {"asset_labels": tuple(config.normalize.asset_labels),
                      "default_severity": Severity[config.normalize.default_severity.upper()]}
        for r in config.receivers:
            self.state["receivers"].setdefault(r.name, {"bucket": None, "outbox": [], "inflight": None})
        #: receiver -> {group id: its sections in the outbox}, and receiver ->
        #: {id(section): section} of queued sections not flagged merged yet:
        #: derived from the outboxes (not stored), kept up to date where
        #: sections are queued and taken, so a tick does not walk the outbox
        self._queued: dict[str, dict[str, int]] = {}
        self._fresh: dict[str, dict[int, dict]] = {}
        for name, rs in self.state["receivers"].items():
            self._enqueued(name, rs["outbox"])

    # ----------------------------------------------------------------- ingest
    def ingest(self, raw: Any, now: float, raw_id: str | None = None, *,
               decision: Decision | None = None,
               traceparent: str | None = None,
               received_at: float | None = None) -> list[LedgerEntry]:
        """Take one raw alert (native dict, Alertmanager dict or :class:`Alert`)
        at ``now`` (seconds). ``raw_id`` names the raw alert in the ledger
        (default ``r<n>`` from the funnel's own sequence; the Kafka agents
        pass a globally unique id such as ``<event id>:<index>``).
        ``decision``: receiver and fingerprint the router already decided
        for this (normalized) alert (:mod:`alerting.routing`); None decides
        here. ``traceparent``: the span of this decision (W3C); a group the
        alert opens keeps it as the parent of its message's delivery, and a
        member keeps it for the message's span links (docs/alerting.md,
        "Traces"). ``received_at``: when the API or producer took the alert
        (seconds; default ``now``); a group the alert opens counts its
        ``group_wait`` from then, as Alertmanager's dispatcher does on
        receipt, so the pipeline's latency does not delay its flushes.

        Returns:
            the ledger entries this call made final: one ``rejected``,
            ``deduplicated``, ``inhibited`` or ``silenced`` entry, or none
            when the alert passed and is pending in a group. Never raises for
            bad input.
        """
        st, c = self.state, self.state["counters"]
        st["seq"]["raw"] += 1
        rid = raw_id or f"r{st['seq']['raw']}"
        c["received"] += 1
        try:
            alert = normalize(raw, now, **self._norm)
        except AlertRejected as e:
            return [self._final(rid, Outcome.REJECTED, now, reason=str(e))]
        if alert.invalid_unicode:
            c["invalid_unicode"] = c.get("invalid_unicode", 0) + 1
        try:
            labels = alert.match_labels()
            if decision is not None:  # the router decided (issue 9.5): taken as given
                route = self._route_of(decision.route, decision.receiver)
                return self._take(alert, decision.fingerprint, labels, rid, route, now,
                                  traceparent, received_at)
            decisions = decide_routes(self.config, alert)
        except Exception as e:  # nothing changed yet: a bug or a forged alert is one rejection
            return [self._final(rid, Outcome.REJECTED, now,
                                reason=f"(alert): unreadable alert: {type(e).__name__}: {e}")]
        routes = ([self._route_of(d.route, d.receiver) for d in decisions] if self._tree
                  else [None])
        out = self._take(alert, decisions[0].fingerprint, labels, rid, routes[0], now,
                         traceparent, received_at)
        for d, route in zip(decisions[1:], routes[1:]):  # ``continue``: one copy per further route
            st["seq"]["raw"] += 1                       # (docs/alerting.md, "Routes")
            c["received"] += 1
            out += self._take(alert, d.fingerprint, labels, f"{rid}~{d.receiver}", route, now,
                              traceparent, received_at)
        return out

    def _route_of(self, rid: str, receiver: str | None = None) -> Route:
        """The route with id ``rid`` (cached per funnel; the root when the
        config no longer has it), for ``receiver`` when given (a further
        integration's receiver, ``config.fanout``)."""
        route = self._routes.get(rid)
        if route is None:
            route = route_by_id(self.config, rid) or route_by_id(self.config, "0")
            self._routes[rid] = route
        if receiver is not None and route.receiver != receiver:
            route = dataclasses.replace(route, receiver=receiver)
        return route

    def _take(self, alert: Alert, fp: str, labels: dict[str, str], rid: str, route: Route | None,
              now: float, traceparent: str | None = None,
              received_at: float | None = None) -> list[LedgerEntry]:
        """One alert (or its copy for a further route) through dedupe,
        inhibition, silences and grouping; see :meth:`ingest`."""
        st, c = self.state, self.state["counters"]
        try:
            verdict, ep = decide(st["episodes"].get(fp), alert, now, self.config.dedupe.cooldown)
        except Exception as e:  # nothing changed yet: a bug or a forged alert is one rejection
            return [self._final(rid, Outcome.REJECTED, now,
                                reason=f"(alert): unreadable alert: {type(e).__name__}: {e}")]
        if ep is not None:
            ep["fp"] = fp
            if route is not None and route.id != "0":
                ep["route"] = route.id
            if route is not None and route.receiver != self._route_of(route.id).receiver:
                ep["receiver"] = route.receiver  # a further integration's copy (config.fanout)
            st["episodes"][fp] = ep
            if ep["status"] == "firing" and alert.status.value == "firing":
                self._set_expiry(ep, alert, now)
            if self._inhibit and verdict not in DEDUPED:
                # a deduplicated alert leaves the episode's alert (and status) as
                # they were: the index stays what a restarted worker rebuilds
                self._index_source(fp, ep, labels)
        inhibited = self._inhibitors(fp, labels) if self._inhibit else None
        if inhibited is not None and verdict != "resolved":
            # a resolve joins its group: whether it is inhibited is asked at
            # the group's flush, as Alertmanager's pipeline asks its inhibitor
            # (notify.go MuteStage), so the order in which a source's and a
            # target's resolves arrive does not matter
            self._muted_alert(fp, verdict, ep, "inhibited_by", inhibited[1], now)
            return [self._final(rid, Outcome.INHIBITED, now, fp=fp, inhibited_by=inhibited)]
        sid = silenced_by(self._silences, labels, now) if self._silences else None
        if sid is not None:
            self._muted_alert(fp, verdict, ep, "silenced_by", sid, now)
            return [self._final(rid, Outcome.SILENCED, now, fp=fp, silence_id=sid)]
        if verdict in DEDUPED:
            if verdict == "deescalation":
                c["deescalations"] += 1
            return [self._final(rid, Outcome.DEDUPLICATED, now, fp=fp, reason=DEDUPED[verdict])]
        if ep.get("silenced_by") or ep.get("inhibited_by"):
            self._unmute(fp, ep)
        opened = now if received_at is None else min(now, received_at)
        g = self._group_for(ep, opened, route)
        apply_verdict(g, verdict, ep, rid, now, traceparent)
        note_insert(g, ep["started_at"], self._timing(g)[0], now)
        return []

    def _set_expiry(self, ep: dict[str, Any], alert: Alert, now: float) -> None:
        """When the firing episode ``ep`` resolves unless re-sent (docs/alerting.md,
        "Resolution without a human"): the alert's own future ``endsAt``, else
        ``now + timing.resolve_timeout`` (Alertmanager's rule). Every firing
        receipt, duplicates included, moves it."""
        ends = alert.ends_at
        ep["expires_at"] = ends if ends is not None and ends > now \
            else now + self.config.timing.resolve_timeout
        nxt = self.state.get("next_expiry")
        if nxt is None or ep["expires_at"] < nxt:
            self.state["next_expiry"] = ep["expires_at"]

    def _expire(self, now: float) -> None:
        """Resolve every firing episode whose ``expires_at`` passed, as if a
        resolved alert with ``endsAt`` = ``expires_at`` had arrived (no raw
        alert, so nothing is added to the ledger). Scans the episodes only
        when the earliest known expiry is due."""
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
                self._touch(st["groups"][new["group"]])
                apply_verdict(st["groups"][new["group"]], verdict, new, None, now)
            else:
                st["episodes"].pop(fp, None)  # never grouped: nothing to tell
        st["next_expiry"] = upcoming

    def reject(self, reason: str, now: float, raw_id: str | None = None) -> LedgerEntry:
        """Count a raw alert that an earlier stage could not normalize
        (``reason`` names the field) as received and ``rejected`` at ``now``."""
        self.state["seq"]["raw"] += 1
        self.state["counters"]["received"] += 1
        return self._final(raw_id or f"r{self.state['seq']['raw']}", Outcome.REJECTED, now,
                           reason=reason)

    def _muted_alert(self, fp: str, verdict: str, ep: dict | None, key: str, by: Any,
                     now: float) -> None:
        """The episode of a raw alert that a silence (``key`` = ``silenced_by``,
        ``by`` = silence id) or inhibition (``inhibited_by``, source
        fingerprints) hides: a firing one is marked and watched for release;
        a resolved one ends (told to its group if it was grouped)."""
        st = self.state
        if ep is None:
            return
        if ep["status"] == "resolved":
            self._unmute(fp, ep)
            if ep["group"] is None or ep["group"] not in st["groups"]:
                st["episodes"].pop(fp, None)  # began and ended unseen: nothing to tell
            elif verdict == "resolved":
                apply_verdict(st["groups"][ep["group"]], "resolved", ep, None, now)
            return
        self._mark(fp, ep, key, by)

    def _mark(self, fp: str, ep: dict[str, Any], key: str, by: Any) -> None:
        """Mark a firing episode silenced (``key`` = ``silenced_by``) or
        inhibited (``inhibited_by``); the other mark is cleared."""
        if key == "inhibited_by":
            if ep.get("silenced_by"):
                ep["silenced_by"] = None
                self.state["silenced"].pop(fp, None)
            ep["inhibited_by"] = by
            self._inhibited.add(fp)
        else:
            if ep.get("inhibited_by"):
                ep["inhibited_by"] = None
                self._inhibited.discard(fp)
            ep["silenced_by"] = by
            self.state["silenced"][fp] = by

    def _unmute(self, fp: str, ep: dict[str, Any] | None) -> None:
        """Clear both marks of an episode (it passed, resolved or ended)."""
        if ep is not None:
            if ep.get("silenced_by"):
                ep["silenced_by"] = None
            if ep.get("inhibited_by"):
                ep["inhibited_by"] = None
        self.state["silenced"].pop(fp, None)
        self._inhibited.discard(fp)

    # ------------------------------------------------------------- inhibition
    def _index_source(self, fp: str, ep: dict[str, Any], labels: dict[str, str]) -> None:
        """Keep the source index in step with episode ``fp``: indexed under
        every rule whose source side its labels match while it fires,
        nowhere once it resolved."""
        keys: list[tuple[int, tuple[str, ...]]] = []
        if ep["status"] == "firing":
            for i, (src, tgt, equal) in enumerate(self._inhibit):
                if all(m.matches(labels) for m in src):
                    key = tuple(labels.get(n, "") for n in equal)
                    self._sources[i].setdefault(key, {})[fp] = all(m.matches(labels) for m in tgt)
                    keys.append((i, key))
        for i, key in self._source_keys.pop(fp, ()):
            if (i, key) in keys:
                continue
            bucket = self._sources[i].get(key)
            if bucket is not None:
                bucket.pop(fp, None)
                self._sources_left = True  # some inhibited alert may be free now
                if not bucket:
                    del self._sources[i][key]
        if keys:
            self._source_keys[fp] = keys

    def _inhibitors(self, fp: str, labels: dict[str, str]) -> tuple[int, list[str]] | None:
        """(rule index, [source fingerprint]) of the first rule inhibiting the
        alert ``fp`` with ``labels``, or None. Alertmanager's rule: target side
        matches, a firing source with equal ``equal`` values exists, and when
        the alert matches the source side too, sources that also match the
        target side are skipped (so nothing inhibits itself)."""
        for i, (src, tgt, equal) in enumerate(self._inhibit):
            candidates = self._sources[i].get(tuple(labels.get(n, "") for n in equal))
            if not candidates or not all(m.matches(labels) for m in tgt):
                continue
            two_sided = all(m.matches(labels) for m in src)
            for sfp, both in candidates.items():
                if sfp != fp and not (two_sided and both):
                    return i, [sfp]
        return None

    def _release_muted(self, now: float) -> None:
        """Firing episodes whose silence ended or whose inhibiting sources
        resolved, and that nothing else mutes now, join their group as new
        (case A10; Alertmanager releases an inhibited alert when its source
        resolves)."""
        st = self.state
        recheck = [f for f in self._inhibited if f not in st["silenced"]] if self._sources_left else []
        self._sources_left = False
        for fp in list(st["silenced"]) + recheck:
            ep = st["episodes"].get(fp)
            if ep is None or ep["status"] != "firing":
                self._unmute(fp, ep)
                continue
            labels = Alert.from_dict(ep["alert"]).match_labels()
            inhibited = self._inhibitors(fp, labels) if self._inhibit else None
            if inhibited is not None:
                if ep.get("inhibited_by") != inhibited[1]:
                    self._mark(fp, ep, "inhibited_by", inhibited[1])
                continue
            still = silenced_by(self._silences, labels, now) if self._silences else None
            if still is not None:
                if ep.get("silenced_by") != still:
                    self._mark(fp, ep, "silenced_by", still)
                continue
            self._unmute(fp, ep)
            # Alertmanager groups a muted alert on receipt: its group's timer
            # has run since, so the release goes out at that timer's next flush
            g = self._group_for(ep, min(now, ep["started_at"]))
            self._touch(g)
            apply_verdict(g, "release", ep, None, now)

    def _touch(self, g: dict[str, Any]) -> None:
        """Note in :attr:`ticked` that this tick changes group ``g`` (first
        time: with its members as they are now)."""
        self.ticked.setdefault(g["id"], list(g["members"]))

    def _receiver_for(self, alert: Alert) -> str:
        return routes_for(self.config, alert.match_labels())[0].receiver

    def _route(self, ep: dict[str, Any]) -> Route:
        """The route of an episode: the one it was taken for (``continue``
        copies), else the first the alert reaches now."""
        rid = ep.get("route")
        route = route_by_id(self.config, rid) if rid else None
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
        # the route id is part of the key below the root (nested routes group apart)
        key = route.receiver if route.id == "0" else f"{route.receiver}@{route.id}"
        gid, labels = group_key(key, alert, list(route.group_by))
        if gid not in groups:
            groups[gid] = new_group(gid, route.receiver, labels, now)
            if route.id != "0":
                groups[gid]["route"] = route.id
                groups[gid]["timing"] = route.timing()
        ep["group"] = gid
        return groups[gid]

    # --------------------------------------------------------------- silences
    def add_silence(self, spec: dict[str, Any], now: float, silence_id: str | None = None) -> Silence:
        """Create a silence from an API request (see
        :func:`alerting.silence.create_silence` for the keys) at ``now``.
        ``silence_id`` is the id to give it (default ``s<n>``); a known id
        is replaced, so the same command applied twice leaves one silence
        (the Kafka agents broadcast one id to every funnel partition).

        Raises:
            SilenceRefused: naming the bad key (broad matchers without
                ``allow_broad``, missing author or comment, bad times...).
        """
        self.state["seq"]["silence"] += 1
        silence = create_silence(spec, now, silence_id or f"s{self.state['seq']['silence']}")
        self.state["silences"][silence.id] = silence.to_dict()
        self._silences = [s for s in self._silences if s.id != silence.id] + [silence]
        return silence

    def expire_silence(self, silence_id: str, now: float) -> bool:
        """End a silence at ``now`` (Alertmanager's expire); False if unknown."""
        d = self.state["silences"].get(silence_id)
        if d is None:
            return False
        if d["ends_at"] is None or d["ends_at"] > now:
            d["ends_at"] = max(now, d["starts_at"])
        self._silences = [Silence.from_dict(s) for s in self.state["silences"].values()]
        return True

    def silences(self) -> list[Silence]:
        """Every known silence (active, pending or expired)."""
        return list(self._silences)

    def open_alerts(self, now: float) -> list[dict[str, Any]]:
        """Every firing alert this funnel knows, in the shape of Alertmanager's
        ``gettableAlert`` (API v2 ``GET /api/v2/alerts``): ``fingerprint``,
        ``labels`` (as sent for Alertmanager-form alerts; the vocabulary labels
        for native ones), ``annotations``, ``startsAt``, ``updatedAt``,
        ``endsAt`` (when it resolves unless re-sent: its own endsAt or last
        receipt + ``resolve_timeout``), ``generatorURL``, ``receivers`` (``[{"name"}]``)
        and ``status`` = ``{"state": "active"|"suppressed", "silencedBy":
        [silence ids], "inhibitedBy": [source fingerprints]}``. Times RFC 3339.
        Cost: one pass over the open episodes (bounded by firing alerts)."""
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
                "endsAt": format_time(ep.get("expires_at")), "generatorURL": alert.generator_url,
                "receivers": [{"name": self._receiver_for(alert)}],
                "status": {"state": "suppressed" if silenced or inhibited else "active",
                           "silencedBy": silenced, "inhibitedBy": inhibited},
            })
        return out

    # ------------------------------------------------------------------- tick
    def tick(self, now: float, only: list[str] | None = None) -> list[Message]:
        """Advance to ``now`` (seconds): release ended silences, evaluate due
        groups into their receiver's outbox, and return the messages to send
        now (at most one per receiver: a new one when the token bucket allows,
        or a retry whose backoff has elapsed). Entries made final here
        (suppressed transients, alerts resolved under a silence) are returned
        by :meth:`drain_ledger`.

        ``only``: ids of the groups that may be due by ``now`` plus the
        longest refill interval (the runner's due index), in order; the
        groups this tick releases from silences or ends are looked at too.
        None looks at every open group (cost grows with them)."""
        self.ticked = {}
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
                later.setdefault(g["receiver"], []).append((due, gid))
        out = []
        for name in self.state["receivers"]:
            if name in later:
                self._pull_forward(name, later[name], now)
            msg = self._dispatch(name, now)
            if msg is not None:
                out.append(msg)
        return out

    def _held(self, g: dict[str, Any], now: float) -> bool:
        """True while the group's route is inside a mute time interval or
        outside all of its active ones (docs/alerting.md, "Routes")."""
        route = route_by_id(self.config, g["route"])
        return route is not None and muted_at(self.config, route, now)

    def _pull_forward(self, name: str, later: list[tuple[float, str]], now: float) -> None:
        """Critical first when tokens are scarce (docs/alerting.md, "Critical first").

        Rule: when receiver ``name`` is about to build a message (sections
        queued, nothing in flight, a token free) and the groups queued plus
        its groups due within one refill interval outnumber the tokens in its
        bucket, so they could not each have a message of their own, those
        groups are evaluated now (at most ``refill_interval`` seconds early)
        and share this message; :meth:`_dispatch` then takes sections of
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

    def _evaluate(self, g: dict[str, Any], now: float) -> None:
        st, c = self.state, self.state["counters"]
        rc = self.config.receiver(g["receiver"])
        muted = self._muter(now) if self._silences or self._inhibit else (lambda m: None)
        outbox = st["receivers"][g["receiver"]]["outbox"]
        # a queued, unsent section of this group is rebuilt
        stale = outbox_.unqueue(g, outbox, self._queued.setdefault(g["receiver"], {}))
        if stale is None:
            return
        self._dequeued(g["receiver"], stale["sections"])
        sections, effects = build_sections(g, self.config.grouping.batch_size,
                                           rc.format == "alertmanager",
                                           self.config.dedupe.suppress_transient, muted,
                                           rc.send_resolved)
        dropped = effects["transient"] + effects["quiet"]
        last_sent = g["last_sent_at"]
        if (dropped and sections and sections[0]["reminder"] and not stale["sections"]
                and not self._remind(g, now)):
            sections = []  # the only news was left out: no reminder before repeat_interval
        commit_sections(g, sections, now)
        if not sections and dropped:
            g["last_sent_at"] = last_sent  # nothing left: the repeat_interval clock runs on
        for s in sections:
            s.update(merged=stale["merged"], set=f"{g['id']}@{now}")
            if stale["sections"]:  # rebuilt: the older queued sections' trace goes first
                set_trace(s, *join_traces(stale["sections"] + [s]))
        self._drop(g, effects["transient"], "transient", now)
        self._drop(g, effects["quiet"], "send_resolved", now)
        for fp, (key, by) in effects["muted"].items():
            m = g["members"][fp]
            if m["status"] == "resolved":
                del g["members"][fp]
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
        self._enqueued(g["receiver"], sections)

    def _drop(self, g: dict[str, Any], fps: list[str], reason: str, now: float) -> None:
        """Members ``fps`` of group ``g`` leave it untold: their episodes end
        and their raw alerts are ``deduplicated`` with ``reason``
        (``transient``: resolved before ever sent, counted in
        ``transient_suppressed``; ``send_resolved``: a resolve the receiver
        does not take, counted in ``resolved_not_sent``)."""
        st, c = self.state, self.state["counters"]
        counter = "transient_suppressed" if reason == "transient" else "resolved_not_sent"
        for fp in fps:
            m = g["members"].pop(fp)
            self._end_member(fp)
            c[counter] = c.get(counter, 0) + 1
            for r in m["raw"]:
                st["ledger_out"].append(self._final(r, Outcome.DEDUPLICATED, now, fp=fp,
                                                    reason=reason).to_dict())

    def _enqueued(self, name: str, sections: list[dict[str, Any]]) -> None:
        """``sections`` were put in receiver ``name``'s outbox."""
        counts, fresh = self._queued.setdefault(name, {}), self._fresh.setdefault(name, {})
        for s in sections:
            counts[s["group_id"]] = counts.get(s["group_id"], 0) + 1
            if not s["merged"]:
                fresh[id(s)] = s

    def _dequeued(self, name: str, sections: list[dict[str, Any]]) -> None:
        """``sections`` left receiver ``name``'s outbox."""
        counts, fresh = self._queued.setdefault(name, {}), self._fresh.setdefault(name, {})
        for s in sections:
            n = counts.get(s["group_id"], 0) - 1
            if n > 0:
                counts[s["group_id"]] = n
            else:
                counts.pop(s["group_id"], None)
            fresh.pop(id(s), None)

    def _fill(self, name: str, rs: dict[str, Any], base: list[dict]) -> list[dict]:
        """:func:`alerting.outbox.fill`, keeping :attr:`_queued` and :attr:`_fresh` up to date."""
        taken: list[dict] = []
        sections = outbox_.fill(rs, base, self.config.grouping.batch_size, taken,
                                one_group=not self.config.grouping.merge_groups)
        self._dequeued(name, taken)
        return sections

    def _end_member(self, fp: str) -> None:
        """A resolved member left its group: its episode ends with it, unless
        the alert fired again while muted (the member is stale then; the
        episode stays, marked, a source still, and is released as new when
        nothing mutes it)."""
        ep = self.state["episodes"].get(fp)
        if ep is None or ep["status"] == "resolved":
            self._unmute(fp, self.state["episodes"].pop(fp, None))

    def _timing(self, g: dict[str, Any]) -> tuple[float, float, float]:
        """(group_wait, group_interval, repeat_interval) of group ``g``: its
        route's, else the configuration's (seconds)."""
        t = self.config.timing
        return g.get("timing") or (t.group_wait, t.group_interval, t.repeat_interval)

    def _remind(self, g: dict[str, Any], now: float) -> bool:
        """True when group ``g``'s repeat_interval has passed by ``now`` (a
        reminder is due whatever its news)."""
        at = due_at(dict(g, news_at=None), *self._timing(g))
        return at is not None and at <= now + 1e-9

    def _muter(self, now: float):
        """``muted(member)`` for :func:`alerting.group.build_sections`:
        ``("inhibited_by", (rule index, [source fps]))``, ``("silenced_by",
        silence id)`` or None; inhibition first (Alertmanager's order)."""
        def muted(m: dict[str, Any]):
            labels = Alert.from_dict(m["alert"]).match_labels()
            if self._inhibit:
                inhibited = self._inhibitors(m["fp"], labels)
                if inhibited is not None:
                    return "inhibited_by", inhibited
            sid = silenced_by(self._silences, labels, now) if self._silences else None
            return ("silenced_by", sid) if sid is not None else None
        return muted

    def _dispatch(self, name: str, now: float) -> Message | None:
        rs, c = self.state["receivers"][name], self.state["counters"]
        rc = self.config.receiver(name)
        inf = rs["inflight"]
        if inf is not None:
            if inf["state"] == "sending":
                if now < inf["sent_at"] + 3 * self.config.delivery.timeout:
                    outbox_.wait(self._fresh.setdefault(name, {}))
                    return None
                inf.update(state="waiting", next_attempt_at=now, maybe_delivered=True)
                inf["failures"] += 1
                c["attempts"] += 1
                c["attempts_lost"] += 1
            if now + 1e-9 < inf["next_attempt_at"]:
                outbox_.wait(self._fresh.setdefault(name, {}))
                return None
            if not inf["maybe_delivered"] and rs["outbox"]:
                _critical_first(rs["outbox"])
                sections = self._fill(name, rs, inf["sections"])
                c["messages_superseded"] += 1
                inf = rs["inflight"] = self._inflight(name, sections, now, inf["failures"])
            inf.update(state="sending", sent_at=now)
            self._sent(inf)
            return outbox_.to_message(inf)
        if not rs["outbox"]:
            return None
        _critical_first(rs["outbox"])
        b = rs["bucket"] or tb.new_bucket(rc.bucket.burst, now)
        ok, rs["bucket"] = tb.take(b, now, rc.bucket.burst, rc.bucket.refill_interval)
        if not ok:
            c["rate_limited_ticks"] += 1
            outbox_.wait(self._fresh.setdefault(name, {}))
            return None
        inf = rs["inflight"] = self._inflight(name, self._fill(name, rs, []), now, 0)
        inf.update(state="sending", sent_at=now)
        self._sent(inf)
        return outbox_.to_message(inf)

    def _sent(self, inf: dict[str, Any]) -> None:
        """Message ``inf`` leaves now: the firing members it lists may be seen
        from here on (before any acknowledgement), so a later resolve of
        theirs is news, never a suppressed transient (docs/alerting.md, step
        2). Their groups are noted in :attr:`ticked` (written by the runner)."""
        groups = self.state["groups"]
        for s in inf["sections"]:
            g = groups.get(s["group_id"])
            if g is None:
                continue
            for a in s["alerts"]:
                m = g["members"].get(a["fingerprint"])
                if m is not None and a["status"] == "firing" and not m.get("sent"):
                    self._touch(g)
                    m["sent"] = True

    def _inflight(self, name: str, sections: list[dict], now: float, failures: int) -> dict:
        self.state["seq"]["message"] += 1
        return outbox_.new_inflight(name, self.state["seq"]["message"], sections, now, failures)

    # --------------------------------------------------------------- delivery
    def _find(self, message_id: str) -> tuple[dict, dict] | tuple[None, None]:
        for rs in self.state["receivers"].values():
            inf = rs["inflight"]
            if inf is not None and inf["id"] == message_id:
                return rs, inf
        return None, None

    def delivered(self, message_id: str, now: float) -> list[LedgerEntry]:
        """The receiver accepted ``message_id`` (2xx) at ``now``: its raw alerts
        become ``delivered`` (or ``merged``) in it, delivered resolves end
        their episodes. An unknown or already settled id returns [] (acks
        may repeat after a restart)."""
        rs, inf = self._find(message_id)
        if inf is None:
            return []
        st, c = self.state, self.state["counters"]
        entries = []
        for s in inf["sections"]:
            outcome = Outcome.MERGED if s["merged"] else Outcome.DELIVERED
            raws = [(fp, r) for fp, _seq, rs_ in s["snapshot"] for r in rs_]
            g = st["groups"].get(s["group_id"])
            if g is not None:
                for m in settle(g, s["snapshot"], inf["sent_at"]):
                    raws += [(m["fp"], r) for r in m["raw"]]
                    ep = st["episodes"].get(m["fp"])
                    if ep is not None and ep["status"] == "resolved":
                        del st["episodes"][m["fp"]]
                if not g["members"]:
                    del st["groups"][g["id"]]
            entries += [self._final(r, outcome, now, fp=fp, message_id=message_id) for fp, r in raws]
        rs["inflight"] = None
        rs["last"] = {"outcome": "delivered", "at": now, "messageId": message_id}  # console
        c["messages_delivered"] += 1
        c["attempts"] += 1
        return entries

    def delivery_failed(self, message_id: str, now: float, *, status: int | None = None,
                        retry_after: float | None = None, maybe_delivered: bool = False) -> float | None:
        """An attempt of ``message_id`` failed at ``now``.

        Args:
            status: HTTP status, or None for a connect error / timeout.
            retry_after: the receiver's ``Retry-After`` in seconds, if any.
            maybe_delivered: True when the request may have been processed
                (a timeout after sending); the message is then never
                superseded, only retried with the same idempotency key.

        Returns:
            epoch seconds of the next attempt (capped exponential backoff,
            Retry-After honoured), or None for an unknown message id.
        """
        _rs, inf = self._find(message_id)
        if inf is None:
            return None
        _rs["last"] = {"outcome": "failed", "at": now, "status": status}  # console
        c, d = self.state["counters"], self.config.delivery
        inf["failures"] += 1
        c["attempts"] += 1
        c["attempts_failed"] += 1
        if status is None:
            c["network_errors"] += 1
        elif status == 429:
            c["http_429"] += 1
        elif status >= 500:
            c["http_5xx"] += 1
        elif not is_retryable(status):
            c["client_errors"] += 1
        if maybe_delivered:
            inf["maybe_delivered"] = True
        failures = inf["failures"] if is_retryable(status) else 10**6  # 4xx: wait the cap
        nxt = next_attempt_at(now, failures, retry_after, initial=d.backoff_initial,
                              cap=d.backoff_max, max_retry_after=d.max_retry_after)
        inf.update(state="waiting", next_attempt_at=nxt)
        return nxt

    # ----------------------------------------------------------------- ledger
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
        """Raw alerts not final yet, counted from the state itself (waiting in
        groups, in receivers' outboxes, or in flight): the sum of
        :meth:`group_pending` over the open groups plus :meth:`queued_pending`.
        Walks every open alert; the worker counts groups incrementally
        (``alerting.runner.FunnelRunner.counters``)."""
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
        """A copy of every counter plus ``pending`` and ``balanced`` (True when
        received = delivered + deduplicated + silenced + inhibited + merged +
        rejected + pending); ``inhibited_by_rule`` counts inhibited raw alerts
        per rule (its index in ``inhibit_rules``, as a string). ``pending``:
        the caller's count of :meth:`pending` (kept incrementally from the
        same state); None counts it here."""
        c = copy.deepcopy(self.state["counters"])
        c.setdefault("inhibited", 0)
        c.setdefault("inhibited_by_rule", {})
        c["pending"] = self.pending() if pending is None else pending
        c["balanced"] = c["received"] == sum(c[k] for k in (
            "delivered", "deduplicated", "silenced", "inhibited", "merged", "rejected", "pending"))
        return c
