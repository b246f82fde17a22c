"""What handlers need, built once per worker. Stateful members are protocols:
Redis implementations here, in-memory ones in ``streams.memory``."""
from __future__ import annotations

import asyncio
import collections
import os
import socket
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol

import httpx
import pyarrow as pa
import redis.asyncio as aioredis

from plait.agent import Emit
from plait.callers import CallerRegistry, limits_by_sys_code, load_callers
from plait.events import ExportRequested, Lifecycle
from plait.limits import CallerLimits
from plait.projection import Projection
from plait.settings import Settings
from plait.topics import Topics
from sinks.store import ObjectStore, open_store
from streams.checkpoints import Checkpoints
from streams.slots import Slots
from streams.workers import Workers

#: Pages decoded at once per worker; a row decode holds ~5x the page's bytes.
DECODE_SLOTS = 2

__all__ = ["CheckpointStore", "Context", "Emit", "GrowingFile", "Handed", "Liveness",
           "PreparedPage", "ProjectionView", "Report", "SlotStore", "build_context"]

#: (normalized batch, quality counts) kept for the page writer
Handed = tuple[pa.RecordBatch, dict[str, int]]
Report = Callable[[list[Emit]], Awaitable[None]]


class GrowingFile(Protocol):
    """A task's output file growing on this worker (``streams.files.TaskFile``)."""

    grown: bool

    def discard(self) -> None:
        """Forget the file and remove its directory; idempotent."""


class PreparedPage(Protocol):
    """A page of a task prepared ahead of its fetch step (``streams.handlers.Ahead``)."""

    seq: int
    cursor: dict[str, Any]
    future: asyncio.Future


class CheckpointStore(Protocol):
    """Per-task markers (fields: ``streams.checkpoints``)."""

    async def get(self, task_id: str) -> dict[str, str]:
        """All markers of a task, values as strings ({} when none)."""

    async def set(self, task_id: str, **fields: Any) -> None:
        """Set markers (str/int as text, other values JSON-encoded)."""

    async def field(self, task_id: str, name: str) -> str | None:
        """One marker of a task, None when unset."""

    async def fetched_seq(self, task_id: str) -> int:
        """The last seq whose fetch completed, -1 when none."""

    async def count(self, task_id: str, field: str) -> int:
        """Add one to a counter marker; returns the new count."""

    async def count_page(self, task_id: str, page: str, rows: int, caller: Any = None) -> int:
        """Count page ``page`` (``<partition>:<seq>``) of ``rows`` rows once
        for the task (and against ``caller``'s daily quota); the task's rows
        counted so far."""


class ProjectionView(Protocol):
    """The task projection as handlers use it (``plait.projection``)."""

    async def get(self, task_id: str) -> dict[str, Any] | None:
        """The task's state (camelCase keys), or None when unknown."""

    async def status(self, task_id: str) -> str | None:
        """The task's status, or None when unknown."""

    async def apply(self, event: Lifecycle) -> dict[str, Any] | None:
        """Fold a lifecycle event; the new state, or None when unchanged."""

    async def active(self) -> list[str]:
        """Ids of tasks not yet ended, oldest first."""


class SlotStore(Protocol):
    """Concurrency slots and the fair waiting queue (``streams.slots``)."""

    async def enqueue(self, req: ExportRequested) -> None:
        """Put a task at the end of its caller's queue (idempotent)."""

    async def promote(self, now: float | None = None) -> list[ExportRequested]:
        """Start the waiting tasks the limits allow; those started."""

    async def release(self, task_id: str, sys_code: str, biz_type: str, user_id: str) -> None:
        """Free a task's slots and drop it from its queue (idempotent)."""


class Liveness(Protocol):
    """Worker heartbeats and the sweeper's turn (``streams.workers``)."""

    async def beat(self, worker_id: str, ttl: float) -> None:
        """Mark ``worker_id`` alive for ``ttl`` seconds."""

    async def alive(self, worker_id: str) -> bool:
        """Whether ``worker_id`` still heartbeats."""

    async def take_turn(self, worker_id: str, interval: float) -> bool:
        """True when this worker may sweep in this interval (seconds)."""


@dataclass
class Context:
    """Dependencies of the handlers (one per worker process)."""

    settings: Settings
    topics: Topics
    store: ObjectStore
    projection: ProjectionView
    http: httpx.AsyncClient
    checkpoints: CheckpointStore
    slots: SlotStore
    workers: Liveness
    callers: CallerRegistry | None = None
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    files: dict[str, GrowingFile] = field(default_factory=dict)
    ahead: dict[str, collections.deque[PreparedPage]] = field(default_factory=dict)
    handed: dict[str, Handed] = field(default_factory=dict)
    #: bytes of the batches in ``handed`` (``streams.files.hand_off``)
    handed_bytes: int = 0
    decoding: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(DECODE_SLOTS))
    #: sends events mid-handler; None without a runtime (unit tests)
    report: Report | None = None


def build_context(settings: Settings) -> Context:
    """Connect the dependencies; caller limits from the registry unless in
    ``PLAIT_LIMITS``."""
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
    from streams.datasource import tune_http_reads

    tune_http_reads()
    http = httpx.AsyncClient(timeout=httpx.Timeout(settings.fetch_timeout_seconds),
                             follow_redirects=False)
    p = settings.redis_prefix
    ctx = Context(settings, Topics(settings.topic_prefix), store, Projection(redis, p), http,
                  Checkpoints(redis, p), Slots(redis, p, settings.limits), Workers(redis, p),
                  callers)
    if settings.worker_id:
        ctx.worker_id = settings.worker_id
    return ctx
