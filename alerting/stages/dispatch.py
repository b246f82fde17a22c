"""Dispatch stage: per receiver one message in flight. While it is retried, due groups fill the
outbox; after only definite failures (refused, an HTTP answer) a due retry is superseded by one
message (new idempotency key) with its content plus the outbox, so a receiver that was down gets no
backlog. After a timeout (the receiver may have acted) the same message and key are retried.

With one group per message (``merge_groups: false``, as Alertmanager), a message the receiver
refuses with a status no retry mends (a 4xx but 408, 425, 429:
:func:`alerting.delivery.is_retryable`) ends at once: its alerts go back to their group, which
tells them again at its next flush, and the receiver takes its next message. Alertmanager flushes
each aggregation group on its own and a failed flush is tried again at the group's next one
(``notify/notify.go``, ``dispatch/dispatch.go``), so a group whose payload a receiver refuses
delays no other group. A numbered part of a split group keeps the receiver's backoff."""
from __future__ import annotations

from typing import Any

from alerting import outbox as outbox_
from alerting.delivery import is_retryable, next_attempt_at
from alerting.group import settle
from alerting.model import LedgerEntry, Message, Outcome
from alerting.stages.base import StageBase


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

    def _returnable(self, inf: dict[str, Any]) -> bool:
        """True when every section of ``inf`` can go back to its group: unsplit (a numbered part
        keeps its set in the outbox) and every member listed still there."""
        groups = self.state["groups"]
        return all(s["parts"] == 1 and s["group_id"] in groups
                   and all(fp in groups[s["group_id"]]["members"] for fp, _q, _r in s["snapshot"])
                   for s in inf["sections"])

    def _refused(self, rs: dict[str, Any], now: float) -> float | None:
        """Receiver ``rs``'s message in flight was refused at ``now`` (:meth:`_returnable`): it
        ends, each section's raw ids go back to its group's members with the group's news
        pending, so its next flush tells them again. Returns ``now`` when the outbox holds a next
        message, else None."""
        inf, rs["inflight"] = rs["inflight"], None
        for s in inf["sections"]:
            g = self.state["groups"][s["group_id"]]
            for fp, _seq, raws in s["snapshot"]:
                g["members"][fp]["raw"] = raws + g["members"][fp]["raw"]
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
        return outbox_.new_inflight(name, self.state["seq"]["message"], sections, now, failures)

    def _find(self, message_id: str) -> tuple[dict, dict] | tuple[None, None]:
        for rs in self.state["receivers"].values():
            inf = rs["inflight"]
            if inf is not None and inf["id"] == message_id:
                return rs, inf
        return None, None

    def delivered(self, message_id: str, now: float) -> list[LedgerEntry]:
        """``message_id`` got a 2xx: its raws' entries; [] for an unknown id (acks may repeat)."""
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
        """An attempt of ``message_id`` failed at ``now``. ``status`` is the HTTP status (None:
        connect error / timeout), ``retry_after`` seconds; ``maybe_delivered`` (a timeout after
        sending) means never superseded, only retried with the same key. Returns the next attempt's
        epoch seconds (capped backoff, Retry-After honoured), None for an unknown id."""
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
        if (status is not None and not is_retryable(status) and not inf["maybe_delivered"]
                and not self.config.grouping.merge_groups and self._returnable(inf)):
            return self._refused(_rs, now)
        failures = inf["failures"] if is_retryable(status) else 10**6  # 4xx: wait the cap
        nxt = next_attempt_at(now, failures, retry_after, initial=d.backoff_initial,
                              cap=d.backoff_max, max_retry_after=d.max_retry_after)
        inf.update(state="waiting", next_attempt_at=nxt)
        return nxt
