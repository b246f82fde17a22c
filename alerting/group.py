"""Grouping: which alerts share a message, when a group is due, what it says.

Timing follows Alertmanager's three timers (docs, "route"), with the fixes
the issue asks for:

- ``group_wait``: a new group's timer first fires ``group_wait`` seconds
  after the alert that opened it (at once when that alert has been active
  that long already), then every ``group_interval`` (:func:`flush_at_or_after`);
- a flush sends when the group has news (new, escalated, resolved members)
  since its last evaluation, so news is held at most ``group_interval``;
- ``repeat_interval``: an unchanged group with firing members is repeated at
  the first flush strictly more than ``repeat_interval`` after its last
  message was sent (and delivered), as Alertmanager's DedupStage has it.

A group larger than the batch size is split into numbered parts ``1/n``..
``n/n`` sharing the group id; nothing is ever truncated.

Group state (plain JSON data)::

    {"id", "receiver", "labels", "opened_at", "last_sent_at", "news_at", "notified_at",
     "first": the timer's first flush when not opened_at + group_wait (absent
              in state from before it existed: that is the default),
     "tp", "n": members ever added,
     "members": {fp: {"fp", "alert", "status", "severity", "escalated_from",
                      "started_at", "resolved_at", "news", "news_seq",
                      "sent_seq", "notified", "sent" (present once a message
                      listing it firing left: it may have been seen), "raw": [raw ids], "tp",
                      "o": its place in the group (1..n, so the store can
                           restore the order without a list growing
                           with the group)}}}

Traces (docs/alerting.md, "Traces"): ``tp`` (present only with tracing) is
the W3C traceparent of the funnel decision of the alert whose news opened the
group's next message: one string per group, not a list; a member's ``tp`` is
its own latest decision with news. Sections built from the group carry the
group's ``tp`` (the parent of the message's delivery spans) and ``links``
(at most ``plait.tracing.MAX_LINKS`` members' traceparents of other traces);
both are cleared from the group when its sections are taken.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Callable

import orjson

from alerting.config import GROUP_BY_ALL
from alerting.model import Alert, Severity
from plait.tracing import parent_and_links

#: Group key of the count of its firing, notified members (:func:`notified_firing`).
NOTIFIED_FIRING = "notified_firing"
_CHANGE_ORDER = {"resolved": 0, "escalated": 1, "new": 2, None: 3}


def group_labels(alert: Alert, group_by: list[str] | tuple[str, ...],
                 labels: dict[str, str] | None = None) -> dict[str, str]:
    """The group labels of ``alert`` under ``group_by``: each name's value,
    ``""`` for one the alert lacks; for ``['...']`` (Alertmanager's group by
    all labels) every label the alert has: an Alertmanager alert's own
    labels, a native alert's with ``rule``, ``asset`` and ``severity``.
    ``labels``: ``alert.match_labels()`` when the caller has it."""
    if labels is None:
        labels = alert.match_labels()
    if group_by and group_by[0] == GROUP_BY_ALL:
        return dict(alert.labels) if alert.source == "alertmanager" else labels
    return {n: labels.get(n, "") for n in group_by}


def group_key(receiver: str, alert: Alert, group_by: list[str]) -> tuple[str, dict[str, str]]:
    """(group id = 16 hex digits, group labels) for ``alert`` at ``receiver``.

    The group labels (:func:`group_labels`) hold every ``group_by`` name,
    one the alert lacks as ``""``: what the id hashes, and what a "silence
    this group" link needs (``team=""`` matches only alerts without
    ``team``, as the group does). Alertmanager's payloads leave such labels
    out (:func:`alerting.delivery.am_group_labels`)."""
    keyed = group_labels(alert, group_by)
    doc = [receiver, sorted(keyed.items())]
    try:  # orjson writes json.dumps's bytes for ASCII text but DEL (checked on the output)
        if type(receiver) is not str or not all(type(v) is str for v in keyed.values()):
            raise TypeError
        canonical = orjson.dumps(doc)
        if not canonical.isascii() or b"\x7f" in canonical:
            raise TypeError
    except TypeError:  # non-ASCII (json.dumps escapes it), a lone surrogate: the stdlib
        canonical = json.dumps(doc, separators=(",", ":")).encode()
    return hashlib.sha256(canonical).hexdigest()[:16], keyed


def new_group(gid: str, receiver: str, labels: dict[str, str], now: float) -> dict[str, Any]:
    """An empty group opened at ``now`` (seconds)."""
    return {"id": gid, "receiver": receiver, "labels": labels, "opened_at": now,
            "last_sent_at": None, "news_at": None, "notified_at": None, NOTIFIED_FIRING: 0,
            "members": {}}


def _set_news(group: dict[str, Any], member: dict[str, Any], news: str | None, now: float) -> None:
    member["news"] = news
    member["news_seq"] += 1
    if news is not None and group["news_at"] is None:
        group["news_at"] = now


def apply_verdict(group: dict[str, Any], verdict: str, episode: dict[str, Any],
                  raw_id: str | None, now: float, traceparent: str | None = None) -> None:
    """Update ``group`` in place for a passing dedupe verdict (``new``,
    ``refire``, ``escalated``, ``resolved``, ``refresh``, or ``release`` when a
    silence ends) of ``episode``; ``raw_id`` (if any) waits on the member
    until a message carrying it is delivered. ``traceparent``: the span of
    the decision (W3C); when the member has news it becomes the member's
    ``tp``, and the group's ``tp`` unless the group already has one."""
    fp = episode["fp"]
    m = group["members"].get(fp)
    if m is None:
        m = {"fp": fp, "alert": episode["alert"], "status": "firing",
             "severity": episode["severity"], "escalated_from": None,
             "started_at": episode["started_at"], "resolved_at": None, "news": None,
             "news_seq": 0, "sent_seq": 0, "notified": False, "raw": []}
        group["n"] = m["o"] = group.get("n", 0) + 1  # member order, kept by each member
        group["members"][fp] = m
        _set_news(group, m, "new", now)
        if verdict == "resolved":  # opened and resolved before it was ever grouped
            m.update(status="resolved", resolved_at=episode["resolved_at"])
            _set_news(group, m, "resolved", now)
    elif verdict in ("new", "release", "refire"):
        count_member(group, m, -1)
        m.update(status="firing", resolved_at=None, alert=episode["alert"],
                 severity=episode["severity"], started_at=episode["started_at"])
        _set_news(group, m, None if m["notified"] else "new", now)
        count_member(group, m, 1)
    elif verdict == "escalated":
        before = m["severity"]
        m.update(severity=episode["severity"], alert=episode["alert"],
                 started_at=episode["started_at"])
        if m["notified"]:
            m["escalated_from"] = before
            _set_news(group, m, "escalated", now)
        else:
            _set_news(group, m, "new", now)
    elif verdict == "resolved":
        count_member(group, m, -1)
        m.update(status="resolved", resolved_at=episode["resolved_at"], alert=episode["alert"],
                 started_at=episode["started_at"])
        _set_news(group, m, "resolved", now)
    elif verdict == "refresh":
        m.update(alert=episode["alert"], started_at=episode["started_at"])
    if raw_id is not None:
        m["raw"].append(raw_id)
    if traceparent and m["news"] is not None:
        m["tp"] = traceparent
        if not group.get("tp"):
            group["tp"] = traceparent


def first_flush(group: dict[str, Any], group_wait: float) -> float:
    """When the group's aggregation timer first fires (seconds): ``first``
    when set (a group whose first alert had been active ``group_wait``
    already flushes at once, :func:`note_insert`), else ``opened_at +
    group_wait`` (Alertmanager's ``newAggrGroup``: ``next = group_wait``)."""
    first = group.get("first")
    return group["opened_at"] + group_wait if first is None else first


def flush_at_or_after(group: dict[str, Any], group_wait: float, group_interval: float,
                      t: float) -> float:
    """The first flush of the group's timer at or after ``t`` (seconds).

    Alertmanager's ``aggrGroup.run`` (dispatch/dispatch.go) flushes at
    :func:`first_flush`, then every ``group_interval`` (the timer is reset to
    ``group_interval`` as each flush starts), whether or not it sends: the
    flush times are ``first + k * group_interval``."""
    first = first_flush(group, group_wait)
    if t <= first + 1e-9:
        return first
    return first + math.ceil((t - first) / group_interval - 1e-9) * group_interval


def note_insert(group: dict[str, Any], started_at: float, group_wait: float,
                now: float) -> None:
    """An alert that started at ``started_at`` joined the group at ``now``:
    before the group's first flush, an alert active for ``group_wait``
    already makes the group flush at once (Alertmanager 0.25's
    ``aggrGroup.insert``: ``if !hasFlushed && StartsAt + GroupWait < now:
    next.Reset(0)``; later versions check the alert that creates the group)."""
    if group["last_sent_at"] is None and started_at + group_wait < now \
            and first_flush(group, group_wait) > now:
        group["first"] = now


def due_at(group: dict[str, Any], group_wait: float, group_interval: float,
           repeat_interval: float) -> float | None:
    """When the group's next message is due (seconds), or None (nothing to say).

    Alertmanager's timing: the group is looked at on its timer's flushes
    (:func:`flush_at_or_after`); a flush sends when the group has news
    since it was last evaluated (the set of alerts changed: DedupStage
    ``needsUpdate`` in notify/notify.go), or when ``repeat_interval`` has
    passed since the last delivered notification (``entry.Timestamp.Before(
    now - repeat)``: strictly after, so with ``repeat_interval`` a multiple
    of ``group_interval`` the reminder comes one ``group_interval`` later, as
    in Alertmanager). A reminder is therefore never sent between flushes."""
    last = group["last_sent_at"]
    news_at = group["news_at"]
    if last is None:
        return (flush_at_or_after(group, group_wait, group_interval, news_at)
                if news_at is not None else None)
    due = None
    if news_at is not None:  # the first flush after the last evaluation that sees the news
        due = flush_at_or_after(group, group_wait, group_interval, max(news_at, last + 1e-6))
    notified_at = group.get("notified_at")
    if notified_at is not None and notified_firing(group):
        # from the last message built (one may be in flight) or delivered
        after = max(last, notified_at) + repeat_interval + 1e-6
        repeat = flush_at_or_after(group, group_wait, group_interval, after)
        due = repeat if due is None else min(due, repeat)
    return due


def notified_firing(group: dict[str, Any]) -> int:
    """How many members are firing and notified (a reminder is due for them).
    Kept in the group under ``NOTIFIED_FIRING`` by :func:`count_member` at
    each change, so :func:`due_at` costs O(1), not O(members); counted here
    when absent (a group stored without it)."""
    n = group.get(NOTIFIED_FIRING)
    if n is None:
        n = group[NOTIFIED_FIRING] = sum(m["status"] == "firing" and m["notified"]
                                         for m in group["members"].values())
    return n


def count_member(group: dict[str, Any], m: dict[str, Any], sign: int) -> None:
    """Add (``sign`` 1) or remove (-1) member ``m`` from the group's
    :func:`notified_firing` count, when it is firing and notified."""
    if m["status"] == "firing" and m["notified"] and NOTIFIED_FIRING in group:
        group[NOTIFIED_FIRING] += sign


def never_sent(m: dict[str, Any]) -> bool:
    """True while no message listing member ``m`` firing has left (acknowledged
    or not): the receiver cannot have seen it, so a resolve of it is a
    transient (docs/alerting.md, step 2)."""
    return not m["notified"] and not m.get("sent")


def view(m: dict[str, Any]) -> dict[str, Any]:
    """The alert as a message lists it (plain data; times in epoch seconds)."""
    a = m["alert"]
    resolved = m["status"] == "resolved"
    return {
        "fingerprint": m["fp"], "rule": a["rule"], "asset": a["asset"],
        "severity": Severity(m["severity"]).label, "status": m["status"], "change": m["news"],
        "escalated_from": Severity(m["escalated_from"]).label
        if m["news"] == "escalated" and m["escalated_from"] is not None else None,
        "labels": a.get("labels") or {}, "annotations": a.get("annotations") or {},
        "starts_at": m["started_at"], "ends_at": m["resolved_at"] if resolved else None,
        "duration": (m["resolved_at"] - m["started_at"]) if resolved else None,
        "transient": resolved and never_sent(m),
        "generator_url": a.get("generator_url", ""), "source": a.get("source", "native"),
    }


def build_sections(group: dict[str, Any], batch_size: int, include_context: bool,
                   suppress_transient: bool,
                   muted: Callable[[dict[str, Any]], str | None],
                   send_resolved: bool = True) -> tuple[list[dict], dict]:
    """What the group says now, as sections of at most ``batch_size`` alerts.

    Lists members with news (resolved, escalated, new); lists unchanged firing
    members too when ``include_context`` (Alertmanager format: the whole
    group) or when there is no news (a reminder). ``muted(member)`` gives
    what hides the member (opaque to this function: the funnel passes
    ``("silenced_by", silence id)`` or ``("inhibited_by", (rule, [source
    fps]))``), or None; a hidden member is left out. With ``send_resolved``
    False (the receiver's), a resolve is not news: Alertmanager's DedupStage
    (``needsUpdate``, notify/notify.go) sends such a receiver nothing when
    only resolves changed, so the resolved member is left out and reported
    ``quiet``. Pure: the group is not modified; :func:`commit_sections`
    applies the returned effects.

    Returns:
        (sections, effects). A section is ``{"group_id", "group_labels",
        "receiver", "part", "parts", "merged", "reminder", "counts", "alerts",
        "snapshot"}``; ``snapshot`` lists ``[fp, news_seq or None, raw ids]``
        that delivery settles. ``effects`` = ``{"muted": {fp: what muted() gave},
        "transient": [fp]}``.
    """
    muted_now: dict[str, str] = {}
    transient: list[str] = []
    quiet: list[str] = []
    changes, context = [], []
    still_firing = 0
    for m in group["members"].values():
        sid = muted(m)
        if sid is not None:
            muted_now[m["fp"]] = sid
            continue
        if m["status"] == "firing":
            still_firing += 1
        if m["news"] is not None:
            if suppress_transient and m["status"] == "resolved" and never_sent(m):
                transient.append(m["fp"])
            elif not send_resolved and m["status"] == "resolved":
                quiet.append(m["fp"])
            else:
                changes.append(m)
        elif m["status"] == "firing":
            context.append(m)
    reminder = not changes
    listed = changes + (context if include_context or reminder else [])
    listed.sort(key=lambda m: (_CHANGE_ORDER[m["news"]], m["started_at"], m["fp"]))
    effects = {"muted": muted_now, "transient": transient, "quiet": quiet}
    if not listed:
        return [], effects
    counts = {"new": sum(m["news"] == "new" for m in changes),
              "escalated": sum(m["news"] == "escalated" for m in changes),
              "resolved": sum(m["news"] == "resolved" for m in changes),
              "still_firing": still_firing}
    chunks = [listed[i:i + batch_size] for i in range(0, len(listed), batch_size)]
    listed_fps = {m["fp"] for m in listed}
    sections = []
    for i, chunk in enumerate(chunks):
        snap = [[m["fp"], m["news_seq"] if m["news"] is not None else None, list(m["raw"])]
                for m in chunk]
        tp, links = parent_and_links([group.get("tp")] + [m.get("tp") for m in chunk
                                                           if m["news"] is not None])
        if i == len(chunks) - 1:  # raw alerts of unlisted, unmuted members ride on the last part
            snap += [[m["fp"], None, list(m["raw"])] for m in group["members"].values()
                     if m["fp"] not in listed_fps and m["fp"] not in muted_now
                     and m["fp"] not in transient and m["fp"] not in quiet and m["raw"]]
        sections.append({
            "group_id": group["id"], "group_labels": dict(group["labels"]),
            "receiver": group["receiver"], "part": i + 1, "parts": len(chunks),
            "merged": False, "reminder": reminder, "counts": counts,
            "alerts": [view(m) for m in chunk], "snapshot": snap,
        })
        set_trace(sections[-1], tp, links)
    return sections, effects


def set_trace(section: dict[str, Any], tp: str | None, links: list[str]) -> None:
    """Give ``section`` its trace: ``tp`` (parent of the delivery spans) and
    ``links``; keys absent when empty (no tracing: state as before)."""
    section.pop("tp", None)
    section.pop("links", None)
    if tp:
        section["tp"] = tp
    if links:
        section["links"] = links


def join_traces(sections: list[dict[str, Any]]) -> tuple[str | None, list[str]]:
    """One trace for what ``sections`` carry: the first section's ``tp`` is
    the parent, every other trace (other sections' ``tp`` and every
    section's ``links``) a link, at most ``plait.tracing.MAX_LINKS``."""
    cands: list[str | None] = [s.get("tp") for s in sections[:1]]
    for i, s in enumerate(sections):
        cands += ([s.get("tp")] if i else []) + list(s.get("links") or ())
    return parent_and_links(cands)


def commit_sections(group: dict[str, Any], sections: list[dict], now: float) -> None:
    """Mark the group evaluated at ``now``: listed news counts as sent (it is
    in flight), raw ids move from members into the sections' snapshots."""
    group["last_sent_at"] = now
    group["news_at"] = None
    group.pop("tp", None)  # the sections carry it: later news opens the next message's trace
    for s in sections:
        for fp, seq, raws in s["snapshot"]:
            m = group["members"].get(fp)
            if m is None:
                continue
            if seq is not None:
                m["sent_seq"] = seq
            taken = set(raws)
            m["raw"] = [r for r in m["raw"] if r not in taken]
    for m in group["members"].values():  # muted news is not pending either
        m["sent_seq"] = m["news_seq"]
        m.pop("tp", None)


def settle(group: dict[str, Any], snapshot: list, sent_at: float) -> list[dict[str, Any]]:
    """After the message carrying ``snapshot`` was delivered by the attempt
    sent at ``sent_at`` (seconds): clear the news it carried, mark firing
    members notified, drop resolved members; the repeat_interval clock
    restarts at ``sent_at`` (Alertmanager: since the last successful
    notification), so a receiver back from an outage is not reminded at once.

    Returns:
        the members removed (their episodes end; leftover ``raw`` ids are
        settled by the caller with the message).
    """
    removed = []
    group["notified_at"] = max(sent_at, group.get("notified_at") or sent_at)
    for fp, seq, _raws in snapshot:
        m = group["members"].get(fp)
        if m is None or seq is None or m["news_seq"] != seq:
            if m is not None and seq is None and m["status"] == "firing":
                _notify(group, m)
            continue
        m["news"] = None
        if m["status"] == "resolved":
            removed.append(group["members"].pop(fp))
        else:
            _notify(group, m)
    return removed


def _notify(group: dict[str, Any], m: dict[str, Any]) -> None:
    count_member(group, m, -1)
    m["notified"] = True
    count_member(group, m, 1)


def combine(sections: list[dict]) -> list[dict]:
    """Fold sections of the same unsplit group into one (later state wins per
    alert, an earlier ``new`` stays ``new``); split parts stay as they are.
    Used when a failed message is superseded or queued sections are merged."""
    out: list[dict] = []
    index: dict[str, int] = {}
    for s in sections:
        if s["parts"] != 1 or s["group_id"] not in index:
            if s["parts"] == 1:
                index[s["group_id"]] = len(out)
            out.append(dict(s, alerts=list(s["alerts"]), snapshot=list(s["snapshot"])))
            continue
        acc = out[index[s["group_id"]]]
        views = {a["fingerprint"]: a for a in acc["alerts"]}
        for a in s["alerts"]:
            old = views.get(a["fingerprint"])
            if old is not None and old["change"] == "new" and a["change"] in (None, "escalated"):
                a = dict(a, change="new", escalated_from=None)
            views[a["fingerprint"]] = a
        alerts = sorted(views.values(), key=lambda a: (_CHANGE_ORDER[a["change"]], a["starts_at"],
                                                       a["fingerprint"]))
        counts = dict(s["counts"], **{k: sum(a["change"] == k for a in alerts)
                                      for k in ("new", "escalated", "resolved")})
        out[index[s["group_id"]]] = folded = dict(
            acc, alerts=alerts, counts=counts, snapshot=acc["snapshot"] + s["snapshot"],
            merged=acc["merged"] or s["merged"], reminder=acc["reminder"] and s["reminder"])
        set_trace(folded, *join_traces([acc, s]))
    return out
