"""The agent runtime of both worker rooms (``streams/``, ``alerting/``): topics, sends waited on
until acked, dead letters in ``export.dlq``, agents at concurrency 1 and a per-event wrapper nothing
escapes (docs/kafka-rules.md #2, #3); a failure that cannot be reported exits unacked (#4). Policy:
:class:`Hooks` subclasses (``streams.runtime``, ``alerting.agents``)."""
from __future__ import annotations

import asyncio
import os
import traceback
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

from aiokafka.partitioner import murmur2

from plait import topics as T
from plait import metrics, tracing
from plait.events import DeadLetter, Payload, encode
from plait.logs import get_logger
from plait.patches import faust_set_current_event
from plait.records import MAX_RECORD_BYTES, cut_utf8

log = get_logger("plait.runtime")

#: Most bytes of record values one batch-handler run gets: a bound by bytes, not by event count.
MAX_RUN_BYTES = 2 * 1024 * 1024


#: Span name of each consumed topic (one span per handled event, docs/architecture.md).
SPAN_NAMES = {
    T.REQUESTS: "export.admission", T.FETCH: "export.fetch_page", T.PAGES: "export.write_shard",
    T.FINALIZE: "export.finalize", T.CONTROL: "export.cancel", T.LIFECYCLE: "export.lifecycle",
    T.DLQ: "dlq.observe",
    # the funnel's agents, by agent name (one topic may feed several agents)
    "plait.alerts.router": "alert.route", "plait.alerts.funnel": "alert.funnel_decision",
    "plait.alerts.rules": "alert.rules", "plait.alerts.dlq": "alert.dlq",
}


def fit_letter(letter: DeadLetter, key: str) -> DeadLetter:
    """``letter`` with its payload cut so envelope and ``key`` fit
    :data:`plait.records.MAX_RECORD_BYTES` (512 bytes spare for the ids :func:`plait.events.encode`
    adds)."""
    room = MAX_RECORD_BYTES - len(key.encode(errors="replace")) - 512
    while True:
        size = len(encode(letter, key))
        if size <= room or not letter.payload:
            return letter
        keep = max(0, len(letter.payload.encode(errors="replace")) * room // size - 1024)
        letter = letter.model_copy(update={"payload": cut_utf8(letter.payload, keep)})


def spread_partition(group: str, index: int, partitions: int) -> int:
    """Partition of member ``index`` of ``group`` among ``partitions``: Kafka's
    default partition of the key ``group`` (murmur2, positive, modulo the count)
    plus ``index``, modulo the count. Members 0..n-1 of one group take n
    consecutive partitions (all distinct while n <= ``partitions``); member 0
    lands where records keyed ``group`` do."""
    return ((murmur2(group.encode()) & 0x7FFFFFFF) + index) % partitions


@dataclass
class Emit:
    """One event to send: base topic name, key (task id for export topics), payload;
    ``spread`` ``(group, index)``: sent to :func:`spread_partition` of it over
    :meth:`AgentRuntime.spread_count` partitions instead of the key's hash."""

    topic: str
    key: str
    payload: Payload
    spread: tuple[str, int] | None = None


@dataclass
class Agent:
    """One Faust agent. ``handle(event, payload, attrs)``; ``decode(event) -> (attrs, payload)``,
    raising means poison (None: ``({}, event.value)``); ``keep``: dead-letter poison and failures;
    ``expected``: exception types that are outcomes (logged at info, not dead-lettered)."""

    topic: str
    name: str
    handle: Callable[[Any, Any, dict], Awaitable[None]]
    decode: Callable[[Any], tuple[dict, Any]] | None = None
    keep: bool = True
    expected: tuple[type[BaseException], ...] = ()


class Hooks:
    """Policy around the runtime, no-op here; hooks run in the given order, and one raising is a
    failure that cannot be reported."""

    def dispatch(self, rt: AgentRuntime, agent: Agent, payload: Any,
                 run: Callable[[], Awaitable[None]]) -> Awaitable[None]:
        """An awaitable running ``run()`` (one event's guarded handler); default in line."""
        return run()

    def before_handle(self, rt: AgentRuntime, agent: Agent, payload: Any) -> None:
        """Just before the handler runs."""

    def after_handle(self, rt: AgentRuntime, agent: Agent, payload: Any) -> None:
        """After the handler and any failure handling, whatever happened."""

    async def before_send(self, rt: AgentRuntime, emits: list[Emit]) -> None:
        """Before ``emits`` are sent (dead letters included)."""

    async def after_failure(self, rt: AgentRuntime, agent: Agent, event: Any, payload: Any,
                            exc: Exception) -> None:
        """After a handler raised ``exc`` (logged, dead-lettered unless ``expected`` or not
        ``keep``)."""

    async def after_batch_failure(self, rt: AgentRuntime, agent: Agent, events: list,
                                  exc: Exception) -> None:
        """After a batch handler raised ``exc``; its events are then handled one at a time."""


def set_current_event(event: Any) -> None:
    """Make ``event`` Faust's current event, so table writes of a batch go to its changelog
    partition."""
    faust_set_current_event(event)


class AgentRuntime:
    """Topics, sending, dead letters and the event loop of one worker room in a Faust ``app``.
    ``exit_when_lost``: a failure that cannot be reported exits the process (export) or is logged
    (funnel, whose state is in a changelog table)."""

    def __init__(self, app, topics: T.Topics, partitions: int, source: str,
                 hooks: Sequence[Hooks] = (), exit_when_lost: bool = True) -> None:
        self.app = app
        self.names = topics
        self.partitions = partitions
        self.source = source
        self.hooks = list(hooks)
        self.exit_when_lost = exit_when_lost
        self._topics: dict[str, Any] = {}

    def topic(self, base: str):
        """The Faust topic of a base topic name (prefixed, raw bytes)."""
        if base not in self._topics:
            self._topics[base] = self.app.topic(
                self.names.name(base), key_serializer="raw", value_serializer="raw",
                partitions=self.partitions)
        return self._topics[base]

    async def send(self, emits: list[Emit], traceparent: str | None = None) -> None:
        """Send ``emits`` as CloudEvents and wait until each is acked; raises what the producer
        raised."""
        for hook in self.hooks:
            await hook.before_send(self, emits)
        traceparent = tracing.current_traceparent() or traceparent
        headers = {tracing.TRACEPARENT: traceparent.encode()} if traceparent else None
        extra = {"headers": headers} if headers else {}
        futures = []
        for e in emits:
            place = {} if e.spread is None else {
                "partition": spread_partition(*e.spread, await self.spread_count(e.topic))}
            futures.append(await self.topic(e.topic).send(
                key=e.key.encode(), value=encode(e.payload, e.key, self.source, traceparent),
                **place, **extra))
        await asyncio.gather(*futures)

    async def spread_count(self, base: str) -> int:
        """Partitions :attr:`Emit.spread` spreads over on ``base``: ``partitions``
        (``PLAIT_PARTITIONS``, what topics are created with), fewer when the topic
        has fewer (the producer's metadata). Partitions added past it are not
        used, so a group's mapping holds while the topic grows
        (docs/kafka-rules.md #8)."""
        known = await self.app.producer._ensure_producer().partitions_for(self.names.name(base))
        return min(self.partitions, len(known))

    async def dead_letter(self, event, error: BaseException, detail: str | None = None) -> None:
        """Keep ``event`` in ``export.dlq`` with the error (``detail`` instead of ``str(error)``).
        """
        msg = event.message
        key = event.key.decode(errors="replace") if isinstance(event.key, bytes) else event.key
        value = event.value if isinstance(event.value, bytes) else str(event.value).encode()
        letter = DeadLetter(topic=msg.topic, partition=msg.partition, offset=msg.offset,
                            key=(key or "")[:1024] or None, error=(detail or str(error))[:2000],
                            errorClass=type(error).__name__,
                            payload=value[:100_000].decode(errors="replace"))
        await self.keep(letter, key or "")

    async def keep(self, letter: DeadLetter, key: str) -> None:
        """Send ``letter`` to ``export.dlq`` keyed by ``key`` (cut to 1 KiB), within
        MAX_RECORD_BYTES."""
        key = cut_utf8(key, 1024)
        await self.send([Emit(T.DLQ, key, fit_letter(letter, key))])

    def register(self, agent: Agent) -> None:
        """Add ``agent`` to the app at concurrency 1 (docs/kafka-rules.md #2)."""
        async def run(stream):
            async for event in stream.events():
                await self.process(agent, event)

        run.__name__ = run.__qualname__ = agent.name.replace(".", "_")
        self.app.agent(self.topic(agent.topic), name=agent.name, concurrency=1)(run)

    def register_batch(self, agent: Agent,
                       handle_batch: Callable[[list[tuple[Any, dict, Any]]], Awaitable[None]],
                       size: int, within: float) -> None:
        """Add ``agent`` at concurrency 1, taking up to ``size`` events (or what came within
        ``within`` s), acked after handling. ``handle_batch([(event, attrs, payload)])`` gets runs
        of at most :data:`MAX_RUN_BYTES` of record values, each decoded when its turn comes
        (docs/kafka-rules.md #10); when it raises, the run's events are handled one at a time."""
        async def run(stream):
            async for events in stream.take_events(size, within):
                await self.process_batch(agent, handle_batch, events)

        run.__name__ = run.__qualname__ = agent.name.replace(".", "_")
        self.app.agent(self.topic(agent.topic), name=agent.name, concurrency=1)(run)

    async def process_batch(self, agent: Agent, handle_batch, events: list) -> None:
        """Handle a batch run by run (:meth:`register_batch`); never raises."""
        run, size = [], 0
        for event in events:
            run.append(event)
            value = event.value
            size += len(value) if isinstance(value, (bytes, bytearray, str)) else 0
            if size >= MAX_RUN_BYTES:
                await self._process_run(agent, handle_batch, run)
                run, size = [], 0
        if run:
            await self._process_run(agent, handle_batch, run)

    async def _process_run(self, agent: Agent, handle_batch, events: list) -> None:
        """Decode ``events`` for ``handle_batch``, one at a time when it fails; never raises."""
        try:
            good = []
            for event in events:
                try:
                    attrs, payload = agent.decode(event) if agent.decode else ({}, event.value)
                except Exception as exc:
                    if agent.keep:
                        log.warning("poison event", agent=agent.name, error=str(exc))
                        await self.dead_letter(event, exc)
                    continue
                good.append((event, attrs, payload))
            if not good:
                return
            try:
                await handle_batch(good)
                return
            except Exception as exc:
                log.exception("batch handler failed; handling its events one at a time",
                              agent=agent.name, events=len(good))
                for hook in self.hooks:
                    await hook.after_batch_failure(self, agent, [e for e, _a, _p in good], exc)
            for event, _attrs, _payload in good:
                await self.process(agent, event)
        except Exception:
            self._lost(agent)

    async def process(self, agent: Agent, event) -> None:
        """Handle one event; never raises (docs/kafka-rules.md #3), may exit (``exit_when_lost``).
        """
        try:
            try:
                attrs, payload = agent.decode(event) if agent.decode else ({}, event.value)
            except Exception as exc:  # PoisonError, or anything odd in the bytes
                if agent.keep:
                    log.warning("poison event", agent=agent.name, error=str(exc))
                    await self.dead_letter(event, exc)
                return
            await self.process_decoded(agent, event, attrs, payload)
        except Exception:
            self._lost(agent)

    async def process_decoded(self, agent: Agent, event, attrs: dict, payload: Any) -> None:
        """:meth:`process` of an event already decoded to ``(attrs, payload)``; never raises."""
        try:
            def run() -> Awaitable[None]:
                return self._guarded(agent, event, attrs, payload)

            for hook in reversed(self.hooks):
                run = (lambda h, inner: lambda: h.dispatch(self, agent, payload, inner))(hook, run)
            await run()
        except Exception:
            self._lost(agent)

    async def _guarded(self, agent: Agent, event, attrs: dict, payload: Any) -> None:
        """Handler, failure report and hooks in a span child of the event's ``traceparent``; never
        raises."""
        msg = getattr(event, "message", None)
        parent = (tracing.from_headers(getattr(msg, "headers", None))
                  or (attrs.get("traceparent") if isinstance(attrs, dict) else None))
        with tracing.span(SPAN_NAMES.get(agent.name) or SPAN_NAMES.get(agent.topic, agent.name), parent,
                          **{"plait.task_id": getattr(payload, "taskId", None),
                             "plait.seq": getattr(payload, "seq", None),
                             "messaging.destination.name": getattr(msg, "topic", None)}):
            with metrics.StageTimer(SPAN_NAMES.get(agent.name)
                                    or SPAN_NAMES.get(agent.topic, agent.name)):
                await self._guarded_inner(agent, event, attrs, payload)

    async def _guarded_inner(self, agent: Agent, event, attrs: dict, payload: Any) -> None:
        try:
            for hook in self.hooks:
                hook.before_handle(self, agent, payload)
            try:
                await agent.handle(event, payload, attrs)
            except Exception as exc:
                await self._failed(agent, event, payload, exc)
            finally:
                for hook in self.hooks:
                    hook.after_handle(self, agent, payload)
        except Exception:  # the failure could not even be reported
            self._lost(agent)

    async def report_failure(self, agent: Agent, event, payload: Any, exc: Exception) -> None:
        """``exc`` of a handler that took ``event`` reported as :meth:`process` reports it (a
        dead letter, the hooks' ``after_failure``); never raises, may exit (``exit_when_lost``)
        when even that fails."""
        try:
            await self._failed(agent, event, payload, exc)
        except Exception:
            self._lost(agent)

    async def _failed(self, agent: Agent, event, payload: Any, exc: Exception) -> None:
        if isinstance(exc, agent.expected):
            log.info("handler failed", agent=agent.name, error=str(exc))
        else:
            log.exception("handler failed", agent=agent.name)
            if agent.keep:
                await self.dead_letter(event, exc, traceback.format_exc(limit=5))
        for hook in self.hooks:
            await hook.after_failure(self, agent, event, payload, exc)

    def _lost(self, agent: Agent) -> None:
        if self.exit_when_lost:
            self.fatal()
        log.exception("cannot report a failed event; moving on", agent=agent.name)

    @staticmethod
    def fatal() -> None:
        """Exit at once (no ack, no shutdown): the partition is redelivered."""
        log.critical("cannot emit events; exiting so the partition is redelivered",
                     exc_info=True)
        os._exit(70)
