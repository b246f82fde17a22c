"""Break-review: ``view.schedule``'s follow-up publish (asked while one is in
flight) must publish what changed meanwhile. It calls the throttled
``publish``: the follow-up starts < ``every`` (1 s) after the in-flight one
began, so it is skipped, and the change waits for the partition's next
counted command (tick/result/silence/expire), possibly much later."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import redis.asyncio as aioredis

from alerting import view
from alerting.view import ViewPublisher, read_views
from tests.api.test_alert_view import CONFIG, REDIS_URL, firing, prefix, run  # noqa: F401


def test_follow_up_publishes_what_changed_during_the_flight(prefix):  # noqa: F811
    f = firing(2)
    svc = SimpleNamespace(settings=SimpleNamespace(redis_prefix=prefix), config=CONFIG,
                          runner=SimpleNamespace(partitions={3: SimpleNamespace(funnel=f)}))

    async def go():
        r = aioredis.Redis.from_url(REDIS_URL)
        svc._redis = lambda: r
        tasks: set = set()
        svc._spawn = lambda coro: tasks.add(asyncio.ensure_future(coro))
        pub = svc._alert_view = ViewPublisher(r, prefix, CONFIG)
        loop = asyncio.get_running_loop()
        compute, changed = pub._compute, []

        def on_loop():  # the funnel, while the first publish is in flight
            if not changed:
                changed.append(1)
                f.ingest({"rule": "Disk", "asset": "h2", "severity": "critical"}, 1002.0)
                view.schedule(svc, 3)

        def compute_then_change(*a):
            out = compute(*a)
            loop.call_soon_threadsafe(on_loop)
            return out

        pub._compute = compute_then_change
        view.schedule(svc, 3)
        while tasks:
            t = tasks.pop()
            await t
        got = await read_views(r, prefix, [3])
        await r.aclose()
        return sorted(v["labels"]["asset"] for v in got)

    assert run(go()) == ["h0", "h1", "h2"]
