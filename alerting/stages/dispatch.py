"""Dispatch stage: one message in flight per lane. A receiver whose messages may hold several
groups (``merge_groups: true``) is one lane; one whose messages each tell one group has
:data:`LANES`, a group always in the same one, so that many groups are told at once. While a
message is retried, due groups fill its lane's outbox; after only definite failures (refused,
an HTTP answer) a due retry is superseded by one message (new idempotency key) with its content
plus the outbox, so a receiver that was down gets no backlog. After a timeout (the receiver
may have acted) the same message and key are retried.

With one group per message (``merge_groups: false``, as Alertmanager), a message the receiver
refuses with a status no retry mends (a 4xx but 408, 425, 429:
:func:`alerting.delivery.is_retryable`) ends at once: its alerts go back to their group, which
tells them again at its next flush, and the receiver takes its next message. Alertmanager flushes
each aggregation group on its own and a failed flush is tried again at the group's next one
(``notify/notify.go``, ``dispatch/dispatch.go``), so a group whose payload a receiver refuses
delays no other group (nor, with :data:`LANES`, does a group being told)."""
from __future__ import annotations

import zlib
from typing import Any

from alerting import outbox as outbox_
from alerting.delivery import is_retryable, next_attempt_at
from alerting.group import settle
from alerting.model import LedgerEntry, Message, Outcome
from alerting.stages.base import StageBase


#: Lanes of a receiver whose messages each tell one group (``merge_groups: false``) and whose
#: bucket does not limit it (a burst of :data:`LANE_BURST` or more: an alertmanager.yml
#: receiver without ``plait.bucket``): a group always goes through the same lane, each lane has
#: one message in flight, so up to this many groups are told at once, as Alertmanager flushes
#: each aggregation group on its own. A receiver whose tokens are scarce keeps one lane, where
#: critical first orders all its groups and none waits behind another lane's turn for a token.
LANES = 16
LANE_BURST = 1000


def base_name(lane: str) -> str:
    """The receiver a lane belongs to (``oncall#3`` -> ``oncall``; a receiver is its lane 0)."""
    return lane.partition("#")[0]


def _critical_first(outbox: list[dict[str, Any]]) -> None:
    """Stable-sort ``outbox`` in place: sections of groups holding a critical alert first."""
    hot = {s["group_id"] for s in outbox
           if any(a["severity"] == "critical" for a in s["alerts"])}
    if hot and len(hot) < len({s["group_id"] for s in outbox}):
        outbox.sort(key=lambda s: s["group_id"] not in hot)


class Dispatch(StageBase):
    """Outboxes and messages in flight of the funnel's receivers."""

    def start(self) -> None:
        for r in self.config.receivers:
            self.state["receivers"].setdefault(r.name, {"bucket": None, "outbox": [], "inflight": None})
        #: receiver -> {group id: sections queued}, receiver -> {id(section): unmerged section}:
        #: derived from the outboxes so a tick does not walk them
        self._queued: dict[str, dict[str, int]] = {}
        self._fresh: dict[str, dict[int, dict]] = {}
        for name, rs in self.state["receivers"].items():
            self._enqueued(name, rs["outbox"])

    def _lane(self, g: dict[str, Any]) -> str:
        """The lane of group ``g``'s receiver it is told through, its state made on first use:
        the lane its sections wait or fly in (a reload may have changed the lanes: its messages
        keep their order), else its own (:data:`LANES`; the receiver itself when not laned)."""
        name, gid, receivers = g["receiver"], g["id"], self.state["receivers"]
        k = zlib.crc32(gid.encode()) % LANES if self._laned(name) else 0
        lane = name if k == 0 else f"{name}#{k}"
        if gid not in self._queued.get(lane, ()):
            for other in [name] + [f"{name}#{i}" for i in range(1, LANES)]:
                rs = receivers.get(other)
                if other != lane and rs is not None and (
                        gid in self._queued.get(other, ()) or rs["inflight"] is not None and any(
                            s["group_id"] == gid for s in rs["inflight"]["sections"])):
                    return other
        receivers.setdefault(lane, {"bucket": None, "outbox": [], "inflight": None})
        return lane

    def _laned(self, name: str) -> bool:
        """Whether receiver ``name`` has :data:`LANES` lanes."""
        return (not self.config.grouping.merge_groups
                and self.config.receiver(name).bucket.burst >= LANE_BURST)

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

    def _dispatch(self, name: str, now: float) -> Message | None:
        rs, c = self.state["receivers"][name], self.state["counters"]
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
        if not self._take_token(name, rs, now):
            outbox_.wait(self._fresh.setdefault(name, {}))
            return None
        inf = rs["inflight"] = self._inflight(name, self._fill(name, rs, []), now, 0)
        inf.update(state="sending", sent_at=now)
        self._sent(inf)
        return outbox_.to_message(inf)

    def _refusable(self, name: str, inf: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The sections of ``inf``'s groups queued in lane ``name`` when every section of
        ``inf`` and those can go back to its group (every member it lists still there), else
        None."""
        groups, gids = self.state["groups"], {s["group_id"] for s in inf["sections"]}
        queued = [x for x in self.state["receivers"][name]["outbox"] if x["group_id"] in gids]
        ok = all(s["group_id"] in groups
                 and all(fp in groups[s["group_id"]]["members"] for fp, _q, _r in s["snapshot"])
                 for s in inf["sections"] + queued)
        return queued if ok else None

    def _refused(self, name: str, rs: dict[str, Any], queued: list[dict[str, Any]],
                 now: float) -> float | None:
        """Lane ``name``'s message in flight was refused at ``now``: it ends, and its groups'
        sections (its own, and ``queued``, from :meth:`_refusable`: the other parts of a split
        group, later news) go back to the groups' members, each group marked ``refused_at`` so
        its next flush tells it again, a reminder included. Returns ``now`` when the outbox
        holds a next message, else None."""
        inf, rs["inflight"] = rs["inflight"], None
        groups, gids = self.state["groups"], {s["group_id"] for s in inf["sections"]}
        if queued:
            rs["outbox"][:] = [x for x in rs["outbox"] if x["group_id"] not in gids]
            self._dequeued(name, queued)
        for s in inf["sections"] + queued:
            members = groups[s["group_id"]]["members"]
            for fp, _seq, raws in s["snapshot"]:
                members[fp]["raw"] = raws + members[fp]["raw"]
        for gid in gids:
            g = groups[gid]
            g["refused_at"] = now
            if g["news_at"] is None:
                g["news_at"] = now
        return now if rs["outbox"] else None

    def _sent(self, inf: dict[str, Any]) -> None:
        """``inf`` leaves: its firing members' later resolve is news (docs/alerting.md, step 2)."""
        groups = self.state["groups"]
        for s in inf["sections"]:
            g = groups.get(s["group_id"])
            if g is None:
                continue
            for a in s["alerts"]:
                m = g["members"].get(a["fingerprint"])
                if m is not None and a["status"] == "firing" and not m.get("sent"):
                    self._touch(g, (a["fingerprint"],))
                    m["sent"] = True

    def _inflight(self, name: str, sections: list[dict], now: float, failures: int) -> dict:
        self.state["seq"]["message"] += 1
        return outbox_.new_inflight(base_name(name), self.state["seq"]["message"], sections, now,
                                    failures)

    def _find(self, message_id: str) -> tuple[str, dict, dict] | tuple[None, None, None]:
        """``(lane, its state, its message in flight)`` of ``message_id``, or Nones."""
        for name, rs in self.state["receivers"].items():
            inf = rs["inflight"]
            if inf is not None and inf["id"] == message_id:
                return name, rs, inf
        return None, None, None

    def delivered(self, message_id: str, now: float) -> list[LedgerEntry]:
        """``message_id`` got a 2xx: its raws' entries; [] for an unknown id (acks may repeat)."""
        _name, rs, inf = self._find(message_id)
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
        """An attempt of ``message_id`` failed at ``now``. ``status`` is the HTTP status (None:
        connect error / timeout), ``retry_after`` seconds; ``maybe_delivered`` (a timeout after
        sending) means never superseded, only retried with the same key. Returns the next attempt's
        epoch seconds (capped backoff, Retry-After honoured), None for an unknown id."""
        name, rs, inf = self._find(message_id)
        if inf is None:
            return None
        rs["last"] = {"outcome": "failed", "at": now, "status": status}  # console
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
        if (status is not None and not is_retryable(status) and not maybe_delivered
                and not self.config.grouping.merge_groups):
            queued = self._refusable(name, inf)
            if queued is not None:
                return self._refused(name, rs, queued, now)
        failures = inf["failures"] if is_retryable(status) else 10**6  # 4xx: wait the cap
        nxt = next_attempt_at(now, failures, retry_after, initial=d.backoff_initial,
                              cap=d.backoff_max, max_retry_after=d.max_retry_after)
        inf.update(state="waiting", next_attempt_at=nxt)
        return nxt
