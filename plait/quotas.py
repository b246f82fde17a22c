"""Daily row quotas per caller (the registry's ``dailyRows``, ``timezone``;
docs/events.md, "Daily row quotas").

A caller with ``dailyRows`` may export that many rows per day, the day being
its own (``timezone``, an IANA zone, default UTC): the count resets at its
local midnight. Rows count when they are fetched (pull) or written (push),
whatever way the task then ends, since they loaded the data API and Plait;
never past the quota (pushed pages, which are not cut, are counted up to it).

- :func:`check_request` (API): a request is refused with 429
  (:class:`QuotaExceeded`) when the rows counted today already reach the
  quota, or when its ``jobConfig.maxRows`` is more than what is left.
- :func:`charge` (workers): each page's rows are added to the day's count,
  never past the quota; what did not fit is cut off the page, and the task
  ends ``SUCCESS`` with ``truncated`` and the quality note
  ``daily_quota_cut`` (the cut is a cap like ``jobConfig.maxRows``, which
  never fails a task either). Charging is idempotent per task: a redelivered
  or re-driven page adds nothing (the task's charged rows are kept in its
  checkpoint hash, field ``quota_rows``), and a task running across midnight
  charges each day only with the rows fetched on it.

Counts live in Redis (``plait.keys.daily_rows``), so they survive restarts;
each day's key expires a day after that day ends.
"""
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

#: Quality note of a task cut by its caller's daily quota (1 on the page cut).
QUOTA_NOTE = "daily_quota_cut"

#: Charge a page: KEYS[1] the day's count, KEYS[2] the task's checkpoint hash;
#: ARGV: the task's rows after this page, the quota, the day key's expiry
#: (Unix seconds). Adds what is new and fits; returns the task's rows allowed.
_CHARGE = """
local seen = tonumber(redis.call('HGET', KEYS[2], 'quota_rows') or '0')
local want = tonumber(ARGV[1])
if want <= seen then return want end
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local add = math.min(want - seen, math.max(0, tonumber(ARGV[2]) - used))
if add > 0 then
  redis.call('INCRBY', KEYS[1], add)
  redis.call('HSET', KEYS[2], 'quota_rows', seen + add)
end
redis.call('EXPIREAT', KEYS[1], ARGV[3])
return seen + add
"""


@dataclass(frozen=True)
class Day:
    """A caller's current day: ``day`` (``YYYY-MM-DD`` in ``zone``) and when
    it ends (``resets_at``, aware, in ``zone``)."""

    day: str
    resets_at: datetime

    @property
    def resets_at_text(self) -> str:
        """``resets_at`` as RFC 3339 with the zone's offset."""
        return self.resets_at.isoformat(timespec="seconds")


def today(zone: str, now: datetime | None = None) -> Day:
    """The day ``now`` (default: the current time) falls on in ``zone``,
    and its end: the next local midnight (taken through UTC, so a zone whose
    midnight a DST change skips still gets the instant of that change)."""
    tz = ZoneInfo(zone)
    local = (now or datetime.now(timezone.utc)).astimezone(tz)
    nxt: date = local.date() + timedelta(days=1)
    midnight = datetime.combine(nxt, time(0), tzinfo=tz).astimezone(timezone.utc).astimezone(tz)
    return Day(local.date().isoformat(), midnight)


class QuotaExceeded(PlaitError):
    """A request over its caller's daily row quota; the API answers 429.

    ``data()``: ``{"quota": "dailyRows", "dailyRows", "used", "remaining",
    "timezone", "resetsAt"}`` (RFC 3339, the caller's zone); ``headers``:
    ``Retry-After``, whole seconds until the reset (RFC 6585, 4; RFC 9110,
    10.2.3)."""

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
    """Refuse ``spec`` when ``caller``'s quota is used up today, or its
    ``jobConfig.maxRows`` is more than what is left. No quota: nothing.

    Raises:
        QuotaExceeded: 429 naming the quota, what is used, what is left and
            when it resets.
    """
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
                 now: datetime | None = None) -> int:
    """Count a task's rows up to ``rows`` (its rows after this page) against
    ``caller``'s quota today; returns how many of them the quota allows
    (``rows`` when all fit, or when the caller has no quota)."""
    quota = getattr(caller, "dailyRows", None)
    if caller is None or quota is None:
        return rows
    day = today(caller.timezone, now)
    expire = int((day.resets_at + timedelta(days=1)).timestamp())
    before = int(await redis.hget(K.checkpoint(prefix, task_id), "quota_rows") or 0)
    allowed = int(await redis.eval(_CHARGE, 2, K.daily_rows(prefix, caller.sysCode, day.day),
                                   K.checkpoint(prefix, task_id), rows, quota, expire))
    if allowed > before:
        QUOTA_ROWS.labels(caller.sysCode).inc(allowed - before)
    if allowed < rows:
        QUOTA_CUT.labels(caller.sysCode).inc()
    return allowed
