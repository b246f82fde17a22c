"""Grouping: which alerts share a message, when a group is due, what it says.

Alertmanager's three timers (dispatch/dispatch.go, notify/notify.go): a new group first flushes
``group_wait`` after its opening alert (at once if that alert is older), then every
``group_interval`` (:func:`flush_at_or_after`); a flush sends when the group has news since its
last evaluation; an unchanged firing group repeats at the first flush strictly past
``repeat_interval`` after its last delivered message (DedupStage). A group over the batch size
is split into parts ``1/n``..``n/n``; nothing is truncated.

Group state (plain JSON data)::

    {"id", "receiver", "labels", "opened_at", "last_sent_at", "news_at", "notified_at",
     "first": first flush when not opened_at + group_wait, "restarted_at": the reload that
     last restarted its timer (:func:`restart_timer`), "tp", "n": members ever added,
     "members": {fp: {"fp", "alert", "status", "severity", "escalated_from", "started_at",
                      "resolved_at", "news", "news_seq", "sent_seq", "notified",
                      "sent" (a message listing it firing left), "raw": [raw ids], "tp",
                      "o": its place in the group (no list grows with the group)}}}

Traces (docs/alerting.md, "Traces"): the group's ``tp`` is the traceparent of the decision whose
news opens its next message (a member's ``tp``: its own latest); sections carry it and up to
``plait.tracing.MAX_LINKS`` ``links``, cleared from the group when taken.
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
    """The group labels of ``alert`` under ``group_by`` (``""`` for a missing name; ``['...']``:
    all its labels); ``labels``: ``alert.match_labels()`` if the caller has it."""
    if labels is None:
        labels = alert.match_labels()
    if group_by and group_by[0] == GROUP_BY_ALL:
        return dict(alert.labels) if alert.source == "alertmanager" else labels
    return {n: labels.get(n, "") for n in group_by}


def group_key(receiver: str, alert: Alert, group_by: list[str]) -> tuple[str, dict[str, str]]:
    """(group id = 16 hex digits, group labels) for ``alert`` at ``receiver``. Missing names are
    ``""``, so a "silence this group" link (``team=""``) matches what the group does;
    Alertmanager's payloads leave them out (:func:`alerting.delivery.am_group_labels`)."""
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
    """Update ``group`` in place for a passing verdict (``new``, ``refire``, ``escalated``,
    ``resolved``, ``refresh``, ``release``) of ``episode``; ``raw_id`` waits on the member until
    delivered; ``traceparent`` becomes the member's (and group's first) ``tp`` on news."""
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
    """First timer flush (seconds): ``first`` when set (:func:`note_insert`), else ``opened_at +
    group_wait`` (Alertmanager's ``newAggrGroup``)."""
    first = group.get("first")
    return group["opened_at"] + group_wait if first is None else first


def flush_at_or_after(group: dict[str, Any], group_wait: float, group_interval: float,
                      t: float) -> float:
    """The group timer's first flush at or after ``t`` (seconds): ``first + k * group_interval``,
    sending or not (Alertmanager's ``aggrGroup.run``, dispatch/dispatch.go)."""
    first = first_flush(group, group_wait)
    if t <= first + 1e-9:
        return first
    return first + math.ceil((t - first) / group_interval - 1e-9) * group_interval


def note_insert(group: dict[str, Any], started_at: float, group_wait: float,
                now: float) -> None:
    """An alert started at ``started_at`` joined at ``now``: before the first flush since the timer
    started (or restarted, :func:`restart_timer`), one active for ``group_wait`` flushes the group
    at once (Alertmanager 0.25 ``aggrGroup.insert``, ``!hasFlushed``)."""
    last, restarted = group["last_sent_at"], group.get("restarted_at")
    unflushed = last is None or (restarted is not None and last < restarted)
    if unflushed and started_at + group_wait < now and first_flush(group, group_wait) > now:
        group["first"] = now


def restart_timer(group: dict[str, Any], at: float, group_wait: float) -> bool:
    """Restart the group's timer at ``at`` (seconds), as Alertmanager's reload does: it stops the
    dispatcher and builds a new one, whose new aggregation group first flushes ``group_wait``
    later, at once when one of its alerts started over ``group_wait`` before ``at``
    (dispatch/dispatch.go ``newAggrGroup``, ``insert``), then every ``group_interval``. News and
    notifications stay, as Alertmanager's notification log does: an unchanged group sends nothing
    at that flush. A group opened at or after ``at`` is new already: False, left as it is."""
    if group["opened_at"] >= at:
        return False
    old = any(m["started_at"] + group_wait < at for m in group["members"].values())
    group["first"] = at if old else at + group_wait
    group["restarted_at"] = at
    return True


def due_at(group: dict[str, Any], group_wait: float, group_interval: float,
           repeat_interval: float) -> float | None:
    """When the group's next message is due (seconds), or None. On a timer flush
    (:func:`flush_at_or_after`) with news since the last evaluation (DedupStage ``needsUpdate``,
    notify/notify.go), or strictly past ``repeat_interval`` since the last delivery (so a reminder
    comes one ``group_interval`` late when intervals divide, as in Alertmanager)."""
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
        # from the last message built or delivered
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
    """True while no message listing ``m`` firing has left: its resolve is a transient
    (docs/alerting.md, step 2)."""
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
    """What the group says now, as sections of at most ``batch_size`` alerts; pure (apply with
    :func:`commit_sections`).

    Lists members with news, plus unchanged firing ones when ``include_context`` (Alertmanager
    format) or for a reminder. ``muted(member)`` gives ``(key, by)`` or None; muted members are
    left out. Without ``send_resolved`` a resolve is not news (DedupStage ``needsUpdate``): it is
    left out and reported ``quiet``.

    Returns ``(sections, effects)``: a section is ``{"group_id", "group_labels", "receiver",
    "part", "parts", "merged", "reminder", "counts", "alerts", "snapshot"}`` (``snapshot``:
    ``[fp, news_seq or None, raw ids]``); effects ``{"muted": {fp: (key, by)}, "transient": [fp],
    "quiet": [fp]}``. In the Alertmanager format (``include_context``) a group with nothing firing
    that never listed anything firing says nothing: its resolves are ``transient``, as
    Alertmanager's DedupStage has it.
    """
    muted_now: dict[str, str] = {}
    transient: list[str] = []
    quiet: list[str] = []
    changes, context = [], []
    still_firing = 0
    members = list(group["members"].values())
    for m in members:
        sid = muted(m)
        if sid is not None:
            muted_now[m["fp"]] = sid
        elif m["status"] == "firing":
            still_firing += 1
    # Alertmanager's DedupStage (notify/dedup_stage.go needsUpdate): with nothing firing, a group
    # that never told anything firing tells nothing; its resolves are of alerts never seen
    untold = include_context and not still_firing and all(never_sent(m) for m in members)
    for m in members:
        if m["fp"] in muted_now:
            continue
        if m["news"] is not None:
            if (suppress_transient or untold) and m["status"] == "resolved" and never_sent(m):
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
    """Give ``section`` its ``tp`` and ``links``, keys absent when empty."""
    section.pop("tp", None)
    section.pop("links", None)
    if tp:
        section["tp"] = tp
    if links:
        section["links"] = links


def join_traces(sections: list[dict[str, Any]]) -> tuple[str | None, list[str]]:
    """One trace for ``sections``: the first ``tp`` the parent, every other trace a link (at most
    ``plait.tracing.MAX_LINKS``)."""
    cands: list[str | None] = [s.get("tp") for s in sections[:1]]
    for i, s in enumerate(sections):
        cands += ([s.get("tp")] if i else []) + list(s.get("links") or ())
    return parent_and_links(cands)


def commit_sections(group: dict[str, Any], sections: list[dict], now: float) -> None:
    """Mark the group evaluated at ``now``: listed news is sent, raw ids go to the snapshots."""
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
    """Settle the group after ``snapshot``'s message, sent at ``sent_at`` (seconds), was delivered:
    news cleared, firing members notified, resolved ones removed and returned (their episodes end).
    repeat_interval restarts at ``sent_at`` (Alertmanager: last successful notification)."""
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
    """Fold sections of one unsplit group into one (later state wins, an earlier ``new`` stays);
    for a superseded message or merged queued sections."""
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
