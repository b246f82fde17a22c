"""What handlers need, built once per worker: settings, topics, object store,
Redis, an HTTP client and this worker's id."""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

import httpx
import redis.asyncio as aioredis

from plait.callers import CallerRegistry, limits_by_sys_code, load_callers
from plait.events import Payload
from plait.limits import CallerLimits
from plait.settings import Settings
from plait.topics import Topics
from sinks.store import ObjectStore, open_store
from streams.checkpoints import Checkpoints
from streams.slots import Slots
from plait.projection import Projection


@dataclass
class Emit:
    """One event a handler wants sent: base topic name, key (task id), payload."""

    topic: str
    key: str
    payload: Payload


@dataclass
class Context:
    """Dependencies of the handlers (one per worker process)."""

    settings: Settings
    topics: Topics
    store: ObjectStore
    projection: Projection
    http: httpx.AsyncClient
    checkpoints: Checkpoints
    slots: Slots
    callers: CallerRegistry | None = None
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")


def build_context(settings: Settings) -> Context:
    """Connect the dependencies described by ``settings``. With a caller
    registry, each caller's concurrency limit and tier come from it (explicit
    ``PLAIT_LIMITS`` entries win)."""
    callers = load_callers(settings.callers_file) if settings.callers_file else None
    if callers is not None:
        from_registry = {k: CallerLimits.model_validate(v)
                         for k, v in limits_by_sys_code(callers).items()}
        settings = settings.model_copy(update={"limits": settings.limits.model_copy(
            update={"sysCodes": from_registry | settings.limits.sysCodes})})
    store = open_store(settings.storage_url, settings.api_url, settings.signing_secret,
                       settings.s3_endpoint_url, settings.s3_region,
                       settings.s3_public_url)
    redis = aioredis.Redis.from_url(settings.redis_url, socket_timeout=10,
                                    socket_connect_timeout=5)
    http = httpx.AsyncClient(timeout=httpx.Timeout(settings.fetch_timeout_seconds),
                             follow_redirects=False)
    ctx = Context(settings, Topics(settings.topic_prefix), store,
                  Projection(redis, settings.redis_prefix), http,
                  Checkpoints(redis, settings.redis_prefix),
                  Slots(redis, settings.redis_prefix, settings.limits), callers)
    if settings.worker_id:
        ctx.worker_id = settings.worker_id
    return ctx
