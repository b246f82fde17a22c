"""What wraps every handler: decode, time limit, retries, error routing, sending.

Nothing escapes ``process`` (PITFALLS.md #3: an exception leaving ``async for``
acks the event). Poison goes to ``export.dlq``; a permanent failure ends the
task FAILED (and is kept in the DLQ when it was unexpected); transient
infrastructure failures are retried with backoff first. If events cannot be
sent at all, the worker exits without acking, so the partition is redelivered
to a healthy worker (PITFALLS.md #4).
"""
from __future__ import annotations

import asyncio
import os
import traceback
from dataclasses import dataclass
from typing import Awaitable, Callable

import redis.exceptions
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from plait import topics as T
from plait.errors import PermanentError, RetryableError
from plait.events import DeadLetter, Lifecycle, Payload, decode, encode
from plait.logs import get_logger
from streams.context import Context, Emit
from streams.finalize import cleanup
from streams.handlers import lifecycle
from streams.sweeper import worker_key

log = get_logger("plait.runtime")

#: Failures worth retrying in place (infrastructure blips), beside RetryableError.
TRANSIENT = (RetryableError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
             ConnectionError, TimeoutError)


@dataclass
class Route:
    """One agent: its input topic, handler, optional hook run once the handler's
    events are acked (``after(ctx, payload, emits)``), time limit (seconds) and
    attempts for transient failures."""

    topic: str
    handle: Callable[[Context, Payload], Awaitable[list[Emit]]]
    after: Callable[..., Awaitable[None]] | None = None
    timeout: float = 300.0
    attempts: int = 3
    detached: bool = False


class Runtime:
    """Sends events through the Faust app's topics and runs routes safely."""

    def __init__(self, app, ctx: Context) -> None:
        self.app = app
        self.ctx = ctx
        self._topics: dict[str, object] = {}
        #: task id -> (events of it being handled now, its spec); several agents
        #: may work on one task at once (fetching page n+1 while writing page n).
        self.inflight: dict[str, tuple[int, object]] = {}
        #: task id -> (lock serializing its detached handlers, handlers queued).
        self.detached: dict[str, tuple[asyncio.Lock, int]] = {}
        self.parallel = asyncio.Semaphore(ctx.settings.max_parallel_fetches)
        self._jobs: set[asyncio.Task] = set()

    def topic(self, base: str):
        """The Faust topic of a base topic name (prefixed, raw bytes)."""
        if base not in self._topics:
            self._topics[base] = self.app.topic(
                self.ctx.topics.name(base), key_serializer="raw", value_serializer="raw",
                partitions=self.ctx.settings.partitions)
        return self._topics[base]

    async def send(self, emits: list[Emit], traceparent: str | None = None) -> None:
        """Send events and wait until the broker acked each one. Lifecycle
        events are applied to the projection first, so the next handler that
        checks a task's status sees them at once, and a task reads as ended only
        once the reports sent before its end are in (PROGRESS too: else the end
        can overtake them and the API shows a state the replay differs from)."""
        for e in emits:
            if isinstance(e.payload, Lifecycle):
                await self.ctx.projection.apply(e.payload)
        futures = [await self.topic(e.topic).send(
            key=e.key.encode(), value=encode(e.payload, e.key, self.ctx.worker_id, traceparent))
            for e in emits]
        await asyncio.gather(*futures)

    async def dead_letter(self, event, error: BaseException) -> None:
        """Keep an unprocessable event in ``export.dlq`` with the error."""
        msg = event.message
        key = event.key.decode(errors="replace") if event.key else None
        value = event.value if isinstance(event.value, bytes) else str(event.value).encode()
        letter = DeadLetter(topic=msg.topic, partition=msg.partition, offset=msg.offset, key=key,
                            error=str(error)[:2000], errorClass=type(error).__name__,
                            payload=value.decode(errors="replace")[:100_000])
        await self.send([Emit(T.DLQ, key or "", letter)])

    async def fail_task(self, payload: Payload, error: BaseException) -> None:
        """End the task of ``payload`` FAILED with the error's message."""
        spec = getattr(payload, "spec", None)
        task_id = getattr(payload, "taskId", None)
        if spec is None or task_id is None:
            return
        await self.send([lifecycle(spec, task_id, "FAILED", errorMessage=str(error)[:2000],
                                   workerId=self.ctx.worker_id)])
        await cleanup(self.ctx, task_id)

    async def process(self, route: Route, event) -> None:
        """Handle one Kafka event; never raises (but exits the process when
        the broker cannot take events at all).

        A ``detached`` route's handler runs in the background (at most
        ``max_parallel_fetches`` at once, in order per task), so one slow data API
        does not hold up the other tasks' pages. Its offset is committed before
        it finishes; if the worker dies meanwhile, the sweeper re-drives the
        task from its checkpoint (the fetched seq is recorded only after the
        page's events are acked).
        """
        try:
            try:
                attrs, payload = decode(event.value)
            except Exception as exc:  # PoisonError, or anything odd in the bytes
                log.warning("poison event", topic=route.topic, error=str(exc))
                await self.dead_letter(event, exc)
                return
            task_id = getattr(payload, "taskId", None)
            if not route.detached or not task_id:
                await self._handle(route, event, attrs, payload)
                return
            await self.parallel.acquire()
            lock, users = self.detached.get(task_id, (asyncio.Lock(), 0))
            self.detached[task_id] = (lock, users + 1)
            job = asyncio.create_task(self._serial(lock, route, event, attrs, payload))
            self._jobs.add(job)
            job.add_done_callback(lambda j, t=task_id: self._done(j, t))
        except Exception:
            self._fatal()

    async def _serial(self, lock: asyncio.Lock, route: Route, event, attrs: dict,
                      payload: Payload) -> None:
        """Detached handlers of one task run one after another, in order."""
        async with lock:
            await self._handle(route, event, attrs, payload)

    def _done(self, job: asyncio.Task, task_id: str) -> None:
        self._jobs.discard(job)
        self.parallel.release()
        lock, users = self.detached[task_id]
        if users > 1:
            self.detached[task_id] = (lock, users - 1)
        else:
            del self.detached[task_id]

    @staticmethod
    def _fatal() -> None:
        log.critical("cannot emit events; exiting so the partition is redelivered",
                     exc_info=True)
        os._exit(70)

    async def _handle(self, route: Route, event, attrs: dict, payload: Payload) -> None:
        task_id, spec = getattr(payload, "taskId", None), getattr(payload, "spec", None)
        tracked = bool(task_id) and spec is not None
        if tracked:
            self.inflight[task_id] = (self.inflight.get(task_id, (0, spec))[0] + 1, spec)
        try:
            try:
                await self._run(route, attrs, payload)
            except PermanentError as exc:
                log.info("task failed", topic=route.topic, task=task_id, error=str(exc))
                await self.fail_task(payload, exc)
            except Exception as exc:  # a bug or exhausted retries: keep the evidence
                log.exception("handler failed", topic=route.topic)
                await self.dead_letter(event, RuntimeError(traceback.format_exc(limit=5)))
                await self.fail_task(payload, PermanentError(f"internal error: {exc}"))
        except Exception:  # the failure could not even be reported
            self._fatal()
        finally:
            if tracked:
                n, spec = self.inflight[task_id]
                if n > 1:
                    self.inflight[task_id] = (n - 1, spec)
                else:
                    del self.inflight[task_id]

    async def _run(self, route: Route, attrs: dict, payload: Payload) -> None:
        async for attempt in AsyncRetrying(stop=stop_after_attempt(route.attempts),
                                           wait=wait_exponential(multiplier=0.5, max=10),
                                           retry=retry_if_exception_type(TRANSIENT),
                                           reraise=True):
            with attempt:
                emits = await asyncio.wait_for(route.handle(self.ctx, payload), route.timeout)
        if emits:
            await self.send(emits, attrs.get("traceparent"))
            if route.after is not None:
                await route.after(self.ctx, payload, emits)

    async def heartbeat(self) -> None:
        """Say this worker is alive, and report the tasks it is working on right
        now (RUNNING repeats refresh ``heartbeatAt``; the sweeper re-drives a
        task whose beat stopped and whose last worker is gone)."""
        await self.ctx.projection.redis.set(
            worker_key(self.ctx.settings.redis_prefix, self.ctx.worker_id), 1,
            ex=max(1, int(self.ctx.settings.stale_after_seconds)))
        emits = [lifecycle(spec, task_id, "RUNNING", workerId=self.ctx.worker_id)
                 for task_id, (_, spec) in list(self.inflight.items())]
        if emits:
            await self.send(emits)

    async def sweep(self) -> None:
        """One sweeper turn, when this worker holds the lock for the interval."""
        from streams.sweeper import sweep, take_turn

        if not await take_turn(self.ctx, self.ctx.settings.sweep_interval_seconds):
            return
        emits, ended = await sweep(self.ctx)
        if emits:
            await self.send(emits)
        for task_id in ended:
            await cleanup(self.ctx, task_id)
