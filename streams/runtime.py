"""The export policy on the kernel's agent runtime (``plait.agent``, which
handles docs/kafka-rules.md #3, #4): per route a time limit, retries of
transient failures, acked sends, an ``after`` hook; a failed handler ends its
task FAILED."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from typing import Any, Awaitable, Callable

import redis.exceptions
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from plait import tracing
from plait.agent import SPAN_NAMES, Agent, AgentRuntime, Emit, Hooks
from plait.errors import PermanentError, RetryableError
from plait.events import Lifecycle, Payload, decode
from plait import metrics
from plait.lifecycle import TERMINAL
from plait.logs import get_logger
from streams.context import Context
from streams.emits import lifecycle, record
from streams.layout import cleanup

log = get_logger("plait.runtime")

#: Failures worth retrying in place (infrastructure blips), beside RetryableError.
TRANSIENT = (RetryableError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
             ConnectionError, TimeoutError)


@dataclass
class Route:
    """One agent: topic, handler, ``after`` hook (once acked), time limit (s)."""

    topic: str
    handle: Callable[[Context, Payload], Awaitable[list[Emit]]]
    after: Callable[..., Awaitable[None]] | None = None
    timeout: float = 300.0
    attempts: int = 3
    detached: bool = False
    #: events on its own topic are handled in line, not sent (:meth:`Runtime.chain`)
    follow: bool = False
    #: ``batch(ctx, payloads) -> emits`` takes a run of consecutive events of one ``run_key``
    #: (None: the event is handled alone by ``handle``) at once (:meth:`Runtime.handle_runs`)
    batch: Callable[[Context, list[Payload]], Awaitable[list[Emit]]] | None = None
    run_key: Callable[[Payload], str | None] = lambda payload: None


#: Events a ``batch`` route takes at once, and how long it waits (s) for more than one.
RUN_EVENTS, RUN_WITHIN = 64, 0.005


def _run_key(route: Route, payload: Payload) -> str | None:
    """``route.run_key(payload)``; None (handled alone) when it cannot say."""
    try:
        return route.run_key(payload)
    except Exception:
        return None


def _decode(event) -> tuple[dict, Payload]:
    return decode(event.value)


class ExportHooks(Hooks):
    """Export policy: projection first, in-flight tracking, detached routes,
    failed handlers end their task FAILED."""

    def __init__(self, ctx: Context, detached: set[str]) -> None:
        self.ctx = ctx
        self.detached_agents = detached
        #: task id -> (events of it being handled now, its spec)
        self.inflight: dict[str, tuple[int, object]] = {}
        self.detached: dict[str, tuple[asyncio.Lock, int]] = {}
        self.parallel = asyncio.Semaphore(ctx.settings.max_parallel_fetches)
        self._jobs: set[asyncio.Task] = set()

    async def before_send(self, rt: AgentRuntime, emits: list[Emit]) -> None:
        """Apply lifecycle events to the projection before sending, in order."""
        for e in emits:
            if isinstance(e.payload, Lifecycle):
                await record(self.ctx, e.payload)

    async def dispatch(self, rt: AgentRuntime, agent: Agent, payload,
                       run: Callable[[], Awaitable[None]]) -> None:
        """Run a ``detached`` route's handler in the background (at most
        ``max_parallel_fetches``, in order per task; a partitioned task's chains, ``chainId``, in
        parallel): a slow data API holds up no other task. A lost worker's task is re-driven from
        its checkpoint."""
        task_id = getattr(payload, "chainId", None) or getattr(payload, "taskId", None)
        if agent.name not in self.detached_agents or not task_id:
            await run()
            return
        await self.parallel.acquire()
        lock, users = self.detached.get(task_id, (asyncio.Lock(), 0))
        self.detached[task_id] = (lock, users + 1)
        job = asyncio.create_task(self._serial(lock, run))
        self._jobs.add(job)
        job.add_done_callback(lambda j, t=task_id: self._done(j, t))

    @staticmethod
    async def _serial(lock: asyncio.Lock, run: Callable[[], Awaitable[None]]) -> None:
        async with lock:
            await run()

    def _done(self, job: asyncio.Task, task_id: str) -> None:
        self._jobs.discard(job)
        self.parallel.release()
        lock, users = self.detached[task_id]
        if users > 1:
            self.detached[task_id] = (lock, users - 1)
        else:
            del self.detached[task_id]

    def before_handle(self, rt: AgentRuntime, agent: Agent, payload) -> None:
        task_id, spec = getattr(payload, "taskId", None), getattr(payload, "spec", None)
        if task_id and spec is not None:
            self.inflight[task_id] = (self.inflight.get(task_id, (0, spec))[0] + 1, spec)

    def after_handle(self, rt: AgentRuntime, agent: Agent, payload) -> None:
        task_id, spec = getattr(payload, "taskId", None), getattr(payload, "spec", None)
        if task_id and spec is not None:
            n, spec = self.inflight[task_id]
            if n > 1:
                self.inflight[task_id] = (n - 1, spec)
            else:
                del self.inflight[task_id]

    async def after_failure(self, rt: AgentRuntime, agent: Agent, event, payload,
                            exc: Exception) -> None:
        """End the task FAILED (non-``PermanentError``: "internal error")."""
        if not isinstance(exc, PermanentError):
            exc = PermanentError(f"internal error: {exc}")
        spec = getattr(payload, "spec", None)
        task_id = getattr(payload, "taskId", None)
        if spec is None or task_id is None:
            return
        await rt.send([lifecycle(spec, task_id, "FAILED", errorMessage=str(exc)[:2000],
                                 workerId=self.ctx.worker_id)])
        await cleanup(self.ctx, task_id)


class Runtime:
    """The export agents, heartbeat and sweeper turns."""

    def __init__(self, app, ctx: Context, routes: list[Route] = ()) -> None:
        self.ctx = ctx
        self.hooks = ExportHooks(ctx, {self.name(r) for r in routes if r.detached})
        self.rt = AgentRuntime(app, ctx.topics, ctx.settings.partitions, ctx.worker_id,
                               [self.hooks], exit_when_lost=True)
        ctx.report = self.rt.send
        for route in routes:
            agent = self.agent(route)
            if route.batch is None:
                self.rt.register(agent)
            else:
                self.rt.register_batch(agent, partial(self.handle_runs, route, agent),
                                       RUN_EVENTS, RUN_WITHIN)

    @staticmethod
    def name(route: Route) -> str:
        """Faust agent name of a route."""
        return f"plait.{route.topic}"

    @staticmethod
    async def attempts(route: Route, call: Callable[[], Awaitable[list[Emit]]]) -> list[Emit]:
        """``call()`` within the route's time limit, retried on :data:`TRANSIENT` failures."""
        async for attempt in AsyncRetrying(stop=stop_after_attempt(route.attempts),
                                           wait=wait_exponential(multiplier=0.5, max=10),
                                           retry=retry_if_exception_type(TRANSIENT),
                                           reraise=True):
            with attempt:
                return await asyncio.wait_for(call(), route.timeout)
        return []  # pragma: no cover (AsyncRetrying either returns or raises)

    async def handle_runs(self, route: Route, agent: Agent,
                          events: list[tuple[Any, dict, Payload]]) -> None:
        """Hand each run of two or more consecutive ``events`` of one ``route.run_key`` to
        ``route.batch``, the others to the route's handler one at a time. A run whose batch
        fails is handled again one event at a time, so a failure ends its task as the event
        alone would (every export handler takes an event again without doubling it). Never
        raises."""
        keys = [_run_key(route, payload) for _e, _a, payload in events]
        i = 0
        while i < len(events):
            key, j = keys[i], i + 1
            while key is not None and j < len(events) and keys[j] == key:
                j += 1
            run, i = events[i:j], j
            if len(run) > 1:
                try:
                    await self._run(route, agent, run)
                    continue
                except Exception as exc:
                    log.warning("a run of events failed; taking them one at a time",
                                agent=agent.name, events=len(run),
                                error=f"{type(exc).__name__}: {exc}")
            for event, attrs, payload in run:
                await self.rt.process_decoded(agent, event, attrs, payload)

    async def _run(self, route: Route, agent: Agent, run: list[tuple[Any, dict, Payload]]) -> None:
        """``route.batch`` of a run's payloads in one span (raises as it does), its events
        sent, then ``after`` with the run's last payload: a failure there is reported for the
        run's last event as the route's handler reports one. The in-flight hooks see each
        event."""
        payloads = [p for _e, _a, p in run]
        parent = run[0][1].get("traceparent") if isinstance(run[0][1], dict) else None
        name = SPAN_NAMES.get(route.topic, self.name(route))
        for payload in payloads:
            self.hooks.before_handle(self.rt, agent, payload)
        try:
            with tracing.span(name, parent, **{"plait.task_id": getattr(payloads[-1], "taskId", None),
                                               "plait.seq": getattr(payloads[-1], "seq", None),
                                               "plait.events": len(payloads)}), \
                    metrics.StageTimer(name):
                emits = await self.attempts(route, lambda: route.batch(self.ctx, payloads))
                try:
                    if emits:
                        await self.rt.send(emits, tracing.current_traceparent() or parent)
                        if route.after is not None:
                            await route.after(self.ctx, payloads[-1], emits)
                except Exception as exc:
                    await self.rt.report_failure(agent, run[-1][0], payloads[-1], exc)
        finally:
            for payload in payloads:
                self.hooks.after_handle(self.rt, agent, payload)

    def agent(self, route: Route) -> Agent:
        async def step(payload: Payload) -> list[Emit]:
            return await self.attempts(route, lambda: route.handle(self.ctx, payload))

        async def handle(event, payload: Payload, attrs: dict) -> None:
            if route.follow:
                await self.chain(route, step, payload, attrs.get("traceparent"))
                return
            emits = await step(payload)
            if emits:
                await self.rt.send(emits, attrs.get("traceparent"))
                if route.after is not None:
                    await route.after(self.ctx, payload, emits)

        return Agent(route.topic, self.name(route), handle, _decode,
                     expected=(PermanentError,))

    async def chain(self, route: Route, step: Callable[[Payload], Awaitable[list[Emit]]],
                    payload: Payload, traceparent: str | None) -> None:
        """Run a ``follow`` route's steps without a broker round trip: the next
        step starts while this step's events are sent (docs/architecture.md,
        "Write while fetching"). Each later step gets its own span and stage
        timer, as if it were its own event."""
        name = SPAN_NAMES.get(route.topic, self.name(route))

        async def traced(p: Payload, first: bool,
                         parent: str | None) -> tuple[list[Emit], str | None]:
            if first:
                return await step(p), tracing.current_traceparent()
            with tracing.span(name, parent, **{"plait.task_id": getattr(p, "taskId", None),
                                               "plait.seq": getattr(p, "seq", None),
                                               "plait.followed": True}), \
                    metrics.StageTimer(name):
                return await step(p), tracing.current_traceparent()

        current: asyncio.Task = asyncio.ensure_future(traced(payload, True, None))
        try:
            while True:
                emits, step_tp = await current
                own = [e for e in emits if e.topic == route.topic]
                nxt = own[-1].payload if own else None
                if nxt is not None:
                    current = asyncio.ensure_future(traced(nxt, False, step_tp))
                send = [e for e in emits if e.topic != route.topic]
                if send:
                    token = tracing.attach(step_tp)
                    try:
                        await self.rt.send(send, step_tp or traceparent)
                    finally:
                        tracing.detach(token)
                if emits and route.after is not None:
                    await route.after(self.ctx, payload, emits)
                if nxt is None:
                    return
                payload = nxt
        finally:
            if not current.done():
                current.cancel()
                try:
                    await current
                except BaseException:
                    pass

    @property
    def inflight(self) -> dict[str, tuple[int, object]]:
        """Task id -> (events of it being handled now, its spec)."""
        return self.hooks.inflight

    async def send(self, emits: list[Emit]) -> None:
        """Send events through the runtime (projection first, acked)."""
        await self.rt.send(emits)

    async def heartbeat(self) -> None:
        """Beat, and repeat RUNNING for tasks in flight (refreshes ``heartbeatAt``)."""
        await self.ctx.workers.beat(self.ctx.worker_id, self.ctx.settings.stale_after_seconds)
        # a RUNNING beat for a WAITING task would start it without a slot
        emits = [lifecycle(spec, task_id, "RUNNING", workerId=self.ctx.worker_id)
                 for task_id, (_, spec) in list(self.inflight.items())
                 if await self.ctx.projection.status(task_id) == "RUNNING"]
        if emits:
            await self.send(emits)
        for task_id in list(self.ctx.files):  # growing files of tasks that ended elsewhere
            if await self.ctx.projection.status(task_id) in TERMINAL:
                tf = self.ctx.files.pop(task_id, None)
                if tf is not None:
                    await asyncio.to_thread(tf.discard)

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
