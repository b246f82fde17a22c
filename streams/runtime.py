"""The export policy on the kernel's agent runtime (``plait.agent``): what
wraps every export handler besides what every agent gets.

The kernel decodes, dead-letters poison and unexpected failures, keeps
anything from escaping the loop (docs/kafka-rules.md #3) and exits when events cannot
be sent at all (docs/kafka-rules.md #4). On top of it, per route: a time limit,
retries with backoff for transient infrastructure failures, sending the
handler's events (acked) and then its ``after`` hook. As hooks
(:class:`ExportHooks`): a failed handler ends its task FAILED (a
``PermanentError`` with its message, anything else as an internal error),
lifecycle changes reach the projection before they are sent, the tasks in
flight are tracked for heartbeats, and ``detached`` routes run in the
background.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Awaitable, Callable

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
from streams.emits import lifecycle
from streams.layout import cleanup

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
    #: the handler's events on its own topic (the next command of the same
    #: task, e.g. the FetchPage of page n+1) are not sent to the broker: the
    #: runtime handles them in line, starting the next step while the current
    #: step's events are being sent and acked (``docs/architecture.md``,
    #: "Write while fetching"). ``after`` still sees them, so checkpoints
    #: record the next command for re-drives.
    follow: bool = False


def _decode(event) -> tuple[dict, Payload]:
    return decode(event.value)


class ExportHooks(Hooks):
    """Export policy: projection first, in-flight tracking, detached routes,
    failed handlers end their task FAILED."""

    def __init__(self, ctx: Context, detached: set[str]) -> None:
        self.ctx = ctx
        #: agent names whose handlers run in the background
        self.detached_agents = detached
        #: task id -> (events of it being handled now, its spec); several agents
        #: may work on one task at once (fetching page n+1 while writing page n).
        self.inflight: dict[str, tuple[int, object]] = {}
        #: task id -> (lock serializing its detached handlers, handlers queued).
        self.detached: dict[str, tuple[asyncio.Lock, int]] = {}
        self.parallel = asyncio.Semaphore(ctx.settings.max_parallel_fetches)
        self._jobs: set[asyncio.Task] = set()

    async def before_send(self, rt: AgentRuntime, emits: list[Emit]) -> None:
        """Lifecycle events are applied to the projection first, so the next
        handler that checks a task's status sees them at once, and a task reads
        as ended only once the reports sent before its end are in (PROGRESS too:
        else the end can overtake them and the API shows a state the replay of
        ``export.lifecycle`` differs from)."""
        for e in emits:
            if isinstance(e.payload, Lifecycle):
                final = e.payload.status != "PROGRESS"
                before = await self.ctx.projection.status(e.payload.taskId) if final else None
                new = await self.ctx.projection.apply(e.payload)
                if new is not None and final:
                    metrics.task_changed(before, new)

    async def dispatch(self, rt: AgentRuntime, agent: Agent, payload,
                       run: Callable[[], Awaitable[None]]) -> None:
        """A ``detached`` route's handler runs in the background (at most
        ``max_parallel_fetches`` at once, in order per task), so one slow data
        API does not hold up the other tasks' pages. Its offset is committed
        before it finishes; if the worker dies meanwhile, the sweeper re-drives
        the task from its checkpoint (the fetched seq is recorded only after
        the page's events are acked). A partitioned task's chains
        (``FetchPage.chainId``) run in parallel, each in order."""
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
        """Detached handlers of one task run one after another, in order."""
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
        """End the task of ``payload`` FAILED: a ``PermanentError`` with its
        message, anything else as an internal error (the event is in the DLQ)."""
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
    """The export agents on one :class:`plait.agent.AgentRuntime`, plus the
    heartbeat and sweeper turns."""

    def __init__(self, app, ctx: Context, routes: list[Route] = ()) -> None:
        self.ctx = ctx
        self.hooks = ExportHooks(ctx, {self.name(r) for r in routes if r.detached})
        self.rt = AgentRuntime(app, ctx.topics, ctx.settings.partitions, ctx.worker_id,
                               [self.hooks], exit_when_lost=True)
        ctx.report = self.rt.send
        for route in routes:
            self.rt.register(self.agent(route))

    @staticmethod
    def name(route: Route) -> str:
        """Faust agent name of a route."""
        return f"plait.{route.topic}"

    def agent(self, route: Route) -> Agent:
        """The kernel agent running ``route``: decode, handler under its time
        limit with retries, send its events, then ``route.after``."""
        async def step(payload: Payload) -> list[Emit]:
            async for attempt in AsyncRetrying(stop=stop_after_attempt(route.attempts),
                                               wait=wait_exponential(multiplier=0.5, max=10),
                                               retry=retry_if_exception_type(TRANSIENT),
                                               reraise=True):
                with attempt:
                    return await asyncio.wait_for(route.handle(self.ctx, payload),
                                                  route.timeout)
            return []  # pragma: no cover (AsyncRetrying either returns or raises)

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
        """Run a ``follow`` route: step after step of one task without a broker
        round trip between them. The next step (fetching page n+1) starts as
        soon as a step returned, while its events (page n) are sent and acked
        and ``route.after`` records the checkpoint; events leave in step order.
        A step that fails ends the chain (the failure is the handler's); a
        worker that dies mid-chain is re-driven from the last checkpoint.

        Tracing and metrics as if each step were its own event: the first step
        runs in the agent's span; each later step is a span of the route's
        name (``plait.agent.SPAN_NAMES``, e.g. ``export.fetch_page``), child of
        the step that made its command, and is timed in
        ``plait_stage_duration_seconds``; a step's events carry its span as
        their ``traceparent``."""
        name = SPAN_NAMES.get(route.topic, self.name(route))

        async def traced(p: Payload, first: bool,
                         parent: str | None) -> tuple[list[Emit], str | None]:
            if first:  # already in the agent's span (plait.agent)
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
                    token = tracing.attach(step_tp)  # the step's span is their parent
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
        """Say this worker is alive, and report the tasks it is working on right
        now (RUNNING repeats refresh ``heartbeatAt``; the sweeper re-drives a
        task whose beat stopped and whose last worker is gone)."""
        await self.ctx.workers.beat(self.ctx.worker_id, self.ctx.settings.stale_after_seconds)
        # only RUNNING tasks: a WAITING task's request being admitted is in flight too, and a
        # RUNNING beat would start it in the projection without a slot
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
