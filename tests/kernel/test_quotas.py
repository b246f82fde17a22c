"""Daily row quotas (plait.quotas) on a real Redis: the caller's day in its
zone, idempotent charging that never passes the quota, the 429 refusal, the
expiry after the day ends, counts that outlive the process (Redis)."""
from __future__ import annotations

import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from plait import keys as K
from plait import quotas

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "security"))
from security_helpers import make_caller, make_spec  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/0"
NOON_UTC = datetime(2099, 12, 4, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
async def redis():
    client = aioredis.Redis.from_url(REDIS_URL, socket_timeout=5)
    prefix = f"plait-quota-test-{uuid.uuid4().hex[:10]}"
    yield client, prefix
    async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        await client.delete(key)
    await client.aclose()


def test_the_day_is_the_callers_own_and_resets_at_its_midnight():
    day = quotas.today("Asia/Shanghai", datetime(2099, 12, 4, 17, 30, tzinfo=timezone.utc))
    assert day.day == "2099-12-05"  # 01:30 in Shanghai
    assert day.resets_at_text == "2099-12-06T00:00:00+08:00"
    assert quotas.today("UTC", NOON_UTC).resets_at_text == "2099-12-05T00:00:00+00:00"
    # a midnight that a DST change skips (Santiago, 2022-09-11 00:00 -> 01:00)
    skipped = quotas.today("America/Santiago", datetime(2022, 9, 10, 12, tzinfo=timezone.utc))
    utc = skipped.resets_at.astimezone(timezone.utc)
    assert utc == datetime(2022, 9, 11, 4, tzinfo=timezone.utc)


async def test_charging_is_idempotent_per_task_and_stops_at_the_quota(redis):
    client, prefix = redis
    caller = make_caller(dailyRows=250)

    def charge(task: str, rows: int):
        return quotas.charge(client, prefix, caller, task, rows, NOON_UTC)

    assert await charge("t1", 100) == 100
    assert await charge("t1", 100) == 100  # the same page again: nothing added
    assert await charge("t1", 200) == 200
    assert await charge("t2", 100) == 50   # 50 left: the rest is cut
    assert await charge("t2", 100) == 50   # re-driven: cut at the same row
    assert await charge("t3", 10) == 0
    assert await quotas.used(client, prefix, caller, NOON_UTC) == 250
    key = K.daily_rows(prefix, "crm", "2099-12-04")
    expire_at = await client.expiretime(key)
    assert expire_at == int(datetime(2099, 12, 6, tzinfo=timezone.utc).timestamp())


async def test_partitions_charge_the_task_once_in_its_own_checkpoint(redis):
    client, prefix = redis
    caller = make_caller(dailyRows=250)

    def charge(partition: int, rows: int):
        return quotas.charge(client, prefix, caller, "t1", rows, NOON_UTC, partition=partition)

    # each partition's chain counts its own rows so far, adding to the task's
    assert await charge(0, 100) == 100
    assert await charge(1, 100) == 100
    assert await charge(0, 100) == 100  # a page of partition 0 again: nothing added
    assert await charge(1, 180) == 150  # 50 left: partition 1's page is cut there
    assert await quotas.used(client, prefix, caller, NOON_UTC) == 250
    marks = await client.hgetall(K.checkpoint(prefix, "t1"))
    assert {k: int(v) for k, v in marks.items()} == {
        b"quota_rows": 250, b"quota_rows:0": 100, b"quota_rows:1": 150}
    assert [k async for k in client.scan_iter(match=f"{prefix}:ckpt:t1#*", count=1000)] == []


async def test_a_pushed_page_counts_once_for_the_task_and_up_to_the_quota(redis):
    client, prefix = redis
    caller = make_caller(dailyRows=250)

    def count(page: str, rows: int, who=caller):
        return quotas.count_page(client, prefix, who, "t1", page, rows, 60, NOON_UTC)

    # the task's rows so far, each page once in any order, whoever sent it
    assert await count("1:2", 40) == 40
    assert await count("0:0", 100) == 140
    assert await count("1:2", 40) == 140  # repeated: nothing added
    assert await count("0:1", 150) == 290  # every row accepted; the quota stops at 250
    assert await quotas.used(client, prefix, caller, NOON_UTC) == 250
    assert int(await client.hget(K.checkpoint(prefix, "t1"), "quota_rows")) == 250
    # without a quota only the task's rows are counted
    assert await count("0:2", 10, make_caller()) == 300
    assert await quotas.used(client, prefix, caller, NOON_UTC) == 250


async def test_a_task_across_midnight_charges_each_day_its_own_rows(redis):
    client, prefix = redis
    caller = make_caller(dailyRows=1000)
    await quotas.charge(client, prefix, caller, "t1", 300, NOON_UTC)
    tomorrow = datetime(2099, 12, 5, 0, 5, tzinfo=timezone.utc)
    assert await quotas.charge(client, prefix, caller, "t1", 450, tomorrow) == 450
    assert await quotas.used(client, prefix, caller, NOON_UTC) == 300
    assert await quotas.used(client, prefix, caller, tomorrow) == 150


async def test_a_caller_without_a_quota_is_never_counted(redis):
    client, prefix = redis
    caller = make_caller()
    assert await quotas.charge(client, prefix, caller, "t1", 10**9, NOON_UTC) == 10**9
    assert not [k async for k in client.scan_iter(match=f"{prefix}:*", count=1000)]
    await quotas.check_request(client, prefix, caller, make_spec(maxRows=10**5), NOON_UTC)


async def test_a_request_is_refused_when_used_up_or_asking_more_than_is_left(redis):
    client, prefix = redis
    caller = make_caller(dailyRows=1000, timezone="Asia/Shanghai")
    await quotas.check_request(client, prefix, caller, make_spec(maxRows=1000), NOON_UTC)
    await quotas.charge(client, prefix, caller, "t1", 600, NOON_UTC)
    with pytest.raises(quotas.QuotaExceeded) as err:
        await quotas.check_request(client, prefix, caller, make_spec(maxRows=500), NOON_UTC)
    assert err.value.status == 429
    assert err.value.data() == {"quota": "dailyRows", "dailyRows": 1000, "used": 600,
                                "remaining": 400, "timezone": "Asia/Shanghai",
                                "resetsAt": "2099-12-05T00:00:00+08:00"}
    assert "jobConfig.maxRows 500 is more than the 400 rows left" in err.value.message
    assert err.value.headers == {"Retry-After": str(4 * 3600)}  # 12:00Z is 20:00 in Shanghai
    await quotas.check_request(client, prefix, caller, make_spec(), NOON_UTC)  # no maxRows: runs
    await quotas.charge(client, prefix, caller, "t2", 400, NOON_UTC)
    with pytest.raises(quotas.QuotaExceeded) as err:
        await quotas.check_request(client, prefix, caller, make_spec(), NOON_UTC)
    assert "is used up: 1,000 rows exported today (Asia/Shanghai)" in err.value.message
    assert "resets at 2099-12-05T00:00:00+08:00" in err.value.message


def test_a_caller_timezone_must_be_a_known_zone():
    from plait.callers import CallerConfigError, parse_callers

    entry = make_caller().model_dump() | {"appSecret": "x" * 40, "timezone": "Mars/Olympus"}
    entry.pop("sysCode")
    with pytest.raises(CallerConfigError) as err:
        parse_callers({"callers": {"crm": entry}})
    assert "callers.crm.timezone" in str(err.value)
