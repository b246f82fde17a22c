"""A receiver's outbox and message in flight (plain data, pure functions): due groups queue
sections; a message takes them up to the batch size when the bucket gives a token; sections that
waited are reported merged. At most one set of sections per group (:func:`unqueue`).
"""
from __future__ import annotations

import copy
from typing import Any

import orjson

from alerting.delivery import idempotency_key
from alerting.group import combine, join_traces
from alerting.model import Message


def unqueue(g: dict[str, Any], outbox: list[dict],
            queued: set[str] | None = None) -> dict[str, Any] | None:
    """Take group ``g``'s unsent sections out of ``outbox`` (raw ids back to the members) so it is
    rebuilt as one up-to-date set. ``queued``: a superset of the group ids with sections queued
    (no scan for others: a storm queues thousands).

    Returns ``{"at": insert index (the oldest position keeps its turn), "merged": whether they
    waited, "sections": those taken out}``, or None when part of a numbered set already left.
    """
    if queued is not None and g["id"] not in queued:  # nothing of it queued: no scan
        return {"at": len(outbox), "merged": False, "sections": []}
    mine = [s for s in outbox if s["group_id"] == g["id"]]
    for s in mine:
        if s["parts"] > 1 and sum(x.get("set") == s.get("set") for x in mine) < s["parts"]:
            return None
    at, merged, keep, taken = len(outbox), False, [], []
    for s in outbox:
        if s["group_id"] != g["id"] or not all(fp in g["members"] for fp, _q, _r in s["snapshot"]):
            keep.append(s)
            continue
        taken.append(s)
        at, merged = min(at, len(keep)), merged or s["merged"]
        for fp, _seq, raws in s["snapshot"]:
            g["members"][fp]["raw"] = raws + g["members"][fp]["raw"]
    outbox[:] = keep
    return {"at": min(at, len(keep)), "merged": merged, "sections": taken}


def wait(fresh: dict[int, dict]) -> None:
    """Queued sections found no token: flag them merged. ``fresh`` (``{id(section): section}``
    not flagged yet) is emptied, so a busy receiver's tick does not walk its outbox."""
    for s in fresh.values():
        s["merged"] = True
    fresh.clear()


def fill(rs: dict[str, Any], base: list[dict], limit: int,
         taken_out: list[dict] | None = None, one_group: bool = False) -> list[dict]:
    """Sections for the next message: ``base`` (a superseded message's) plus queued ones within
    ``limit`` alerts (the first always goes), those taken added to ``taken_out``; ``one_group``
    (``merge_groups: false``, as Alertmanager) stops at another group."""
    chosen: list[dict] = []
    fps: dict[str, set] = {}  # unsplit group -> fingerprints listed (combine's count)
    total = 0

    def grow(s: dict) -> int:
        if s["parts"] != 1:
            return len(s["alerts"])
        have = fps.get(s["group_id"], set())
        return len(have | {a["fingerprint"] for a in s["alerts"]}) - len(have)

    def take(s: dict) -> None:
        nonlocal total
        total += grow(s)
        chosen.append(s)
        if s["parts"] == 1:
            fps.setdefault(s["group_id"], set()).update(a["fingerprint"] for a in s["alerts"])

    for s in base:
        take(s)
    taken = 0
    queue = rs["outbox"]
    while taken < len(queue):  # one pass, one slice
        s = queue[taken]
        if chosen and (total + grow(s) > limit
                       or one_group and s["group_id"] != chosen[0]["group_id"]):
            break
        take(s)
        taken += 1
    if taken_out is not None:
        taken_out.extend(queue[:taken])
    del queue[:taken]
    return combine(chosen)


def new_inflight(name: str, seq: int, sections: list[dict], now: float, failures: int) -> dict:
    """A message in flight: id ``<receiver>-<seq>``, its idempotency key, sections, merge counts
    and retry state (plain data)."""
    mid = f"{name}-{seq}"
    merged = [s for s in sections if s["merged"]]
    return {"id": mid, "key": idempotency_key(name, mid, now), "created_at": now,
            "receiver": name, "sections": sections, "failures": failures,
            "merged_groups": len({s["group_id"] for s in merged}),
            "merged_alerts": sum(len(s["alerts"]) for s in merged),
            "state": "waiting", "sent_at": None, "next_attempt_at": now,
            "maybe_delivered": False}


def _copy(data: Any) -> Any:
    """A deep copy of plain JSON data (orjson round trip), else ``copy.deepcopy``."""
    try:
        return orjson.loads(orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS))
    except TypeError:
        return copy.deepcopy(data)


def to_message(inf: dict[str, Any]) -> Message:
    """The :class:`Message` the sender sees (internal keys stripped, copied)."""
    tp, links = join_traces(inf["sections"])
    sections = [{k: v for k, v in s.items() if k not in ("snapshot", "set", "tp", "links")}
                for s in inf["sections"]]
    return Message(traceparent=tp, links=links,
                   id=inf["id"], receiver=inf["receiver"], idempotency_key=inf["key"],
                   attempt=inf["failures"] + 1, created_at=inf["created_at"],
                   sections=_copy(sections), merged_groups=inf["merged_groups"],
                   merged_alerts=inf["merged_alerts"],
                   alert_count=sum(len(s["alerts"]) for s in sections))
