"""Wiring the scheduler into a worker (``streams.app.create_apps``): a timer
every ``Settings.schedule_tick_seconds`` runs :meth:`Scheduler.turn`; sends go
through the export runtime's topics (raw bytes, acked)."""
from __future__ import annotations

import asyncio
from typing import Callable

import httpx

from plait.settings import Settings
from schedules.runner import Scheduler
from schedules.store import Store


def register_scheduler(runtime, settings: Settings, every: Callable) -> Scheduler:
    """Add the scheduler timer to a ``streams.runtime.Runtime``'s worker."""
    ctx = runtime.ctx

    async def send(records: list[tuple[str, str, bytes]]) -> None:
        futures = [await runtime.rt.topic(base).send(key=key.encode(), value=value)
                   for base, key, value in records]
        await asyncio.gather(*futures)

    redis = ctx.projection.redis
    http = httpx.AsyncClient(follow_redirects=False)
    scheduler = Scheduler(Store(redis, settings.redis_prefix), ctx.projection, send,
                          ctx.worker_id, http,
                          lease_ms=int(settings.schedule_lease_seconds * 1000))
    every(settings.schedule_tick_seconds, scheduler.turn, "schedules")
    return scheduler
