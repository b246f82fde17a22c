"""Every alert's story per fingerprint, written by the alerting worker (which decides each fact):
``received`` (a routed copy of an ``alerts.raw`` alert: raw id, ``source``, ``generatorURL``),
``outcome`` (its final ledger outcome, once the batch's state is durable), ``message`` (listed in
webhook message M) and ``attempt`` (one HTTP attempt of M: status or error, seconds).

Storage (:func:`plait.keys.alert_history`): a Redis list per fingerprint, newest last, trimmed to
``alert_history_max_entries`` and expiring ``alert_history_retention_seconds`` after its last
write. Entries are the public JSON (camelCase, RFC 3339 ``time``) of
``GET /alerts/{fingerprint}/history``.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

import orjson

from alerting.intake import format_time
from alerting.model import Message
from plait import keys as K

#: ``alerts.ledger`` entry key -> history entry key (values copied when not empty).
_OUTCOME_FIELDS = {"raw_id": "rawId", "reason": "reason", "message_id": "messageId",
                   "silence_id": "silenceId", "inhibited_by": "inhibitedBy"}


def outcome_entry(ledger: dict[str, Any]) -> dict[str, Any]:
    """The ``outcome`` entry of a ledger entry dict: ``{"kind", "time", "outcome", "rawId",
    "reason"?, "messageId"?, "silenceId"?, "inhibitedBy"?}``."""
    out: dict[str, Any] = {"kind": "outcome", "time": format_time(ledger["time"]),
                           "outcome": ledger["outcome"]}
    for name, public in _OUTCOME_FIELDS.items():
        if ledger.get(name):
            out[public] = ledger[name]
    return out


def received_entries(cmd: dict[str, Any], source: str) -> list[tuple[str, dict[str, Any]]]:
    """``[(fingerprint, {"kind": "received", "time", "rawId", "source", "receiver", "status",
    "generatorURL"?})]`` of a routed ``alert`` command from ``source``; [] without a fingerprint."""
    alert, fp = cmd.get("alert"), cmd.get("fp")
    if not isinstance(alert, dict) or not fp:
        return []
    entry = {"kind": "received", "time": format_time(cmd["received_at"]), "rawId": cmd["id"],
             "source": source, "receiver": cmd.get("receiver"), "status": alert.get("status")}
    if alert.get("generator_url"):
        entry["generatorURL"] = alert["generator_url"]
    return [(fp, entry)]


def message_entries(message: Message) -> list[tuple[str, dict[str, Any]]]:
    """``(fingerprint, {"kind": "message", "time", "messageId", "receiver", "attempt", "part",
    "parts", "status"})`` for every alert listed in ``message``."""
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
    """``(fingerprint, {"kind": "attempt", "time", "messageId", "receiver", "attempt", "ok",
    "httpStatus" (None: no answer), "error"?, "elapsedSeconds"})`` per alert of ``message``."""
    entry: dict[str, Any] = {"kind": "attempt", "time": format_time(now), "messageId": message.id,
                             "receiver": message.receiver, "attempt": message.attempt,
                             "ok": ok, "httpStatus": status, "elapsedSeconds": round(elapsed, 3)}
    if error:
        entry["error"] = error[:200]
    fps = dict.fromkeys(a["fingerprint"] for a in message.alerts())
    return [(fp, entry) for fp in fps]


def batch_entries(ledger: Iterable[dict[str, Any]],
                  messages: Iterable[Message]) -> list[tuple[str, dict[str, Any]]]:
    """``(fingerprint, entry)`` of a batch's ``ledger`` and ``messages`` in decision order;
    rejected raws have no fingerprint and no story."""
    out = [(e["fingerprint"], outcome_entry(e)) for e in ledger if e.get("fingerprint")]
    for m in messages:
        out += message_entries(m)
    return out


def redis_writes(prefix: str, entries: list[tuple[str, dict[str, Any]]]
                 ) -> dict[str, list[bytes]]:
    """Redis key -> JSON values to append, in order."""
    out: dict[str, list[bytes]] = {}
    for fp, entry in entries:
        # a ``continue`` route's copy (``<fp>~<route id>``) joins its alert's story
        out.setdefault(K.alert_history(prefix, fp.split("~", 1)[0]), []).append(_json(entry))
    return out


def _json(entry: dict[str, Any]) -> bytes:
    """Compact JSON of one entry (orjson; the stdlib for what it refuses, e.g. a lone surrogate)."""
    try:
        return orjson.dumps(entry)
    except TypeError:
        return json.dumps(entry, separators=(",", ":")).encode()


#: Appends to many lists in one call: ``KEYS`` the lists; ``ARGV`` cap, TTL s, then per key its
#: value count and values. Per key RPUSH (1,000 values a call, Lua's stack), LTRIM, EXPIRE.
_APPEND = """
local cap, ttl, i = tonumber(ARGV[1]), tonumber(ARGV[2]), 3
for k = 1, #KEYS do
  local n = tonumber(ARGV[i])
  i = i + 1
  for j = i, i + n - 1, 1000 do
    redis.call('RPUSH', KEYS[k], unpack(ARGV, j, math.min(j + 999, i + n - 1)))
  end
  i = i + n
  redis.call('LTRIM', KEYS[k], -cap, -1)
  redis.call('EXPIRE', KEYS[k], ttl)
end
return #KEYS
"""
#: Most lists one script call appends to (a call blocks Redis while it runs: a few ms).
KEYS_PER_CALL = 2000


async def write(redis, writes: dict[str, list[bytes]], retention: float, cap: int) -> None:
    """Append ``writes`` (RPUSH, LTRIM to ``cap``, EXPIRE ``retention`` s per list) with one
    script call per :data:`KEYS_PER_CALL` lists: the three commands run inside Redis, not packed
    and parsed per list by the worker. Redis errors propagate (the caller logs them)."""
    items = list(writes.items())
    for start in range(0, len(items), KEYS_PER_CALL):
        chunk = items[start:start + KEYS_PER_CALL]
        args: list[Any] = [cap, max(1, int(retention))]
        for _key, values in chunk:
            kept = values[-cap:]
            args.append(len(kept))
            args += kept
        await redis.eval(_APPEND, len(chunk), *[key for key, _v in chunk], *args)


async def read(redis, prefix: str, fp: str) -> list[dict[str, Any]]:
    """The stored story of fingerprint ``fp``, oldest entry first ([] when none is kept)."""
    return [json.loads(v) for v in await redis.lrange(K.alert_history(prefix, fp), 0, -1)]
