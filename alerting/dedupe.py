"""Fingerprints and the dedupe verdict: one episode per fingerprint.

Identity (which raw alerts are "the same alert"; docs/alerting.md,
"Identity: which alerts are the same alert"):

- an alert that arrived in Alertmanager / Prometheus form (``POST
  /api/v2/alerts``, or a raw alert carrying ``labels`` and no ``rule``;
  ``Alert.source == "alertmanager"``) is identified by its whole label set,
  exactly as Alertmanager identifies it: :func:`labelset_fingerprint`
  (``model.LabelSet.Fingerprint()`` of prometheus/common). Two alerts that
  differ in any label (``pod="api-1"`` / ``pod="api-2"``) are two alerts;
  ``dedupe.fingerprint_labels`` does not apply to them;
- a native Plait alert (``rule``, ``asset``...) is identified by the values
  of ``dedupe.fingerprint_labels`` (default ``[rule, asset]``): its labels
  are description, a changing label does not make a new alert.

Dedupe cooldown, escalation, episodes, inhibition and grouping members all
key on that fingerprint.

An *episode* is the life of one fingerprint from its first firing alert to
the delivered resolve. Its state is a plain dict (JSON data)::

    {"fp", "status": "firing"|"resolved", "severity": int (highest paged),
     "seen_severity": int, "started_at", "last_seen", "last_pass_at",
     "resolved_at", "notified": bool, "group": group id or None,
     "silenced_by": silence id or None, "alert": Alert.to_state()}

The funnel adds ``expires_at`` (when a firing episode resolves unless re-sent),
``route`` and inhibition marks; the runner adds ``seen_saved`` / ``exp_saved``
(the ``last_seen`` / ``expires_at`` last marked for writing: docs/alerting.md,
"On Kafka", repeats).

Rules (the issue, step 3; Alertmanager has no cooldown, it re-sends on
``repeat_interval`` only):

- a firing alert with no open episode opens one (``new``);
- same severity inside ``cooldown`` seconds of the last alert that passed:
  ``duplicate`` (suppressed, counted); after the cooldown: ``refresh``
  (passes, updates labels/annotations, is not news);
- higher severity: ``escalated``, passes at once whatever the cooldown;
- lower severity: ``deescalation``, counted and never paged;
- resolved while firing: ``resolved``; another resolve before the episode
  ends, or a resolve with no episode: ``resolve_repeat`` (deduplicated);
- firing again while the resolve is still undelivered: ``refire``;
- the episode ends (is deleted) when its resolve is delivered, so the next
  firing alert opens a new episode.
"""
from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

import orjson

from alerting.model import Alert, Status

#: Verdicts that send the alert on to silencing/grouping.
PASSING = frozenset({"new", "escalated", "resolved", "refire", "refresh"})
#: Verdicts that end the raw alert as ``deduplicated`` (value = ledger reason).
DEDUPED = {"duplicate": "repeat", "deescalation": "deescalation",
           "resolve_repeat": "resolve_repeat"}


_FNV_OFFSET = 14695981039346656037
_FNV_PRIME = 1099511628211
_MASK = (1 << 64) - 1


def labelset_fingerprint(labels: dict[str, str]) -> str:
    """Alertmanager's fingerprint of a label set, as 16 lower-case hex digits.

    Rule (prometheus/common ``model/signature.go`` ``labelSetToFingerprint``
    and ``model/fnv.go``): FNV-1a 64 over the label names in sorted byte
    order, each name and value followed by the separator byte 0xff, both as
    UTF-8; the empty set hashes to the FNV offset basis
    (``cbf29ce484222325``); printed with ``%016x``. Python's code-point
    order equals Go's byte order on UTF-8, so the sort agrees.
    """
    data = b"".join(part.encode("utf-8", "surrogatepass") + b"\xff"
                    for name in sorted(labels) for part in (name, labels[name]))
    return _fnv1a64_cached(data) if len(data) <= _CACHED_BYTES else _fnv1a64(data)


#: Label sets up to this many bytes (names, values, separators) are cached:
#: typical ones are 50-300 bytes, and the cache stays under ~10 MB whatever
#: is sent (intake allows label sets of ~1 MB).
_CACHED_BYTES = 512


def _fnv1a64(data: bytes) -> str:
    """FNV-1a 64 of ``data`` as 16 hex digits (~0.1 us a byte in Python)."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return f"{h:016x}"


#: :func:`_fnv1a64` of the last 16,384 short label sets: the same ones come
#: back (Prometheus resends every firing alert; an alert's view is rebuilt as
#: its episode changes), ~4 us each to hash again, ~1 us to find.
_fnv1a64_cached = functools.lru_cache(maxsize=16384)(_fnv1a64)


def fingerprint(alert: Alert, label_names: tuple[str, ...] | list[str] = ("rule", "asset")) -> str:
    """The alert's identity as 16 hex digits (see the module doc).

    Alertmanager-form alerts (``alert.source == "alertmanager"``): the
    Alertmanager fingerprint of their whole label set as sent
    (:func:`labelset_fingerprint`), whatever ``label_names`` says. Native
    alerts: a hash of the values of ``label_names`` (vocabulary names or
    source labels; absent labels count as ``""``)."""
    if alert.source == "alertmanager":
        return labelset_fingerprint(alert.labels)
    labels = alert.match_labels()
    key = [[n, labels.get(n, "")] for n in sorted(set(label_names))]
    try:  # orjson writes json.dumps's bytes (ensure_ascii=False) for any text
        canonical = orjson.dumps(key) if all(type(v) is str for _n, v in key) else None
    except TypeError:  # a lone surrogate
        canonical = None
    if canonical is None:
        canonical = json.dumps(key, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(canonical).hexdigest()[:16]


def _merged_resolve(episode: dict[str, Any], alert: Alert, now: float) -> dict[str, Any] | None:
    """The resolved ``episode`` after another resolve of it, merged as
    Alertmanager's store does (provider/mem ``Put`` and ``types.Alert.Merge``
    in types/types.go): when the two overlap in time, the earliest start and
    the latest end; otherwise the newer alert replaces the older. The
    newest alert's labels and annotations win either way. None when nothing
    changes (a plain repeat)."""
    old_start, old_end = episode["started_at"], episode["resolved_at"]
    # a resolve without its own end (a native alert) does not move the end
    start, end = alert.starts_at, alert.ends_at if alert.ends_at is not None else old_end
    if start is None or (old_start < end < old_end) or (old_start < start < old_end):
        start, end = min(old_start, start if start is not None else old_start), max(old_end, end)
    old = episode["alert"]
    if (start, end, alert.annotations or {}, alert.generator_url or "") == (
            old_start, old_end, old.get("annotations") or {}, old.get("generator_url") or ""):
        return None
    return dict(episode, started_at=start, resolved_at=end, last_seen=now, last_pass_at=now,
                alert=alert.to_state())


def _refire_start(episode: dict[str, Any], alert: Alert, now: float) -> float:
    """The start of an alert firing again after its resolve: its own start
    (a new alert, Alertmanager's store replaces an alert it does not
    overlap), or the old start when it began inside the resolved one
    (``types.Alert.Merge`` keeps the earliest start of overlapping alerts)."""
    start = alert.starts_at if alert.starts_at is not None else _received(alert, now)
    old_start, old_end = episode["started_at"], episode.get("resolved_at")
    if old_end is not None and old_start < start < old_end:
        return old_start
    return start


def decide(episode: dict[str, Any] | None, alert: Alert, now: float,
           cooldown: float) -> tuple[str, dict[str, Any] | None]:
    """The dedupe verdict for ``alert`` arriving at ``now`` (seconds) given its
    fingerprint's ``episode`` (None when there is none), and the episode state
    afterwards (a new dict; the input is not modified). See the module doc.

    Times merge as in Alertmanager's store (``types.Alert.Merge``): a firing
    or resolved alert of an open episode keeps the earliest ``startsAt``
    seen; a resolve of a resolved episode keeps the latest end and the
    newest labels and annotations (:func:`_merged_resolve`; it passes as
    ``resolved`` again, the group tells the new end); an alert firing
    again after its resolve starts anew (:func:`_refire_start`).

    Returns:
        (verdict, episode): ``episode`` is None only for a ``resolve_repeat``
        without an episode.
    """
    sev = int(alert.severity)
    if alert.status is Status.RESOLVED:
        if episode is None:
            return "resolve_repeat", None
        if episode["status"] == "resolved":
            merged = _merged_resolve(episode, alert, now)
            if merged is None:
                return "resolve_repeat", dict(episode, last_seen=now)
            return "resolved", merged
        ep = dict(episode, status="resolved", last_seen=now, last_pass_at=now,
                  started_at=_earliest(episode, alert),
                  resolved_at=alert.ends_at if alert.ends_at is not None else now,
                  alert=alert.to_state())
        return "resolved", ep
    if episode is None:
        start = alert.starts_at if alert.starts_at is not None else _received(alert, now)
        return "new", {
            "fp": "", "status": "firing", "severity": sev, "seen_severity": sev,
            "started_at": start, "last_seen": now, "last_pass_at": now, "resolved_at": None,
            "notified": False, "group": None, "silenced_by": None, "alert": alert.to_state(),
        }
    if episode["status"] == "resolved":
        return "refire", dict(episode, status="firing", resolved_at=None, last_seen=now,
                              started_at=_refire_start(episode, alert, now),
                              last_pass_at=now, severity=max(sev, episode["severity"]),
                              seen_severity=sev, alert=alert.to_state())
    start = _earliest(episode, alert)
    if sev > episode["severity"]:
        return "escalated", dict(episode, severity=sev, seen_severity=sev, last_seen=now,
                                 last_pass_at=now, alert=alert.to_state(), started_at=start,
                                 escalated_from=episode["severity"])
    if sev < episode["severity"]:
        return "deescalation", dict(episode, seen_severity=sev, last_seen=now)
    if now - episode["last_pass_at"] < cooldown:
        return "duplicate", dict(episode, last_seen=now)
    return "refresh", dict(episode, last_seen=now, last_pass_at=now, alert=alert.to_state(),
                           started_at=start)


def _received(alert: Alert, now: float) -> float:
    """When a firing ``alert`` without ``startsAt`` starts: an
    Alertmanager-form one when it was received (its ``time``, the API's or
    producer's receipt, at most ``now``), as Alertmanager's API sets
    ``startsAt`` on receipt; a native one ``now``."""
    t = alert.time
    if alert.source == "alertmanager" and isinstance(t, (int, float)) and t <= now:
        return t
    return now


def _earliest(episode: dict[str, Any], alert: Alert) -> float:
    """The episode's start after ``alert`` of it arrived: the earliest
    ``startsAt`` (``types.Alert.Merge``: "Always pick the earliest starting
    time"; another Prometheus server may send an earlier one later)."""
    start = alert.starts_at
    return episode["started_at"] if start is None else min(episode["started_at"], start)
