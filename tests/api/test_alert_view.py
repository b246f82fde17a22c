"""The read model of current alerts (``alerting.view``) on a real Redis:
bounded (firing only, a cap per partition, a TTL), incremental (only changed
fields are written), Alertmanager's fingerprint, and the worker hook."""
from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis
import redis.asyncio as aioredis

from alerting import view
from alerting.config import load_config
from alerting.funnel import Funnel
from alerting.dedupe import labelset_fingerprint as am_fingerprint
from alerting.view import META_FIELD, ViewPublisher, read_views

REDIS_URL = "redis://127.0.0.1:6379/0"
CONFIG = load_config(Path(__file__).resolve().parents[2] / "examples" / "alerting.yaml")


@pytest.fixture
def prefix():
    p = f"plait-viewtest-{uuid.uuid4().hex[:10]}"
    yield p
    r = redis.Redis.from_url(REDIS_URL)
    for key in r.scan_iter(match=f"{p}:*", count=1000):
        r.delete(key)
    r.close()


def run(coro):
    return asyncio.run(coro)


def firing(n: int, t: float = 1000.0) -> Funnel:
    f = Funnel(CONFIG)
    for i in range(n):
        f.ingest({"rule": "Disk", "asset": f"h{i}", "severity": "critical"}, t + i)
    return f


def test_alertmanager_fingerprint_matches_prometheus_common():
    # values from prometheus/common model.LabelSet{...}.Fingerprint()
    assert am_fingerprint({}) == "cbf29ce484222325"  # FNV-1a 64 offset basis
    fp = am_fingerprint({"alertname": "PodDown", "pod": "api-1"})
    assert len(fp) == 16 and fp != am_fingerprint({"alertname": "PodDown", "pod": "api-2"})
    assert am_fingerprint({"b": "1", "a": "2"}) == am_fingerprint({"a": "2", "b": "1"})


def test_publish_is_bounded_incremental_and_expires(prefix):
    async def go():
        r = aioredis.Redis.from_url(REDIS_URL)
        pub = ViewPublisher(r, prefix, CONFIG, limit=5, ttl=30)
        f = firing(8)
        first = await pub.publish(0, f.state, now=2000.0)
        key = pub.key(0)
        fields = await r.hkeys(key)
        meta = json.loads(await r.hget(key, META_FIELD))
        ttl = await r.ttl(key)
        # nothing changed: only the meta and the TTL are written
        again = await pub.publish(0, f.state, now=2010.0)
        # one alert resolves: it leaves the view
        f.ingest({"rule": "Disk", "asset": "h7", "severity": "critical", "status": "resolved"},
                 2020.0)
        await pub.publish(0, f.state, now=2020.0)
        after = await r.hkeys(key)
        views = await read_views(r, prefix, [0, 1])
        await r.aclose()
        return first, fields, meta, ttl, again, after, views

    first, fields, meta, ttl, again, after, views = run(go())
    receivers = meta.pop("receivers")  # the console's receiver levels (api.console)
    assert len(fields) == 6 and meta == {"updatedAt": 2000.0, "total": 8, "shown": 5,
                                         "partition": 0}
    assert all({"tokens", "burst", "outbox", "inflight", "last"} <= set(r)
               for r in receivers.values())
    assert 0 < ttl <= 30
    assert again == 2  # meta + expire, no alert rewritten
    assert len(after) == 6  # h7 resolved and left; h2 (next most recent) came in
    assert {v["labels"]["asset"] for v in views} == {"h2", "h3", "h4", "h5", "h6"}
    assert all(v["status"]["state"] == "active" for v in views)


def test_publish_is_throttled_per_partition(prefix):
    async def go():
        r = aioredis.Redis.from_url(REDIS_URL)
        pub = ViewPublisher(r, prefix, CONFIG, every=1.0)
        f = firing(1)
        out = [await pub.publish(0, f.state, now=100.0), await pub.publish(0, f.state, now=100.5),
               await pub.publish(1, f.state, now=100.5), await pub.publish(0, f.state, now=101.1)]
        await r.aclose()
        return out

    a, b, c, d = run(go())
    assert a is not None and b is None and c is not None and d is not None


def test_redis_down_never_raises_into_the_funnel():
    pub = ViewPublisher(aioredis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2),
                        "p", CONFIG)
    assert run(pub.publish(0, firing(1).state, force=True)) is None


def hook(r, prefix: str, funnel, partition: int = 3, spawn=None) -> view.ViewHook:
    """The worker hook over the runner's funnel of ``partition`` only."""
    held = {partition: SimpleNamespace(funnel=funnel)}
    return view.ViewHook(ViewPublisher(r, prefix, CONFIG), held.get,
                         spawn or (lambda coro: coro.close()))


def test_worker_hook_publishes_the_runner_partition(prefix):
    f = firing(2)

    async def go():
        r = aioredis.Redis.from_url(REDIS_URL)
        h = hook(lambda: r, prefix, f)
        await h.publish(3)
        await h.publish(9)  # a partition the runner does not hold: nothing, no error
        got = await read_views(r, prefix, range(10))
        await r.aclose()
        return got

    got = run(go())
    assert sorted(v["labels"]["asset"] for v in got) == ["h0", "h1"]
    assert got[0]["labels"]["alertname"] == "Disk" and got[0]["receivers"] == [{"name": "oncall"}]


def test_schedule_publishes_in_the_background_one_flight_per_partition(prefix, monkeypatch):
    """The funnel does not wait for its view: ``schedule`` returns at once;
    asks while a publish is in flight make one more publish after it, so
    what changed meanwhile is published too."""
    calls: list[int] = []
    gate = asyncio.Event()

    async def slow_publish(self, partition):
        calls.append(partition)
        await gate.wait()

    monkeypatch.setattr(view.ViewHook, "publish", slow_publish)

    async def go():
        tasks: set = set()
        h = hook(None, prefix, None, spawn=lambda coro: tasks.add(asyncio.ensure_future(coro)))
        h.schedule(0)
        h.schedule(0)  # in flight: remembered, not started
        h.schedule(0)
        h.schedule(1)  # another partition: its own flight
        await asyncio.sleep(0)
        in_flight = list(calls)
        gate.set()
        await asyncio.gather(*tasks)
        return in_flight, h.flights

    in_flight, flights = run(go())
    assert in_flight == [0, 1]
    assert sorted(calls) == [0, 0, 1]  # one follow-up for the three asks on partition 0
    assert flights == {}


def test_follow_up_publishes_what_changed_during_the_flight(prefix):
    """A publish asked for while one is in flight publishes what changed
    meanwhile (it waits for the throttle instead of being skipped by it)."""
    f = firing(2)

    async def go():
        r = aioredis.Redis.from_url(REDIS_URL)
        tasks: set = set()
        h = hook(r, prefix, f, spawn=lambda coro: tasks.add(asyncio.ensure_future(coro)))
        pub = h.publisher
        loop = asyncio.get_running_loop()
        compute, changed = pub._compute, []

        def on_loop():  # the funnel, while the first publish is in flight
            if not changed:
                changed.append(1)
                f.ingest({"rule": "Disk", "asset": "h2", "severity": "critical"}, 1002.0)
                h.schedule(3)

        def compute_then_change(*a):
            out = compute(*a)
            loop.call_soon_threadsafe(on_loop)
            return out

        pub._compute = compute_then_change
        h.schedule(3)
        while tasks:
            t = tasks.pop()
            await t
        got = await read_views(r, prefix, [3])
        await r.aclose()
        return sorted(v["labels"]["asset"] for v in got)

    assert run(go()) == ["h0", "h1", "h2"]
