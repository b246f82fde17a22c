"""Fingerprints and the dedupe verdict: one episode per fingerprint.

Identity (docs/alerting.md, "Identity"): an Alertmanager-form alert (``Alert.source ==
"alertmanager"``) is its whole label set, as Alertmanager: :func:`labelset_fingerprint`; a native
alert is the values of ``dedupe.fingerprint_labels`` (default ``[rule, asset]``), its other labels
being description. Cooldown, escalation, episodes, inhibition and groups all key on it.

An *episode* is one fingerprint's life from its first firing alert to the delivered resolve::

    {"fp", "status": "firing"|"resolved", "severity": int (highest paged),
     "seen_severity": int, "started_at", "last_seen", "last_pass_at",
     "resolved_at", "notified": bool, "group": group id or None,
     "silenced_by": silence id or None, "alert": Alert.to_state()}

plus ``expires_at``, ``route`` and inhibition marks (funnel) and ``seen_saved``/``exp_saved``
(runner; docs/alerting.md, "On Kafka", repeats).

Verdicts (Alertmanager has no cooldown; it re-sends on ``repeat_interval`` only): ``new`` (no open
episode); same severity within ``cooldown`` s of the last pass ``duplicate``, after it ``refresh``
(passes, not news); higher ``escalated`` (passes at once), lower ``deescalation`` (never paged);
``resolved``; a further resolve, or one without episode, ``resolve_repeat``; firing again before
the resolve is delivered ``refire``. The delivered resolve deletes the episode.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

import fnv_c
import orjson

from alerting.model import Alert, Status

#: Verdicts that send the alert on to silencing/grouping.
PASSING = frozenset({"new", "escalated", "resolved", "refire", "refresh"})
#: Verdicts that end the raw alert as ``deduplicated`` (value = ledger reason).
DEDUPED = {"duplicate": "repeat", "deescalation": "deescalation",
           "resolve_repeat": "resolve_repeat"}


def labelset_fingerprint(labels: dict[str, str]) -> str:
    """Alertmanager's fingerprint of a label set, 16 lower-case hex digits (prometheus/common
    ``model/signature.go`` ``labelSetToFingerprint``): FNV-1a 64 over names sorted by UTF-8 bytes,
    each name and value followed by 0xff; the empty set is the offset basis. Python's code-point
    order equals Go's byte order on UTF-8. The hash is ``fnv_c``'s C loop: a byte loop in Python
    cost ~20 us per label set, the largest share of the API's CPU per alert after the JSON parse
    (docs/perf-notes.md, "Fingerprints in C").
    """
    parts = [part for name in sorted(labels) for part in (name, labels[name])]
    if "".join(parts).isascii():  # ASCII is its own UTF-8; Latin-1 writes U+00FF as byte 0xff
        data = ("\xff".join(parts) + "\xff").encode("latin-1") if parts else b""
    else:
        data = b"".join(part.encode("utf-8", "surrogatepass") + b"\xff" for part in parts)
    return f"{fnv_c.fnv1a_64(data):016x}"


def fingerprint(alert: Alert, label_names: tuple[str, ...] | list[str] = ("rule", "asset")) -> str:
    """The alert's identity as 16 hex digits: Alertmanager-form alerts hash their whole label set
    (:func:`labelset_fingerprint`), native ones the values of ``label_names`` (absent: ``""``)."""
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
    """Resolved ``episode`` after another resolve, merged as Alertmanager's store (provider/mem
    ``Put``, ``types.Alert.Merge``): overlapping, the earliest start and latest end, else the newer
    replaces; the newest labels and annotations win. None for a plain repeat."""
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
    """Start of an alert firing again after its resolve: its own, or the old one when it began
    inside the resolved one (``types.Alert.Merge`` keeps the earliest of overlapping alerts)."""
    start = alert.starts_at if alert.starts_at is not None else _received(alert, now)
    old_start, old_end = episode["started_at"], episode.get("resolved_at")
    if old_end is not None and old_start < start < old_end:
        return old_start
    return start


def decide(episode: dict[str, Any] | None, alert: Alert, now: float,
           cooldown: float) -> tuple[str, dict[str, Any] | None]:
    """``(verdict, episode after)`` for ``alert`` arriving at ``now`` (s) given its ``episode``
    (None: none); the input is not modified, and ``episode`` is None only for a
    ``resolve_repeat`` without one. Times merge as ``types.Alert.Merge`` (earliest ``startsAt``;
    :func:`_merged_resolve`, :func:`_refire_start`)."""
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
    """Start of a firing ``alert`` without ``startsAt``: an Alertmanager-form one's receipt (at
    most ``now``, as Alertmanager's API sets it), a native one ``now``."""
    t = alert.time
    if alert.source == "alertmanager" and isinstance(t, (int, float)) and t <= now:
        return t
    return now


def _earliest(episode: dict[str, Any], alert: Alert) -> float:
    """The episode's start after ``alert``: the earliest ``startsAt`` (``types.Alert.Merge``)."""
    start = alert.starts_at
    return episode["started_at"] if start is None else min(episode["started_at"], start)
