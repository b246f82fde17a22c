"""Redis storage of schedules (``plait.keys``): definitions in one hash, a
state string each, a claim key per slot (SET NX), a lease fencing writes."""
from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis

from plait import keys as K
from schedules.core import State

#: A claim outlives any catch-up window we honour.
SLOT_TTL_SECONDS = 8 * 86400

_FENCED_SET = """
if redis.call('get', KEYS[1]) == ARGV[1] and redis.call('hexists', KEYS[3], ARGV[3]) == 1 then
  redis.call('set', KEYS[2], ARGV[2]) return 1
end
return 0
"""
#: HSET KEYS[2] ARGV[2] ARGV[3] only while schedule ARGV[1] is in the hash KEYS[1].
_IF_EXISTS_HSET = """
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('hset', KEYS[2], ARGV[2], ARGV[3]) return 1
end
return 0
"""
_IF_EXISTS_RPUSH = """
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2]) return 1
end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class Store:
    """Schedules under ``prefix`` in ``redis`` (a ``redis.asyncio`` client)."""

    def __init__(self, redis: aioredis.Redis, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix

    async def put(self, doc: dict[str, Any]) -> None:
        await self.redis.hset(K.schedules(self.prefix), doc["id"], json.dumps(doc))

    async def replace(self, doc: dict[str, Any]) -> bool:
        """Overwrite a stored definition; False (nothing written) when it was deleted."""
        key = K.schedules(self.prefix)
        return bool(await self.redis.eval(_IF_EXISTS_HSET, 2, key, key, doc["id"], doc["id"],
                                          json.dumps(doc)))

    async def get(self, schedule_id: str) -> dict[str, Any] | None:
        raw = await self.redis.hget(K.schedules(self.prefix), schedule_id)
        return json.loads(raw) if raw else None

    async def all(self) -> list[dict[str, Any]]:
        raw = await self.redis.hgetall(K.schedules(self.prefix))
        return [json.loads(v) for _, v in sorted(raw.items())]

    async def delete(self, schedule_id: str) -> bool:
        gone = await self.redis.hdel(K.schedules(self.prefix), schedule_id)
        await self.redis.delete(K.schedule_state(self.prefix, schedule_id),
                                K.schedule_probe(self.prefix, schedule_id),
                                K.schedule_requests(self.prefix, schedule_id))
        return bool(gone)

    async def state(self, schedule_id: str) -> State | None:
        raw = await self.redis.get(K.schedule_state(self.prefix, schedule_id))
        return State.from_dict(json.loads(raw)) if raw else None

    async def save_state(self, schedule_id: str, state: State, owner: str | None = None) -> bool:
        """Save ``state``; with ``owner``, only while it holds the lease and the
        schedule exists (else False, nothing written)."""
        body = json.dumps(state.to_dict())
        key = K.schedule_state(self.prefix, schedule_id)
        if owner is None:
            await self.redis.set(key, body)
            return True
        return bool(await self.redis.eval(_FENCED_SET, 3, K.schedule_owner(self.prefix), key,
                                          K.schedules(self.prefix), owner, body, schedule_id))

    async def take_turn(self, owner: str, lease_ms: int) -> bool:
        return bool(await self.redis.set(K.schedule_owner(self.prefix), owner, nx=True,
                                         px=lease_ms))

    async def renew(self, owner: str, lease_ms: int) -> bool:
        """Extend ``owner``'s lease to ``lease_ms`` from now; False when it no longer holds it."""
        return bool(await self.redis.eval(_RENEW, 1, K.schedule_owner(self.prefix), owner,
                                          lease_ms))

    async def release(self, owner: str) -> None:
        await self.redis.eval(_RELEASE, 1, K.schedule_owner(self.prefix), owner)

    async def claim(self, schedule_id: str, slot_ms: int, record: dict) -> dict | None:
        """Claim a slot; None when this call claimed it, else the existing claim."""
        key = K.schedule_slot(self.prefix, schedule_id, slot_ms)
        if await self.redis.set(key, json.dumps(record), nx=True, ex=SLOT_TTL_SECONDS):
            return None
        raw = await self.redis.get(key)
        return json.loads(raw) if raw else {}

    async def mark(self, schedule_id: str, slot_ms: int, record: dict) -> None:
        await self.redis.set(K.schedule_slot(self.prefix, schedule_id, slot_ms),
                             json.dumps(record), ex=SLOT_TTL_SECONDS)

    async def fired(self, schedule_id: str, slots: list[int]) -> set[int]:
        """The ``slots`` (ms) whose claim says ``fired``."""
        return {s for s, c in (await self.claims(schedule_id, slots)).items()
                if c.get("state") == "fired"}

    async def claims(self, schedule_id: str, slots: list[int]) -> dict[int, dict]:
        """``{slot ms: its claim}`` of the ``slots`` claimed (:meth:`claim`, :meth:`mark`)."""
        if not slots:
            return {}
        raws = await self.redis.mget([K.schedule_slot(self.prefix, schedule_id, s)
                                      for s in slots])
        return {s: json.loads(raw) for s, raw in zip(slots, raws) if raw}

    async def request(self, schedule_id: str, req: dict) -> bool:
        """Queue a manual request; False (nothing queued) when the schedule was deleted."""
        return bool(await self.redis.eval(
            _IF_EXISTS_RPUSH, 2, K.schedules(self.prefix),
            K.schedule_requests(self.prefix, schedule_id), schedule_id, json.dumps(req)))

    async def take_requests(self, schedule_id: str) -> list[dict]:
        key = K.schedule_requests(self.prefix, schedule_id)
        out = []
        while (raw := await self.redis.lpop(key)) is not None:
            out.append(json.loads(raw))
        return out

    async def probe_states(self, schedule_id: str) -> dict[str, str]:
        raw = await self.redis.hgetall(K.schedule_probe(self.prefix, schedule_id))
        return {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                for k, v in raw.items()}

    async def set_probe_state(self, schedule_id: str, target: str, state: str) -> None:
        """Record a target's state while the schedule exists (a deleted one keeps no key)."""
        await self.redis.eval(_IF_EXISTS_HSET, 2, K.schedules(self.prefix),
                              K.schedule_probe(self.prefix, schedule_id), schedule_id, target,
                              state)
