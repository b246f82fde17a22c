"""Daily row quotas per caller (``dailyRows`` in its ``timezone``; docs/events.md, "Daily row
quotas"). Rows count when fetched or written, never past the quota: :func:`check_request` refuses a
request (429), :func:`charge` cuts the page that crosses it (the task succeeds ``truncated``);
charging is idempotent per task (``quota_rows`` in its checkpoint hash), per partition of a pulled
task (:func:`charge`) and per pushed page (:func:`count_page`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from prometheus_client import Counter

from plait import keys as K
from plait.errors import PlaitError

QUOTA_ROWS = Counter("plait_quota_rows_total", "Rows counted against daily row quotas, "
                     "by caller sysCode", ["sysCode"])
QUOTA_REFUSED = Counter("plait_quota_refusals_total", "Export requests refused (429) by a "
                        "daily row quota, by caller sysCode", ["sysCode"])
QUOTA_CUT = Counter("plait_quota_cut_tasks_total", "Export tasks cut short by a daily row "
                    "quota, by caller sysCode", ["sysCode"])

QUOTA_NOTE = "daily_quota_cut"

#: KEYS: day count, the task's checkpoint hash; ARGV: the chain's rows after the page, quota,
#: expiry (Unix s), the chain's field (``quota_rows``, or ``quota_rows:<partition>`` whose rows
#: also add to the task's ``quota_rows``).
_CHARGE = """
local seen = tonumber(redis.call('HGET', KEYS[2], ARGV[4]) or '0')
local want = tonumber(ARGV[1])
if want <= seen then return want end
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local add = math.min(want - seen, math.max(0, tonumber(ARGV[2]) - used))
if add > 0 then
  redis.call('INCRBY', KEYS[1], add)
  redis.call('HSET', KEYS[2], ARGV[4], seen + add)
  if ARGV[4] ~= 'quota_rows' then redis.call('HINCRBY', KEYS[2], 'quota_rows', add) end
end
redis.call('EXPIREAT', KEYS[1], ARGV[3])
return seen + add
"""

#: Count a page's rows once for its task: KEYS ledger hash (``plait.keys.row_grants``), the
#: task's checkpoint hash, day count (the ledger again without a quota); ARGV page field, rows,
#: ledger ttl (s), quota (-1 without), day count expiry (Unix s). Returns {task rows, charged}.
_COUNT_PAGE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return {tonumber(redis.call('HGET', KEYS[1], 'granted') or '0'), 0}
end
local rows = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], rows)
local total = redis.call('HINCRBY', KEYS[1], 'granted', rows)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
local add = 0
if tonumber(ARGV[4]) >= 0 then
  local used = tonumber(redis.call('GET', KEYS[3]) or '0')
  add = math.min(rows, math.max(0, tonumber(ARGV[4]) - used))
  if add > 0 then
    redis.call('INCRBY', KEYS[3], add)
    redis.call('HINCRBY', KEYS[2], 'quota_rows', add)
  end
  redis.call('EXPIREAT', KEYS[3], ARGV[5])
end
return {total, add}
"""


@dataclass(frozen=True)
class Day:
    """A caller's current ``day`` (``YYYY-MM-DD`` in ``zone``) and its aware end ``resets_at``."""

    day: str
    resets_at: datetime

    @property
    def resets_at_text(self) -> str:
        """``resets_at`` as RFC 3339 with the zone's offset."""
        return self.resets_at.isoformat(timespec="seconds")


def today(zone: str, now: datetime | None = None) -> Day:
    """The day ``now`` falls on in ``zone`` and the next local midnight (through UTC, so a midnight
    DST skips still has an instant)."""
    tz = ZoneInfo(zone)
    local = (now or datetime.now(timezone.utc)).astimezone(tz)
    nxt: date = local.date() + timedelta(days=1)
    midnight = datetime.combine(nxt, time(0), tzinfo=tz).astimezone(timezone.utc).astimezone(tz)
    return Day(local.date().isoformat(), midnight)


class QuotaExceeded(PlaitError):
    """Over the daily row quota (429). ``data()``: ``{"quota", "dailyRows", "used", "remaining",
    "timezone", "resetsAt"}``; ``Retry-After`` whole seconds to the reset (RFC 6585 s4)."""

    status = 429

    def __init__(self, message: str, details: dict[str, Any], retry_after: int) -> None:
        super().__init__(message)
        self.details = details
        self.headers = {"Retry-After": str(max(1, retry_after))}

    def data(self) -> Any:
        return self.details


async def used(redis: Any, prefix: str, caller: Any, now: datetime | None = None) -> int:
    """Rows counted today for ``caller`` (``plait.callers.Caller``)."""
    day = today(caller.timezone, now)
    return int(await redis.get(K.daily_rows(prefix, caller.sysCode, day.day)) or 0)


async def check_request(redis: Any, prefix: str, caller: Any, spec: Any,
                        now: datetime | None = None) -> None:
    """Raises QuotaExceeded when ``caller``'s quota is used up today or ``jobConfig.maxRows``
    exceeds what is left."""
    quota = getattr(caller, "dailyRows", None)
    if caller is None or quota is None:
        return
    day = today(caller.timezone, now)
    count = int(await redis.get(K.daily_rows(prefix, caller.sysCode, day.day)) or 0)
    left = max(0, quota - count)
    asked = spec.jobConfig.maxRows
    if left > 0 and (asked is None or asked <= left):
        return
    why = (f"jobConfig.maxRows {asked:,} is more than the {left:,} rows left today"
           if left > 0 else "is used up")
    QUOTA_REFUSED.labels(caller.sysCode).inc()
    raise QuotaExceeded(
        f"daily row quota (dailyRows {quota:,}) of sysCode {caller.sysCode!r} {why}: "
        f"{count:,} rows exported today ({caller.timezone}); it resets at "
        f"{day.resets_at_text}",
        {"quota": "dailyRows", "dailyRows": quota, "used": count, "remaining": left,
         "timezone": caller.timezone, "resetsAt": day.resets_at_text},
        math.ceil((day.resets_at - (now or datetime.now(timezone.utc))).total_seconds()))


async def charge(redis: Any, prefix: str, caller: Any, task_id: str, rows: int,
                 now: datetime | None = None, partition: int | None = None) -> int:
    """Count a chain's rows up to ``rows`` (after this page) against today's quota; how many the
    quota allows. The chain is the task itself, or its ``partition``: each partition's rows so
    far are ``quota_rows:<partition>`` and add to the task's ``quota_rows``, all in the task's
    checkpoint hash, so the task is counted once however many workers pull its partitions."""
    quota = getattr(caller, "dailyRows", None)
    if caller is None or quota is None:
        return rows
    day = today(caller.timezone, now)
    expire = int((day.resets_at + timedelta(days=1)).timestamp())
    field = "quota_rows" if partition is None else f"quota_rows:{partition}"
    before = int(await redis.hget(K.checkpoint(prefix, task_id), field) or 0)
    allowed = int(await redis.eval(_CHARGE, 2, K.daily_rows(prefix, caller.sysCode, day.day),
                                   K.checkpoint(prefix, task_id), rows, quota, expire, field))
    if allowed > before:
        QUOTA_ROWS.labels(caller.sysCode).inc(allowed - before)
    if allowed < rows:
        QUOTA_CUT.labels(caller.sysCode).inc()
    return allowed


async def count_page(redis: Any, prefix: str, caller: Any, task_id: str, page: str, rows: int,
                     ttl: int, now: datetime | None = None) -> int:
    """Count page ``page`` (``<partition>:<seq>``) of ``rows`` rows once for its task, in the
    task's ledger (``plait.keys.row_grants``), and against ``caller``'s quota when it has one
    (up to what is left; a pushed page is never cut); the task's rows counted so far, this
    page's included (a repeated page changes nothing)."""
    quota = getattr(caller, "dailyRows", None)
    ledger, mark = K.row_grants(prefix, task_id), K.checkpoint(prefix, task_id)
    day_key, limit, expire = ledger, -1, 0
    if caller is not None and quota is not None:
        day = today(caller.timezone, now)
        day_key, limit = K.daily_rows(prefix, caller.sysCode, day.day), quota
        expire = int((day.resets_at + timedelta(days=1)).timestamp())
    total, added = await redis.eval(_COUNT_PAGE, 3, ledger, mark, day_key, page, rows, ttl,
                                    limit, expire)
    if added:
        QUOTA_ROWS.labels(caller.sysCode).inc(int(added))
    return int(total)
