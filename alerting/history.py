"""Every alert's story: what happened to each copy of an alert, per fingerprint.

The alerting worker decides every fact told here, so it is the one writer:

- ``received``: a copy of the alert read from ``alerts.raw`` and routed (its
  raw id, the sender: the event's ``source`` such as ``plait-api-v2`` for
  ``POST /api/v2/alerts``, and ``generatorURL``), written by the router;
- ``outcome``: a raw alert's final ledger outcome (:class:`alerting.model.LedgerEntry`:
  ``delivered`` / ``merged`` into message M, ``deduplicated`` with the reason,
  ``silenced`` by silence S, ``inhibited`` by source alerts, ``rejected``), from
  the batch's effects, written after the batch's state is durable (the point
  where ``alerts.ledger`` records are sent, whether or not the configuration
  keeps that topic: ``config.ledger``);
- ``message``: the alert was listed in webhook message M (receiver, attempt,
  split part ``part`` of ``parts``, the alert's status in it);
- ``attempt``: one HTTP attempt of such a message (receiver, HTTP status or the
  error, seconds taken), written when the answer came.

Storage (:func:`plait.keys.alert_history`): one Redis list per fingerprint,
newest entry last, trimmed to ``alert_history_max_entries`` entries and expiring
``alert_history_retention_seconds`` after its last write; memory is bounded by
(fingerprints seen within the retention) x (entries kept). Entries are the
public JSON (camelCase keys, RFC 3339 ``time``) that ``GET
/alerts/{fingerprint}/history`` returns as they are.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

from alerting.intake import format_time
from alerting.model import Message
from plait import keys as K

#: ``alerts.ledger`` entry key -> history entry key (values copied when not empty).
_OUTCOME_FIELDS = {"raw_id": "rawId", "reason": "reason", "message_id": "messageId",
                   "silence_id": "silenceId", "inhibited_by": "inhibitedBy"}


def outcome_entry(ledger: dict[str, Any]) -> dict[str, Any]:
    """The history entry of one ledger entry (``LedgerEntry.to_dict()`` shape):
    ``{"kind": "outcome", "time", "outcome", "rawId", "reason"?, "messageId"?,
    "silenceId"?, "inhibitedBy"?}`` (empty values left out)."""
    out: dict[str, Any] = {"kind": "outcome", "time": format_time(ledger["time"]),
                           "outcome": ledger["outcome"]}
    for name, public in _OUTCOME_FIELDS.items():
        if ledger.get(name):
            out[public] = ledger[name]
    return out


def received_entries(cmd: dict[str, Any], source: str) -> list[tuple[str, dict[str, Any]]]:
    """The ``received`` entry of one routed copy (an ``alerts.funnel``
    ``alert`` command, :func:`alerting.wire.route_alerts`) of an ``alerts.raw``
    event from ``source``: ``[(fingerprint, {"kind": "received", "time",
    "rawId", "source", "receiver", "status", "generatorURL"?})]``; [] for a
    copy without a fingerprint (one the funnel will reject)."""
    alert, fp = cmd.get("alert"), cmd.get("fp")
    if not isinstance(alert, dict) or not fp:
        return []
    entry = {"kind": "received", "time": format_time(cmd["received_at"]), "rawId": cmd["id"],
             "source": source, "receiver": cmd.get("receiver"), "status": alert.get("status")}
    if alert.get("generator_url"):
        entry["generatorURL"] = alert["generator_url"]
    return [(fp, entry)]


def message_entries(message: Message) -> list[tuple[str, dict[str, Any]]]:
    """``(fingerprint, entry)`` for every alert listed in ``message``: entry =
    ``{"kind": "message", "time", "messageId", "receiver", "attempt", "part",
    "parts", "status"}`` (``part`` of ``parts``: the split part of its group)."""
    out = []
    for section in message.sections:
        for alert in section["alerts"]:
            out.append((alert["fingerprint"], {
                "kind": "message", "time": format_time(message.created_at),
                "messageId": message.id, "receiver": message.receiver,
                "attempt": message.attempt, "part": section.get("part", 1),
                "parts": section.get("parts", 1), "status": alert.get("status")}))
    return out


def attempt_entries(message: Message, ok: bool, status: int | None, error: str,
                    elapsed: float, now: float) -> list[tuple[str, dict[str, Any]]]:
    """``(fingerprint, entry)`` for each distinct alert of ``message`` after one
    HTTP attempt ended at epoch second ``now``: entry = ``{"kind": "attempt",
    "time", "messageId", "receiver", "attempt", "ok", "httpStatus" (None when
    no answer came), "error"?, "elapsedSeconds"}``."""
    entry: dict[str, Any] = {"kind": "attempt", "time": format_time(now), "messageId": message.id,
                             "receiver": message.receiver, "attempt": message.attempt,
                             "ok": ok, "httpStatus": status, "elapsedSeconds": round(elapsed, 3)}
    if error:
        entry["error"] = error[:200]
    fps = dict.fromkeys(a["fingerprint"] for a in message.alerts())
    return [(fp, entry) for fp in fps]


def batch_entries(ledger: Iterable[dict[str, Any]],
                  messages: Iterable[Message]) -> list[tuple[str, dict[str, Any]]]:
    """The history of one batch's effects (``alerting.runner.Effects``'s
    ``ledger`` and ``messages``): ``(fingerprint, entry)`` pairs in the order
    the facts were decided. Rejected raw alerts have no fingerprint and no
    story (they are answered 422 at the API, or kept in ``export.dlq``)."""
    out = [(e["fingerprint"], outcome_entry(e)) for e in ledger if e.get("fingerprint")]
    for m in messages:
        out += message_entries(m)
    return out


def redis_writes(prefix: str, entries: list[tuple[str, dict[str, Any]]]
                 ) -> dict[str, list[bytes]]:
    """Group ``entries`` by Redis key (:func:`plait.keys.alert_history`):
    key -> the JSON values to append, in order."""
    out: dict[str, list[bytes]] = {}
    for fp, entry in entries:
        # a ``continue`` route's copy (``<fp>~<route id>``) joins its alert's story
        out.setdefault(K.alert_history(prefix, fp.split("~", 1)[0]), []).append(
            json.dumps(entry, separators=(",", ":")).encode())
    return out


async def write(redis, writes: dict[str, list[bytes]], retention: float, cap: int) -> None:
    """Append ``writes`` (from :func:`redis_writes`) in one pipeline: per key
    RPUSH, LTRIM to the newest ``cap`` entries, EXPIRE ``retention`` seconds.
    Redis errors propagate (the caller logs them: the story is a view)."""
    if not writes:
        return
    pipe = redis.pipeline(transaction=False)
    for key, values in writes.items():
        pipe.rpush(key, *values[-cap:])
        pipe.ltrim(key, -cap, -1)
        pipe.expire(key, max(1, int(retention)))
    await pipe.execute()


async def read(redis, prefix: str, fp: str) -> list[dict[str, Any]]:
    """The stored story of fingerprint ``fp``, oldest entry first ([] when
    none is kept)."""
    return [json.loads(v) for v in await redis.lrange(K.alert_history(prefix, fp), 0, -1)]
