"""Fixtures of the export handler unit tests: a worker ``Context`` built from
the in-memory members of ``streams.memory`` (no Redis, no broker) and a
scripted data API on ``httpx.MockTransport``."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

import httpx
import pytest

from export_harness import DataApi
from plait.limits import Limits
from plait.settings import Settings
from plait.topics import Topics
from streams.context import Context
from streams.layout import forget_ahead
from streams.memory import (MemoryCheckpoints, MemoryProjection, MemorySlots, MemoryStore,
                            MemoryWorkers)


@pytest.fixture
def data_api() -> DataApi:
    return DataApi()


@pytest.fixture
async def make_ctx(data_api) -> Callable[..., Context]:
    """``make_ctx(limits={...}, clock=Clock(...), **settings)`` -> a memory Context."""
    clients: list[httpx.AsyncClient] = []
    contexts: list[Context] = []

    def make(limits: dict | None = None, clock: Callable[[], float] | None = None,
             **overrides: Any) -> Context:
        lim = Limits.model_validate(limits or {})
        settings = Settings(redis_prefix="unit", limits=lim, stale_after_seconds=5,
                            max_redrives=3, fetch_retries=1, fetch_backoff_seconds=0.0,
                            **overrides)
        http = httpx.AsyncClient(transport=httpx.MockTransport(data_api))
        clients.append(http)
        kw = {"clock": clock} if clock else {}
        ctx = Context(settings, Topics("unit."), MemoryStore(), MemoryProjection(), http,
                      MemoryCheckpoints(), MemorySlots(lim, **kw), MemoryWorkers(**kw),
                      worker_id="w-me")
        contexts.append(ctx)
        return ctx

    yield make
    # pages still prepared ahead are forgotten (their outcome read), and what
    # the test left running (a forgotten page waits for its decode thread: a
    # thread cannot be stopped) ends before the loop closes; else an exception
    # of theirs is reported "never retrieved" later by the garbage collector,
    # inside another test (once it broke a parser there, tests/kernel/conftest.py)
    for ctx in contexts:
        for task in list(ctx.ahead):
            forget_ahead(ctx, task)
    left = asyncio.all_tasks() - {asyncio.current_task()}
    if left:
        await asyncio.wait(left, timeout=5)
    for http in clients:
        await http.aclose()
