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
merged + rejected + pending`` where ``pending`` is counted from the state.

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
from typing import Any

from alerting import bucket as tb
from alerting import outbox as outbox_
from alerting.config import AlertingConfig
from alerting.dedupe import DEDUPED, decide
from alerting.delivery import is_retryable, next_attempt_at
from alerting.group import (apply_verdict, build_sections, commit_sections, due_at, group_key,
                            new_group, settle)
from alerting.model import Alert, AlertRejected, LedgerEntry, Message, Outcome, Severity
from alerting.intake import normalize
from alerting.routing import Decision
from alerting.routing import decide as decide_route
from alerting.silence import Silence, create_silence, silenced_by

STATE_VERSION = 1
_COUNTERS = ("received", "delivered", "merged", "deduplicated", "silenced", "rejected",
             "deescalations", "transient_suppressed", "messages_delivered", "messages_superseded",
             "attempts", "attempts_failed", "attempts_lost", "http_429", "http_5xx",
             "client_errors", "network_errors", "rate_limited_ticks")


def new_state() -> dict[str, Any]:
    """An empty funnel state."""
    return {"version": STATE_VERSION, "seq": {"raw": 0, "message": 0, "silence": 0},
            "episodes": {}, "groups": {}, "silences": {}, "silenced": {}, "receivers": {},
            "counters": dict.fromkeys(_COUNTERS, 0) | {"silenced_by": {}, "dedupe_reasons": {}},
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
        self._silences = [Silence.from_dict(s) for s in self.state["silences"].values()]
        self._norm = {"asset_labels": tuple(config.normalize.asset_labels),
                      "default_severity": Severity[config.normalize.default_severity.upper()]}
        for r in config.receivers:
            self.state["receivers"].setdefault(r.name, {"bucket": None, "outbox": [], "inflight": None})

    # ----------------------------------------------------------------- ingest
    def ingest(self, raw: Any, now: float, raw_id: str | None = None, *,
               decision: Decision | None = None) -> list[LedgerEntry]:
        """Take one raw alert (native dict, Alertmanager dict or :class:`Alert`)
        at ``now`` (seconds). ``raw_id`` names the raw alert in the ledger
        (default ``r<n>`` from the funnel's own sequence; the Kafka agents
        pass a globally unique id such as ``<event id>:<index>``).
        ``decision``: receiver and fingerprint the router already decided
        for this (normalized) alert (:mod:`alerting.routing`); None decides
        here.

        Returns:
            the ledger entries this call made final: one ``rejected``,
            ``deduplicated`` or ``silenced`` entry, or none when the alert
            passed and is pending in a group. Never raises for bad input.
        """
        st, c = self.state, self.state["counters"]
        st["seq"]["raw"] += 1
        rid = raw_id or f"r{st['seq']['raw']}"
        c["received"] += 1
        try:
            alert = normalize(raw, now, **self._norm)
        except AlertRejected as e:
            return [self._final(rid, Outcome.REJECTED, now, reason=str(e))]
        if decision is None:
            decision = decide_route(self.config, alert)
        fp = decision.fingerprint
        verdict, ep = decide(st["episodes"].get(fp), alert, now, self.config.dedupe.cooldown)
        if ep is not None:
            ep["fp"] = fp
            st["episodes"][fp] = ep
        sid = silenced_by(self._silences, alert.match_labels(), now) if self._silences else None
        if sid is not None:
            self._silenced_alert(fp, verdict, ep, sid, now)
            return [self._final(rid, Outcome.SILENCED, now, fp=fp, silence_id=sid)]
        if verdict in DEDUPED:
            if verdict == "deescalation":
                c["deescalations"] += 1
            return [self._final(rid, Outcome.DEDUPLICATED, now, fp=fp, reason=DEDUPED[verdict])]
        if ep.get("silenced_by"):
            ep["silenced_by"] = None
            st["silenced"].pop(fp, None)
        apply_verdict(self._group_for(ep, now, decision.receiver), verdict, ep, rid, now)
        return []

    def reject(self, reason: str, now: float, raw_id: str | None = None) -> LedgerEntry:
        """Count a raw alert that an earlier stage could not normalize
        (``reason`` names the field) as received and ``rejected`` at ``now``."""
        self.state["seq"]["raw"] += 1
        self.state["counters"]["received"] += 1
        return self._final(raw_id or f"r{self.state['seq']['raw']}", Outcome.REJECTED, now,
                           reason=reason)

    def _silenced_alert(self, fp: str, verdict: str, ep: dict | None, sid: str, now: float) -> None:
        st = self.state
        if ep is None:
            return
        if ep["status"] == "resolved":
            st["silenced"].pop(fp, None)
            if ep["group"] is None or ep["group"] not in st["groups"]:
                st["episodes"].pop(fp, None)  # began and ended unseen: nothing to tell
            elif verdict == "resolved":
                apply_verdict(st["groups"][ep["group"]], "resolved", ep, None, now)
            return
        ep["silenced_by"] = sid
        st["silenced"][fp] = sid

    def _group_for(self, ep: dict[str, Any], now: float,
                   receiver: str | None = None) -> dict[str, Any]:
        groups = self.state["groups"]
        if ep["group"] in groups:
            return groups[ep["group"]]
        alert = Alert.from_dict(ep["alert"])
        if receiver is None:
            receiver = self.config.route.receiver_for(alert.match_labels())
        gid, labels = group_key(receiver, alert, self.config.grouping.group_by)
        if gid not in groups:
            groups[gid] = new_group(gid, receiver, labels, now)
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

    def _release_silenced(self, now: float) -> None:
        """Episodes whose silence ended (and no other silence matches) join
        their group as new, so a problem that outlived its maintenance window
        is told on the group's schedule (case A10)."""
        st = self.state
        for fp, sid in list(st["silenced"].items()):
            ep = st["episodes"].get(fp)
            if ep is None or ep["status"] != "firing":
                st["silenced"].pop(fp, None)
                continue
            labels = Alert.from_dict(ep["alert"]).match_labels()
            still = silenced_by(self._silences, labels, now)
            if still is not None:
                st["silenced"][fp] = ep["silenced_by"] = still
                continue
            del st["silenced"][fp]
            ep["silenced_by"] = None
            apply_verdict(self._group_for(ep, now), "release", ep, None, now)

    # ------------------------------------------------------------------- tick
    def tick(self, now: float) -> list[Message]:
        """Advance to ``now`` (seconds): release ended silences, evaluate due
        groups into their receiver's outbox, and return the messages to send
        now (at most one per receiver: a new one when the token bucket allows,
        or a retry whose backoff has elapsed). Entries made final here
        (suppressed transients, alerts resolved under a silence) are returned
        by :meth:`drain_ledger`."""
        self._release_silenced(now)
        t = self.config.timing
        queued = {name: {s["group_id"] for s in rs["outbox"]}
                  for name, rs in self.state["receivers"].items()}
        for gid, g in list(self.state["groups"].items()):
            due = due_at(g, t.group_wait, t.group_interval, t.repeat_interval)
            if due is not None and due <= now + 1e-9:
                self._evaluate(g, now, queued.get(g["receiver"]))
        out = []
        for name in self.state["receivers"]:
            msg = self._dispatch(name, now)
            if msg is not None:
                out.append(msg)
        return out

    def _evaluate(self, g: dict[str, Any], now: float, queued: set[str] | None = None) -> None:
        st, c = self.state, self.state["counters"]
        rc = self.config.receiver(g["receiver"])
        muted = (lambda m: silenced_by(self._silences, Alert.from_dict(m["alert"]).match_labels(), now)) \
            if self._silences else (lambda m: None)
        outbox = st["receivers"][g["receiver"]]["outbox"]
        stale = outbox_.unqueue(g, outbox, queued)  # a queued, unsent section of this group is rebuilt
        if stale is None:
            return
        sections, effects = build_sections(g, self.config.grouping.batch_size,
                                           rc.format == "alertmanager",
                                           self.config.dedupe.suppress_transient, muted)
        commit_sections(g, sections, now)
        for s in sections:
            s.update(merged=stale["merged"], set=f"{g['id']}@{now}")
        for fp in effects["transient"]:
            m = g["members"].pop(fp)
            st["episodes"].pop(fp, None)
            c["transient_suppressed"] += 1
            for r in m["raw"]:
                st["ledger_out"].append(self._final(r, Outcome.DEDUPLICATED, now, fp=fp,
                                                    reason="transient").to_dict())
        for fp, sid in effects["muted"].items():
            m = g["members"][fp]
            if m["status"] == "resolved":
                del g["members"][fp]
                st["episodes"].pop(fp, None)
                for r in m["raw"]:
                    st["ledger_out"].append(self._final(r, Outcome.SILENCED, now, fp=fp,
                                                        silence_id=sid).to_dict())
            elif fp in st["episodes"]:
                st["silenced"][fp] = st["episodes"][fp]["silenced_by"] = sid
        if not g["members"]:
            del st["groups"][g["id"]]
        outbox[stale["at"]:stale["at"]] = sections
        if queued is not None and sections:
            queued.add(g["id"])

    def _dispatch(self, name: str, now: float) -> Message | None:
        rs, c = self.state["receivers"][name], self.state["counters"]
        rc = self.config.receiver(name)
        inf = rs["inflight"]
        if inf is not None:
            if inf["state"] == "sending":
                if now < inf["sent_at"] + 3 * self.config.delivery.timeout:
                    outbox_.wait(rs)
                    return None
                inf.update(state="waiting", next_attempt_at=now, maybe_delivered=True)
                inf["failures"] += 1
                c["attempts"] += 1
                c["attempts_lost"] += 1
            if now + 1e-9 < inf["next_attempt_at"]:
                outbox_.wait(rs)
                return None
            if not inf["maybe_delivered"] and rs["outbox"]:
                sections = outbox_.fill(rs, inf["sections"], self.config.grouping.batch_size)
                c["messages_superseded"] += 1
                inf = rs["inflight"] = self._inflight(name, sections, now, inf["failures"])
            inf.update(state="sending", sent_at=now)
            return outbox_.to_message(inf)
        if not rs["outbox"]:
            return None
        b = rs["bucket"] or tb.new_bucket(rc.bucket.burst, now)
        ok, rs["bucket"] = tb.take(b, now, rc.bucket.burst, rc.bucket.refill_interval)
        if not ok:
            c["rate_limited_ticks"] += 1
            outbox_.wait(rs)
            return None
        inf = rs["inflight"] = self._inflight(name, outbox_.fill(rs, [], self.config.grouping.batch_size), now, 0)
        inf.update(state="sending", sent_at=now)
        return outbox_.to_message(inf)

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
               reason: str = "") -> LedgerEntry:
        c = self.state["counters"]
        c[outcome.value] += 1
        if outcome is Outcome.SILENCED:
            c["silenced_by"][silence_id] = c["silenced_by"].get(silence_id, 0) + 1
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
        groups, in receivers' outboxes, or in flight)."""
        st = self.state
        n = sum(len(m["raw"]) for g in st["groups"].values() for m in g["members"].values())
        for rs in st["receivers"].values():
            sections = rs["outbox"] + (rs["inflight"]["sections"] if rs["inflight"] else [])
            n += sum(len(raws) for s in sections for _fp, _seq, raws in s["snapshot"])
        return n

    def counters(self) -> dict[str, Any]:
        """A copy of every counter plus ``pending`` and ``balanced`` (True when
        received = delivered + deduplicated + silenced + merged + rejected + pending)."""
        c = copy.deepcopy(self.state["counters"])
        c["pending"] = self.pending()
        c["balanced"] = c["received"] == sum(c[k] for k in (
            "delivered", "deduplicated", "silenced", "merged", "rejected", "pending"))
        return c
