"""Silences: one Redis hash (``plait.keys.alert_silences``, id -> ``Silence.to_dict`` plus
``updated_at``) the API reads, and ``silence``/``expire`` commands to every ``alerts.funnel``
partition. Update rules are Alertmanager's (silence/silence.go ``Set``, ``Expire``): same matchers
and not expired keeps the id (and an active one its start), else the old one expires and a new id
is made; a past start becomes now; a past end is refused; expiring an expired one is a no-op.
"""
from __future__ import annotations

import json
import math
import uuid
from typing import Any, Awaitable, Callable

from alerting.matchers import Matcher
from alerting.silence import (Silence, SilenceRefused, alertmanager_refuses, create_silence,
                              end_now, is_broad)
from alerting.wire import command
from plait.errors import NotFound, Unavailable
from plait.records import MAX_RECORD_BYTES

#: Kafka key of the silence commands sent to ``alerts.funnel``.
SILENCE_KEY = b"silence"
#: Internal field -> the name both HTTP APIs give it (size errors name it).
_API_NAMES = {"author": "createdBy", "time_intervals": "timeIntervals"}


def silence_state(d: dict[str, Any], now: float) -> str:
    """``pending`` / ``active`` / ``expired`` of a stored silence at ``now``."""
    if d.get("ends_at") is not None and now >= d["ends_at"]:
        return "expired"
    return "pending" if now < d["starts_at"] else "active"


def silence_command(d: dict[str, Any]) -> bytes:
    """The ``silence`` command of ``d``, checked to fit one ``alerts.funnel`` record
    (docs/kafka-rules.md #17). Raises SilenceRefused ``size`` naming the largest field as the HTTP
    APIs spell it, before anything is stored or sent."""
    value = command("silence", silence=d)
    if len(value) + len(SILENCE_KEY) <= MAX_RECORD_BYTES:
        return value
    field = max(("matchers", "comment", "author", "time_intervals"),
                key=lambda k: len(command("", v=d.get(k))))
    name = _API_NAMES.get(field, field)
    raise SilenceRefused(name, f"makes the silence {len(value) + len(SILENCE_KEY)} bytes as an "
                         f"alerts.funnel record, more than one Kafka record carries",
                         f"a silence of at most {MAX_RECORD_BYTES} bytes of JSON: "
                         f"shorten {name}", "size")


class SilenceStore:
    """The silences of one deployment (``/silences``, ``/api/v2/silences``); ``broadcast(value)``
    sends to every partition, raising ``plait.errors.Unavailable`` when Kafka refuses."""

    def __init__(self, redis: Callable[[], Any], key: str,
                 broadcast: Callable[[bytes], Awaitable[None]]) -> None:
        self.redis, self.key, self.broadcast = redis, key, broadcast
        #: id -> (what its matching depends on, the Silence with its regexes compiled)
        self._compiled: dict[str, tuple[tuple, Silence]] = {}

    async def get(self, silence_id: str) -> dict[str, Any] | None:
        """The stored silence ``silence_id``, or None."""
        raw = await self.redis().hget(self.key, silence_id)
        return json.loads(raw) if raw is not None else None

    async def all(self) -> list[dict[str, Any]]:
        """Every stored silence (active, pending or expired)."""
        return [json.loads(v) for v in (await self.redis().hgetall(self.key)).values()]

    async def active(self, now: float) -> dict[str, Silence]:
        """Silences active at ``now`` by id, regexes compiled once per silence version."""
        stored = await self.all()
        out = {}
        for d in stored:
            key = (repr(d["matchers"]), d["starts_at"], d["ends_at"], repr(d.get("time_intervals")))
            hit = self._compiled.get(d["id"])
            if hit is None or hit[0] != key:
                hit = self._compiled[d["id"]] = (key, Silence.from_dict(d))
            if hit[1].active(now):
                out[d["id"]] = hit[1]
        for sid in self._compiled.keys() - {d["id"] for d in stored}:
            del self._compiled[sid]
        return out

    async def save(self, silence: Silence, now: float) -> dict[str, Any]:
        """Store ``silence`` and broadcast it; returns ``Silence.to_dict`` plus ``updated_at``.
        Raises SilenceRefused (too large) or Unavailable (store rolled back)."""
        d = silence.to_dict() | {"updated_at": now}
        value = silence_command(silence.to_dict())
        old = await self.redis().hget(self.key, silence.id)
        await self.redis().hset(self.key, silence.id, json.dumps(d))
        try:
            await self.broadcast(value)
        except Unavailable:
            if old is None:
                await self.redis().hdel(self.key, silence.id)
            else:
                await self.redis().hset(self.key, silence.id, old)
            raise
        return d

    async def expire(self, silence_id: str, now: float) -> dict[str, Any]:
        """End a silence now everywhere (no-op if expired); returns it. Raises NotFound (404)."""
        d = await self.get(silence_id)
        if d is None:
            raise NotFound(f"silence {silence_id} not found")
        if end_now(d, now):
            d["updated_at"] = now
            await self.redis().hset(self.key, silence_id, json.dumps(d))
        await self.broadcast(command("expire", id=silence_id))
        return d

    async def set(self, silence_id: str | None, matchers: list[Matcher], starts: float,
                  ends: float, author: str, comment: str, now: float) -> Silence:
        """Create a silence or update ``silence_id`` by Alertmanager's rules; returns it. Raises
        SilenceRefused (past ``ends_at``, invalid, too large; nothing changed) or NotFound."""
        if ends < now:
            raise SilenceRefused("ends_at", "is in the past", "a time after now", "order")
        prev = await self.get(silence_id) if silence_id else None
        if silence_id and prev is None:
            raise NotFound(f"silence {silence_id} not found")
        sid, extra, expire_prev = None, {}, False
        if prev is not None:
            state = silence_state(prev, now)
            same = tuple(matchers) == Silence.from_dict(prev).matchers
            if same and state != "expired" and (
                    # the same second, as silence.go canUpdate compares StartsAt.Unix()
                    (state == "active" and math.floor(starts) == math.floor(prev["starts_at"]))
                    or (state == "pending" and starts >= now)):
                sid = prev["id"]
                extra = {"allow_broad": prev.get("allow_broad", False),
                         "time_intervals": prev.get("time_intervals") or []}
            elif state != "expired":
                expire_prev = True
        if alertmanager_refuses(matchers):
            raise SilenceRefused("matchers", "at least one matcher must not match the empty "
                                 "string", 'a matcher such as instance="h1"', "broad")
        if is_broad(matchers):  # Alertmanager's API takes it: so does its stand-in
            extra["allow_broad"] = True
        if sid is None:
            sid, starts = str(uuid.uuid4()), max(starts, now)
        created = create_silence({"matchers": matchers, "starts_at": starts, "ends_at": ends,
                                  "author": author, "comment": comment, **extra}, now, sid)
        await self.save(created, now)  # too large: refused before any change
        if expire_prev:  # after the new one is stored: a refused send never loses both
            await self.expire(prev["id"], now)
        return created
