"""What handlers need, built once per worker: settings, topics, object store,
Redis, an HTTP client and this worker's id."""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

import httpx
import redis.asyncio as aioredis

from plait.events import Payload
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
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")


def build_context(settings: Settings) -> Context:
    """Connect the dependencies described by ``settings``."""
    store = open_store(settings.storage_url, settings.api_url, settings.signing_secret,
                       settings.s3_endpoint_url, settings.s3_region)
    redis = aioredis.Redis.from_url(settings.redis_url, socket_timeout=10,
                                    socket_connect_timeout=5)
    http = httpx.AsyncClient(timeout=httpx.Timeout(settings.fetch_timeout_seconds),
                             follow_redirects=False)
    ctx = Context(settings, Topics(settings.topic_prefix), store,
                  Projection(redis, settings.redis_prefix), http,
                  Checkpoints(redis, settings.redis_prefix),
                  Slots(redis, settings.redis_prefix, settings.limits))
    if settings.worker_id:
        ctx.worker_id = settings.worker_id
    return ctx
