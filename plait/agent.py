"""The agent runtime both worker rooms run on: the export agents (``streams/``)
and the alert funnel (``alerting/``).

It owns what every agent needs the same way:

- a topic factory (prefixed names, raw bytes, the deployment's partitions);
- sending events and waiting until the broker acked each one;
- dead letters: an event that cannot be decoded (poison) or whose handler
  failed unexpectedly is kept in ``export.dlq`` with the error;
- the per-event wrapper: nothing escapes an agent's ``async for``
  (docs/kafka-rules.md #3: an exception leaving the loop acks the event);
- agents at concurrency 1 (docs/kafka-rules.md #2);
- ``_fatal``: when a failure cannot even be reported (the broker takes no
  events), the process exits without acking, so the partition is redelivered
  to a healthy worker (docs/kafka-rules.md #4).

Policy lives in :class:`Hooks` subclasses, a base class of no-op hooks in the
manner of dramatiq's middleware: the export policy (fail the task, in-flight
tracking, detached routes; ``streams.runtime``) and the funnel policy
(``alerting.agents``) each override what they need.
"""
from __future__ import annotations

import asyncio
import os
import traceback
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

from plait import topics as T
from plait import metrics, tracing
from plait.events import DeadLetter, Payload, encode
from plait.logs import get_logger
from plait.patches import faust_set_current_event
from plait.records import MAX_RECORD_BYTES, cut_utf8

log = get_logger("plait.runtime")

#: Most bytes of record values a batch handler gets in one run
#: (:meth:`AgentRuntime.register_batch`). 1,000 ``alerts.funnel`` commands of
#: 256 KB would be ~1.1 GB of decoded alerts; a run of 2 MiB is ~9,000 alerts
#: (~230 bytes each on the wire, a storm's alerts).
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
    """``letter`` with its payload cut until its envelope (JSON escapes
    included) and ``key`` make a record within
    :data:`plait.records.MAX_RECORD_BYTES` (a few hundred bytes spare for
    the ids and traceparent :func:`plait.events.encode` adds)."""
    room = MAX_RECORD_BYTES - len(key.encode(errors="replace")) - 512
    while True:
        size = len(encode(letter, key))
        if size <= room or not letter.payload:
            return letter
        keep = max(0, len(letter.payload.encode(errors="replace")) * room // size - 1024)
        letter = letter.model_copy(update={"payload": cut_utf8(letter.payload, keep)})


@dataclass
class Emit:
    """One event a handler wants sent: base topic name (``plait.topics``),
    key (task id for export topics), payload (CloudEvents-encoded on send)."""

    topic: str
    key: str
    payload: Payload


@dataclass
class Agent:
    """One Faust agent run by :class:`AgentRuntime`.

    Attributes:
        topic: base topic name it consumes (prefix applied by the runtime).
        name: Faust agent name (``plait.…``).
        handle: ``handle(event, payload, attrs)``; ``event`` is the Faust
            event, ``payload``/``attrs`` what ``decode`` returned.
        decode: ``decode(event) -> (attrs, payload)``; raising means poison.
            None: ``({}, event.value)``.
        keep: keep poison and failed events in ``export.dlq`` (False for an
            agent whose events another agent dead-letters).
        expected: failures that are outcomes rather than evidence (export:
            ``PermanentError`` ends the task FAILED): logged at info, never
            dead-lettered; the hooks still see them.
    """

    topic: str
    name: str
    handle: Callable[[Any, Any, dict], Awaitable[None]]
    decode: Callable[[Any], tuple[dict, Any]] | None = None
    keep: bool = True
    expected: tuple[type[BaseException], ...] = ()


class Hooks:
    """Policy around the runtime; every hook here does nothing. Subclass and
    override (dramatiq's middleware is the model). Hooks run in the order
    given to :class:`AgentRuntime`; an exception from a hook counts as a
    failure that cannot be reported (see ``AgentRuntime.exit_when_lost``)."""

    def dispatch(self, rt: AgentRuntime, agent: Agent, payload: Any,
                 run: Callable[[], Awaitable[None]]) -> Awaitable[None]:
        """Run ``run()`` (the guarded handler of one event); return an
        awaitable the agent loop waits for. Default: run it in line."""
        return run()

    def before_handle(self, rt: AgentRuntime, agent: Agent, payload: Any) -> None:
        """Just before the handler runs."""

    def after_handle(self, rt: AgentRuntime, agent: Agent, payload: Any) -> None:
        """After the handler and any failure handling, whatever happened."""

    async def before_send(self, rt: AgentRuntime, emits: list[Emit]) -> None:
        """Before ``emits`` are sent (dead letters included)."""

    async def after_failure(self, rt: AgentRuntime, agent: Agent, event: Any, payload: Any,
                            exc: Exception) -> None:
        """After a handler raised ``exc`` (logged, and dead-lettered unless
        ``expected`` or the agent does not ``keep``)."""

    async def after_batch_failure(self, rt: AgentRuntime, agent: Agent, events: list,
                                  exc: Exception) -> None:
        """After a batch handler raised ``exc``; the runtime then handles the
        batch's events one at a time with ``agent.handle``."""


def set_current_event(event: Any) -> None:
    """Make ``event`` Faust's current event in this task, so table writes made
    while handling a batch go to the changelog partition of ``event``'s
    partition (Faust derives it from the current event, which
    ``take_events`` leaves unset; :func:`plait.patches.faust_set_current_event`)."""
    faust_set_current_event(event)


class AgentRuntime:
    """Topics, sending, dead letters and the never-escaping event loop of one
    worker room (the export agents, or the alert funnel) in a Faust ``app``.

    Args:
        app: the Faust app.
        topics: resolved topic names (prefix).
        partitions: partition count of every topic.
        source: CloudEvents ``source`` of events sent (the worker id).
        hooks: policy, in order.
        exit_when_lost: a failure that cannot be reported (the dead letter or
            a hook raised) exits the process (True, export: its events must
            not vanish) or is logged and the loop moves on (False, funnel: its
            state is in a changelog table and it dead-letters best-effort).
    """

    def __init__(self, app, topics: T.Topics, partitions: int, source: str,
                 hooks: Sequence[Hooks] = (), exit_when_lost: bool = True) -> None:
        self.app = app
        self.names = topics
        self.partitions = partitions
        self.source = source
        self.hooks = list(hooks)
        self.exit_when_lost = exit_when_lost
        self._topics: dict[str, Any] = {}

    # ---------------------------------------------------------- topics, sending
    def topic(self, base: str):
        """The Faust topic of a base topic name (prefixed, raw bytes)."""
        if base not in self._topics:
            self._topics[base] = self.app.topic(
                self.names.name(base), key_serializer="raw", value_serializer="raw",
                partitions=self.partitions)
        return self._topics[base]

    async def send(self, emits: list[Emit], traceparent: str | None = None) -> None:
        """Send events (CloudEvents envelopes) and wait until the broker acked
        each one. Raises what the producer raised."""
        for hook in self.hooks:
            await hook.before_send(self, emits)
        # the handler's span, when tracing is on, is the parent of what it sends
        # (W3C traceparent in the envelope and in the Kafka record header)
        traceparent = tracing.current_traceparent() or traceparent
        headers = {tracing.TRACEPARENT: traceparent.encode()} if traceparent else None
        extra = {"headers": headers} if headers else {}
        futures = [await self.topic(e.topic).send(
            key=e.key.encode(), value=encode(e.payload, e.key, self.source, traceparent),
            **extra)
            for e in emits]
        await asyncio.gather(*futures)

    async def dead_letter(self, event, error: BaseException, detail: str | None = None) -> None:
        """Keep an unprocessable event in ``export.dlq`` with the error
        (``detail``, e.g. a traceback, instead of ``str(error)`` when given)."""
        msg = event.message
        key = event.key.decode(errors="replace") if isinstance(event.key, bytes) else event.key
        value = event.value if isinstance(event.value, bytes) else str(event.value).encode()
        letter = DeadLetter(topic=msg.topic, partition=msg.partition, offset=msg.offset,
                            key=(key or "")[:1024] or None, error=(detail or str(error))[:2000],
                            errorClass=type(error).__name__,
                            payload=value[:100_000].decode(errors="replace"))
        await self.keep(letter, key or "")

    async def keep(self, letter: DeadLetter, key: str) -> None:
        """Send ``letter`` to ``export.dlq`` keyed by ``key`` (cut to 1 KiB),
        its payload cut so the record stays within
        :data:`plait.records.MAX_RECORD_BYTES`."""
        key = cut_utf8(key, 1024)
        await self.send([Emit(T.DLQ, key, fit_letter(letter, key))])

    # ------------------------------------------------------------- the loop
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
        """Add ``agent`` at concurrency 1, taking up to ``size`` events at a
        time (or what came within ``within`` seconds; Faust
        ``stream.take_events``), acked after the batch is handled.

        ``handle_batch([(event, attrs, payload)])`` gets the decodable events
        in order (poison is dead-lettered as by :meth:`process`). When it
        raises, the hooks see ``after_batch_failure`` and every event of the
        batch is handled again one at a time with ``agent.handle`` (the
        per-event rules of :meth:`process`: the culprit is dead-lettered,
        the others go on). Nothing escapes (docs/kafka-rules.md #3).

        A batch reaches ``handle_batch`` in runs of whole events holding at
        most about :data:`MAX_RUN_BYTES` of record values, each decoded only
        when its turn comes and handled before the next (docs/kafka-rules.md
        #10): what a run decodes and builds is bounded by the bytes, not by
        how many events (of up to hundreds of alerts each) a batch took."""
        async def run(stream):
            async for events in stream.take_events(size, within):
                await self.process_batch(agent, handle_batch, events)

        run.__name__ = run.__qualname__ = agent.name.replace(".", "_")
        self.app.agent(self.topic(agent.topic), name=agent.name, concurrency=1)(run)

    async def process_batch(self, agent: Agent, handle_batch, events: list) -> None:
        """Handle a batch of Kafka events, run by run (see :meth:`register_batch`);
        never raises."""
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
        """Decode ``events`` and hand them to ``handle_batch`` at once, or one
        at a time when it fails; never raises."""
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
        """Handle one Kafka event; never raises (docs/kafka-rules.md #3), but may exit
        the process (``exit_when_lost``)."""
        try:
            try:
                attrs, payload = agent.decode(event) if agent.decode else ({}, event.value)
            except Exception as exc:  # PoisonError, or anything odd in the bytes
                if agent.keep:
                    log.warning("poison event", agent=agent.name, error=str(exc))
                    await self.dead_letter(event, exc)
                return

            def run() -> Awaitable[None]:
                return self._guarded(agent, event, attrs, payload)

            for hook in reversed(self.hooks):
                run = (lambda h, inner: lambda: h.dispatch(self, agent, payload, inner))(hook, run)
            await run()
        except Exception:
            self._lost(agent)

    async def _guarded(self, agent: Agent, event, attrs: dict, payload: Any) -> None:
        """The per-event wrapper: handler, failure report, hooks; never raises.
        The handler runs in a span (``plait.tracing``) named after the stage,
        child of the event's ``traceparent`` (Kafka header, else envelope)."""
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
            self._fatal()
        log.exception("cannot report a failed event; moving on", agent=agent.name)

    @staticmethod
    def _fatal() -> None:
        """Exit at once (no ack, no shutdown): the partition is redelivered."""
        log.critical("cannot emit events; exiting so the partition is redelivered",
                     exc_info=True)
        os._exit(70)
