"""The alert funnel on Kafka: Faust agents, a timer and a changelog table.

Flow (topic names get ``Settings.topic_prefix``)::

    API (routes decided) ─────────┐
    alerts.raw ──router──> alerts.funnel (by receiver) ──funnel──> webhook
    export.lifecycle, export.dlq ──rules──> alerts.raw   ├─> alerts.ledger
    timer (1 s) ── tick ──> alerts.funnel       │            └─> alerts.notifications
    webhook result ──────> alerts.funnel ───────┘

- The API normalizes the alerts of ``POST /alerts`` and ``POST /api/v2/alerts``, decides their
  routes and writes the commands to ``alerts.funnel`` itself (``api.ingest``); the funnel writes
  their ``received`` history entries.
- The **router** normalizes each raw alert of ``alerts.raw`` (rules, probes, other producers),
  picks its receiver and forwards it keyed by receiver, so one receiver's bucket, groups, in-flight
  message and episodes share a partition. Poison goes to ``export.dlq``; an invalid JSON alert
  travels on and is ledgered ``rejected``.
- The **funnel** agent (concurrency 1, docs/kafka-rules.md #2) is its partitions' only writer:
  alerts, ticks, webhook results and silences all arrive on ``alerts.funnel`` and state goes to the
  changelog table ``alerting-state``. Messages leave only once "sending" is acked by the
  changelog, so a restarted worker resends with the same idempotency key.
- The **timer** ticks each owned partition every second, sooner when something is due.
- Webhook attempts run in the background and report a ``result`` command to the same partition.

Agents run on ``plait.agent`` (docs/kafka-rules.md #3: errors logged, event kept in
``export.dlq``); :class:`FunnelHooks`: dead letters best-effort, a failed command reloads the
partition's funnel from the table.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from typing import Any

import faust
import orjson

from alerting import view as alert_view
from alerting.amconfig import keep_removed_receivers, load_configured
from alerting.config import AlertingConfig
from alerting.model import Alert, Message
from alerting.rules import DlqWatch, lifecycle_alert, recovery_alerts, slow_task_alert
from alerting.changelog import BatchedTable, send_records
from alerting.commands import decision_stands
from alerting.chunks import split_record
from alerting.oversize import Guard
from alerting.runner import Effects, FunnelRunner, offset_hole
from alerting.webhook import SendResult, WebhookSender
from alerting import history as alert_history
from alerting.wire import (FUNNEL_TOPIC, command, fits_command, funnel_partition, ledger_records,
                           pack_alerts, parse_command, parse_raw, raw_envelope, route_alerts,
                           source_copies, too_large_command)
from plait import keys as K
from plait import topics as T
from plait import tracing
from plait.agent import Agent, AgentRuntime, Hooks
from plait.clock import parse_iso
from plait.lifecycle import TERMINAL
from plait.projection import Projection
from plait.events import Lifecycle, decode
from plait.kafka_admin import create_topics, read_offsets
from plait.memory import release_in_background
from plait.settings import Settings

log = logging.getLogger("plait.alerting")
#: Most alert history entries waiting to be written (~300 bytes each: ~30 MB).
STORY_BACKLOG = 100_000

TABLE_NAME = "alerting-state"
TICK_SECONDS = 1.0
#: Most events per router/funnel batch, and the seconds a batch waits to fill.
BATCH_SIZE = 1000
BATCH_WITHIN = 0.005


class FunnelHooks(Hooks):
    """A failed funnel command leaves the partition's memory suspect: drop it (reload from the
    table on the next command)."""

    def __init__(self, runner: FunnelRunner) -> None:
        self.runner = runner

    async def after_failure(self, rt, agent: Agent, event, payload, exc: Exception) -> None:
        if agent.topic == FUNNEL_TOPIC:
            self.runner.forget(event.message.partition)
            self.runner.give_up(event.message.partition, event.message.offset)

    async def after_batch_failure(self, rt, agent: Agent, events: list, exc: Exception) -> None:
        if agent.topic == FUNNEL_TOPIC:
            for event in events:
                self.runner.forget(event.message.partition)


def _json_bytes(value: Any) -> bytes:
    """Compact JSON bytes (orjson; the stdlib's rules for what orjson refuses)."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(value, default=str).encode()


def _decode_envelope(event) -> tuple[dict, Any]:
    return decode(event.value)


def _decode_command(event) -> tuple[dict, dict[str, Any]]:
    return {}, parse_command(event.value)


def _decode_raw(event) -> tuple[dict, list]:
    msg = event.message
    return {}, parse_raw(event.value, msg.partition, msg.offset, time.time())


class AlertingService:
    """State and helpers shared by the alerting agents of one worker."""

    def __init__(self, app: faust.App, settings: Settings, config: AlertingConfig) -> None:
        self.app = app
        self.settings = settings
        self.config = config
        self.names = T.Topics(settings.topic_prefix)
        n = settings.partitions
        schema = faust.Schema(key_type=str, value_type=bytes, key_serializer="json",
                              value_serializer="raw")
        self.table = app.Table(TABLE_NAME, partitions=n, schema=schema,
                               help="alert funnel state: episodes, groups, receivers, meta")
        # one changelog record per key per batch, sent together (alerting/changelog.py)
        self.state_table = BatchedTable(self.table)
        self.runner = FunnelRunner(config, self.state_table)
        self.rt = AgentRuntime(app, self.names, n, "plait-alerting", [FunnelHooks(self.runner)],
                               exit_when_lost=False)
        topic = self.rt.topic
        self.raw = topic(T.ALERTS_RAW)
        self.funnel = topic(FUNNEL_TOPIC)
        self.ledger = topic(T.ALERTS_LEDGER)
        self.notifications = topic(T.ALERTS_NOTIFICATIONS)
        self.dlq = topic(T.DLQ)
        self.lifecycle = topic(T.LIFECYCLE)
        self.sender: WebhookSender | None = None
        self.redis = None
        self._wakeups: dict[int, float] = {}
        self._tasks: set[asyncio.Task] = set()
        self._story_last: asyncio.Task | None = None  # the newest alert history write
        self._story_pending = 0  # alert history entries not written yet
        rules = config.rules
        self.dlq_watch = DlqWatch(rules.dlq_window, rules.dlq_threshold)
        #: the current alerts published for ``GET /api/v2/alerts``
        self.view = alert_view.ViewHook(
            alert_view.ViewPublisher(self._redis, settings.redis_prefix, config),
            lambda partition: self.runner.partitions.get(partition), self._spawn)

    def reload(self) -> AlertingConfig:
        """Re-read the configuration file (SIGHUP) into the router, sender and every funnel
        (rebuilt from the table at its next command, which restarts its group timers at this
        reload's time, as Alertmanager's reload does, changed file or not); removed receivers
        stay as type ``none``. Runs between funnel batches, so no batch sees two configurations.
        Raises plait.errors.ConfigError when the file is invalid (the one in use stays, and the
        timers run on)."""
        config = keep_removed_receivers(self.config, load_configured(self.settings))
        self.runner.previous_config = self.runner.config
        self.config = self.runner.config = config
        self.runner.reloaded_at = self.runner.clock()
        for partition in list(self.runner.partitions):
            self.runner.forget(partition)
        if self.sender is not None:
            self.sender.config = config
        self.view.publisher.config = config
        return config

    async def follow_reload_requests(self) -> None:
        """Re-read the file whenever ``POST /-/reload`` asks (channel ``P:alerts:reload``) and
        answer in ``P:alerts:reloaded:<request id>`` under ``host:pid``: ``ok``, or why it was
        refused (the configuration in use stays). Subscribes again after a Redis error."""
        from alerting.amconfig import reload_logged

        prefix, me = self.settings.redis_prefix, f"{socket.gethostname()}:{os.getpid()}"
        while True:
            pubsub = self._redis().pubsub()
            try:
                await pubsub.subscribe(K.alert_reload(prefix))
                while True:
                    msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if msg is None:
                        continue
                    refused = reload_logged(self.reload, "worker")
                    key = K.alert_reloaded(prefix, msg["data"].decode(errors="replace"))
                    await self._redis().hset(key, me, refused or "ok")
                    await self._redis().expire(key, 60)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - Redis away: SIGHUP still reloads
                log.warning("reload requests: %s; subscribing again", e)
                await asyncio.sleep(1)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    # ----------------------------------------------------------- plumbing
    @property
    def guard(self) -> Guard:
        """Dead-letters oversize records (:mod:`alerting.oversize`); made on first use."""
        guard = self.__dict__.get("_guard")
        if guard is None:
            guard = self._guard = Guard(lambda letter, key: self.rt.keep(letter, key),
                                        lambda alert: self._raise(alert, alert["asset"]))
        return guard

    def changelog_topic(self) -> str:
        """Name of the table's changelog topic (Faust: ``<app id>-<table>-changelog``)."""
        return f"{self.app.conf.id}-{TABLE_NAME}-changelog"

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def agents(self) -> list[Agent]:
        """The alerting agents (poison of ``alerts.raw``/``alerts.funnel`` to ``export.dlq``)."""
        return [
            Agent(T.ALERTS_RAW, "plait.alerts.router", self.route, _decode_raw),
            Agent(T.LIFECYCLE, "plait.alerts.rules", self.rules, _decode_envelope, keep=False),
            Agent(FUNNEL_TOPIC, "plait.alerts.funnel", self.apply, _decode_command),
            Agent(T.DLQ, "plait.alerts.dlq", self.dead_letters, keep=False),
        ]

    def batch_handlers(self) -> dict[str, Any]:
        """Agents that take events in batches (name -> batch handler)."""
        return {"plait.alerts.router": self.route_batch, "plait.alerts.funnel": self.apply_batch}

    # -------------------------------------------------------------- router
    async def route(self, event, raws: list, attrs: dict) -> None:
        """Forward the alerts of one ``alerts.raw`` event to ``alerts.funnel``."""
        await self.route_batch([(event, attrs, raws)])

    async def route_batch(self, items: list[tuple[Any, dict, list]]) -> None:
        """Route a batch of ``alerts.raw`` events to ``alerts.funnel`` as ``alerts`` commands per
        receiver (:func:`alerting.wire.pack_alerts`)."""
        per_receiver: dict[str, list[tuple[dict, bytes]]] = {}
        sources: dict[int, list[tuple[None, bytes]]] = {}  # partition -> inhibition sources
        received: list = []  # (fingerprint, entry): each copy's story starts here
        for event, _attrs, raws in items:
            msg = event.message
            # one ``alert.route`` span per raw event, child of its ingest; ``tp`` carries it
            with tracing.span("alert.route", tracing.from_headers(getattr(msg, "headers", None)),
                              optional=True, **{"plait.alerts": len(raws),
                                                "messaging.destination.name": getattr(msg, "topic", None)}
                              ) as sp:
                tp = tracing.current_traceparent() if sp is not None else None
                for i, raw in enumerate(raws):
                    routed = route_alerts(self.config, raw)
                    for receiver, cmd in routed:  # one per route reached
                        cmd["src"] = [msg.partition, msg.offset, i]
                        if tp:
                            cmd["tp"] = tp
                        per_receiver.setdefault(receiver, []).append((cmd, command(**cmd)))
                        received += alert_history.received_entries(cmd, raw.source)
                    self._source_copies(routed, sources)
        for p, items in sources.items():  # before the alerts: a target's partition knows first
            for value in pack_alerts(items, b"%d" % p, "sources"):
                await self.funnel.send(key=b"%d" % p, value=value, partition=p)
        for receiver, cmds in per_receiver.items():
            key = receiver.encode()
            for i, (cmd, data) in enumerate(cmds):
                if not fits_command(data, key):  # kept in export.dlq, ledgered rejected
                    self.guard.hold(FUNNEL_TOPIC, None, key, data)
                    cmds[i] = (cmd, too_large_command(cmd, len(data)))
            for value in pack_alerts(cmds, key):
                await self.funnel.send(key=key, value=value)
        await self._flush_guard()
        self._story(received)

    def _source_copies(self, routed: list[tuple[str, dict]],
                       sources: dict[int, list[tuple[None, bytes]]]) -> None:
        """Add the ``sources`` items of one routed alert (:func:`alerting.wire.source_copies`)."""
        first = routed[0][1]
        if not self.config.inhibit_rules or "alert" not in first or not first.get("fp"):
            return
        n = self.settings.partitions
        taken = {funnel_partition(r, n) for r, _cmd in routed}
        for p, data in source_copies(self.config, Alert.from_dict(first["alert"]), first["fp"],
                                     taken, lambda r: funnel_partition(r, n)).items():
            sources.setdefault(p, []).append((None, data))

    # --------------------------------------------------------------- rules
    async def rules(self, event, payload, attrs: dict) -> None:
        """Turn export lifecycle events into raw alerts (FAILED, TIMEOUT, slow)."""
        if not isinstance(payload, Lifecycle):
            return
        alert = lifecycle_alert(payload, self.config.rules.failed_resolve_after)
        redis, p = self._redis(), self.settings.redis_prefix
        marker = K.export_failed_marker(p, payload.sysCode or "unknown", payload.bizType or "unknown")
        if alert is not None:
            await redis.set(marker, payload.taskId, ex=7 * 24 * 3600)
            await self._raise(alert, payload.taskId, f"lifecycle-{payload.taskId}-{payload.status}")
        elif payload.status == "SUCCESS":
            failed = await redis.getdel(marker)
            if failed:
                failed = failed.decode() if isinstance(failed, bytes) else str(failed)
                await self._raise_many(recovery_alerts(payload, failed), payload.taskId,
                                       f"lifecycle-{payload.taskId}-{payload.status}")
        await self._slow_task(payload)

    async def _raise(self, alert: dict[str, Any], key: str, event_id: str | None = None) -> None:
        await self._raise_many([alert], key, event_id)

    async def _raise_many(self, alerts: list[dict[str, Any]], key: str,
                          event_id: str | None = None) -> None:
        _eid, value = raw_envelope(alerts, source="plait-rules", event_id=event_id)
        await self.raw.send(key=key.encode(), value=value)

    async def _slow_task(self, event: Lifecycle) -> None:
        """``ExportSlow``: fires once an active task passes the threshold, resolves when it ends."""
        after = self.config.rules.slow_task_after
        if after is None or event.status in ("CREATED", "WAITING"):
            return
        redis, p = self._redis(), self.settings.redis_prefix
        marker = K.slow_task_marker(p, event.taskId)
        fired = bool(await redis.exists(marker))
        if event.status in TERMINAL and not fired:
            return
        state = await Projection(redis, p).get(event.taskId)
        if state is None:
            return
        created = parse_iso(state["createdAt"])
        alert = slow_task_alert(event, created, time.time(), after, fired)
        if alert is None:
            return
        if alert["status"] == "firing":
            if not await redis.set(marker, 1, nx=True, ex=7 * 24 * 3600):
                return
        else:
            await redis.delete(marker)
        await self._raise(alert, event.taskId)

    async def dead_letters(self, event, payload, attrs: dict) -> None:
        """Count a dead letter; ``DLQGrowth`` fires past the threshold."""
        alert = self.dlq_watch.observe(time.time())
        if alert is not None:
            await self._raise(alert, "export.dlq")

    async def check_dlq(self) -> None:
        """Timer: resolve ``DLQGrowth`` once a window passed without dead letters."""
        alert = self.dlq_watch.check(time.time())
        if alert is not None:
            await self._raise(alert, "export.dlq")

    def _redis(self):
        if self.redis is None:
            import redis.asyncio as aioredis

            self.redis = aioredis.Redis.from_url(self.settings.redis_url, socket_timeout=2,
                                                 socket_connect_timeout=2)
        return self.redis

    # -------------------------------------------------------------- funnel
    async def apply(self, event, cmd: dict[str, Any], attrs: dict) -> None:
        """Apply one ``alerts.funnel`` command and carry out its effects."""
        await self.apply_batch([(event, attrs, cmd)])

    async def apply_batch(self, items: list[tuple[Any, dict, dict[str, Any]]]) -> None:
        """Apply a batch of ``alerts.funnel`` commands per partition in offset order
        (:meth:`FunnelRunner.apply_batch`), then its effects (:meth:`_effects_all`); offsets are
        acked after this returns."""
        by_part: dict[int, list[tuple[int, dict]]] = {}
        counted: set[int] = set()
        self._story(self._received_from_api(items))
        for event, _attrs, cmd in items:
            msg = event.message
            by_part.setdefault(msg.partition, []).append((msg.offset, cmd))
            if cmd["kind"] in ("tick", "result", "silence", "expire"):
                counted.add(msg.partition)
        results = []
        for partition, cmds in by_part.items():
            cmds = await self._with_hole_filled(partition, cmds)
            fx = self.runner.apply_batch(partition, cmds)  # a bug: FunnelHooks reloads
            if not fx.skipped:
                results.append((partition, fx))
        await self._effects_all(results)
        for partition in counted:
            await self._publish_counters(partition)
            self.view.schedule(partition)  # GET /api/v2/alerts reads it
        if any(fx.release_memory for _p, fx in results):
            release_in_background()  # a storm's alerts went: their memory back to the OS

    async def _with_hole_filled(self, partition: int,
                                cmds: list[tuple[int, dict]]) -> list[tuple[int, dict]]:
        """``cmds`` (``[(offset, command)]``) with the commands the consumer did not hand over
        between the partition's last applied offset and them, read back from ``alerts.funnel``
        (docs/kafka-rules.md #18: around a rebalance, Faust can commit past records it never
        delivered), in offset order. Offsets given up (``FunnelRunner.give_up``) are no hole; a
        read-back record that does not parse is given up. For one event (the runtime's fallback
        after a failed batch) the read-back commands are applied here first, one at a time, and
        one that fails is given up as the agent gives up an event: a failing command read back
        never fails the events after it. If the records cannot be read the worker exits."""
        last = self.runner.state(partition).offset
        given = self.runner.given_up(partition, after=last)
        hole = offset_hole(last, [o for o, _c in cmds] + sorted(given))
        if hole is None:
            return cmds
        start, stop = hole
        log.warning("alerts.funnel partition %s: offsets %s..%s were not handed to the funnel; "
                    "reading them back", partition, start, stop - 1)
        try:
            got = await asyncio.to_thread(read_offsets, self.settings.broker_url,
                                          self.names.name(FUNNEL_TOPIC), partition, start, stop)
        except Exception:
            log.critical("cannot read back alerts.funnel partition %s offsets %s..%s; exiting",
                         partition, start, stop - 1, exc_info=True)
            self.rt.fatal()
            raise  # only when fatal is stubbed out (tests)
        have, found = {o for o, _c in cmds} | given, []
        for offset, value in got:
            if offset not in have:
                try:
                    found.append((offset, parse_command(value)))
                except Exception as e:  # noqa: BLE001 - what the agent dead-letters
                    log.warning("alerts.funnel partition %s offset %s, read back, is not a "
                                "command (%s); given up", partition, offset, e)
                    self.runner.give_up(partition, offset)
        if len(cmds) > 1:  # a failure falls back to one event at a time: the branch below
            return sorted(cmds + found, key=lambda c: c[0])
        for offset, cmd in found:
            try:
                fx = self.runner.apply_batch(partition, [(offset, cmd)])
            except Exception:  # noqa: BLE001 - given up, as the agent gives up an event
                log.warning("alerts.funnel partition %s offset %s, read back, cannot be "
                            "applied; given up", partition, offset, exc_info=True)
                self.runner.forget(partition)
                self.runner.give_up(partition, offset)
                continue
            if not fx.skipped:
                await self._effects_all([(partition, fx)])
        return cmds

    def _received_from_api(self, items: list[tuple[Any, dict, dict[str, Any]]]) -> list:
        """The ``received`` history entries of the alert commands the API
        decided (they carry ``source``; the router writes those of
        ``alerts.raw``), of the decisions that stand here
        (:func:`alerting.commands.decision_stands`)."""
        out: list = []
        for _event, _attrs, cmd in items:
            kind = cmd["kind"]
            if kind not in ("alert", "alerts"):
                continue
            for item in (cmd,) if kind == "alert" else cmd.get("items") or ():
                if "source" in item and decision_stands(self.config, item):
                    out += alert_history.received_entries(item, str(item["source"]))
        return out

    async def _effects(self, partition: int, fx: Effects) -> None:
        await self._effects_all([(partition, fx)])

    async def _effects_all(self, results: list[tuple[int, Effects]]) -> None:
        """Send the batch's table writes, ledger records and notifications, then wait for all
        acks; only then do webhook POSTs leave ("sending" is durable, docs/kafka-rules.md #13) and
        offsets get acked. If they cannot be sent the worker exits unacked (docs/kafka-rules.md #4)
        and state is recovered from the changelog."""
        producer, changelog = self.app.producer, self.changelog_topic()
        send_ledger, send_note = self.ledger.send, self.notifications.send
        acks, fits = [], self.guard.fits  # a record too large is dead-lettered, not sent
        try:
            acks += await send_records(producer, changelog, [
                r for r in self.state_table.drain() if fits(changelog, r[0], r[1], r[2])])
            for partition, fx in results:
                key = str(partition).encode()
                for value in ledger_records(partition, fx.ledger if self.config.ledger else []):
                    if fits(T.ALERTS_LEDGER, partition, key, value):
                        acks.append(await send_ledger(key=key, value=value))
                for m in fx.messages:
                    key = m.receiver.encode()
                    record = _json_bytes({"partition": partition, **m.to_dict()})
                    for value in split_record(record, m.id, key):  # in order, one partition
                        if fits(T.ALERTS_NOTIFICATIONS, None, key, value):
                            acks.append(await send_note(key=key, value=value))
            await asyncio.gather(*acks)
        except Exception:
            log.critical("cannot send the funnel's state, ledger or notifications; exiting "
                         "so the partitions are redelivered", exc_info=True)
            self.rt.fatal()
            raise  # only when fatal is stubbed out (tests)
        await self._flush_guard()
        self._story(alert_history.batch_entries(
            [e for _p, fx in results for e in fx.ledger], [m for _p, fx in results for m in fx.messages]))
        for partition, fx in results:
            for m in fx.messages:
                self._spawn(self._deliver(partition, m))
            if fx.wake_at is not None:
                self.wake(partition, fx.wake_at)

    async def _flush_guard(self) -> None:
        """Dead-letter oversize records, raising ``AlertRecordTooLarge`` (:mod:`alerting.oversize`);
        a failure is logged."""
        if self.guard.held:
            try:
                await self.guard.flush()
            except Exception:
                log.exception("cannot keep records too large in export.dlq")

    async def _deliver(self, partition: int, message: Message) -> None:
        """One webhook attempt, reported back to the message's partition."""
        if self.sender is None:
            self.sender = WebhookSender(self.config, external_url=self.settings.external_url)
        try:
            result = await self.sender.send(message)
        except Exception as e:  # unknown receiver or a bug: retried like a network error
            log.exception("webhook send of %s failed", message.id)
            result = SendResult(False, None, error=f"{type(e).__name__}: {e}")
        if not result.ok:
            log.info("webhook %s attempt %s -> %s %s", message.id, message.attempt,
                     result.status, result.error)
        self._story(alert_history.attempt_entries(
            message, result.ok, result.status, result.error, result.elapsed, time.time()))
        value = command("result", message_id=message.id, ok=result.ok, status=result.status,
                        retry_after=result.retry_after, maybe_delivered=result.maybe_delivered,
                        error=result.error[:500], elapsed=result.elapsed)
        for attempt in range(5):
            try:
                await self.funnel.send(key=message.receiver.encode(), value=value, partition=partition)
                return
            except Exception:
                log.exception("cannot report webhook result of %s (try %s)", message.id, attempt + 1)
                await asyncio.sleep(1 + attempt)
        # the funnel treats the attempt as lost after 3x the timeout and retries it

    # --------------------------------------------------------------- ticks
    async def send_tick(self, partition: int) -> None:
        """Ask ``partition``'s funnel to advance its clock."""
        try:
            await self.funnel.send(key=b"tick", value=command("tick"), partition=partition)
        except Exception:
            log.exception("cannot send a tick to alerts.funnel partition %s", partition)

    def wake(self, partition: int, at: float) -> None:
        """Schedule a tick for ``partition`` at epoch second ``at`` if sooner than any planned."""
        delay = at - time.time()
        if delay >= TICK_SECONDS:
            return
        planned = self._wakeups.get(partition)
        if planned is not None and planned <= at:
            return
        self._wakeups[partition] = at
        loop = asyncio.get_running_loop()

        def fire() -> None:
            if self._wakeups.get(partition) == at:
                del self._wakeups[partition]
            self._spawn(self.send_tick(partition))

        loop.call_later(max(0.0, delay), fire)

    async def tick_owned(self) -> None:
        """Send a tick to every ``alerts.funnel`` partition this worker owns."""
        name = self.names.name(FUNNEL_TOPIC)
        for tp in self.app.assignor.assigned_actives():
            if tp.topic == name:
                await self.send_tick(tp.partition)

    # ------------------------------------------------------------- history
    def _story(self, entries: list) -> None:
        """Append ``(fingerprint, entry)`` to the alerts' stories (:mod:`alerting.history`) in the
        background, in decision order; past :data:`STORY_BACKLOG` pending entries new ones are
        dropped with a warning (the story is a view)."""
        if not entries:
            return
        try:
            if self._story_pending + len(entries) > STORY_BACKLOG:
                log.warning("alert history behind by %s entries; %s entries dropped",
                            self._story_pending, len(entries))
                return
            s, previous, n = self.settings, self._story_last, len(entries)
            writes = alert_history.redis_writes(s.redis_prefix, entries)
        except Exception as e:  # a half-built service (unit tests)
            log.warning("cannot write alert history: %s", e)
            return

        async def run() -> None:
            try:
                if previous is not None and not previous.done():
                    await asyncio.wait({previous}, timeout=10)
                await asyncio.wait_for(alert_history.write(
                    self._redis(), writes, s.alert_history_retention_seconds,
                    s.alert_history_max_entries), 5)
            except Exception as e:
                log.warning("cannot write alert history: %s", e)
            finally:
                self._story_pending -= n

        self._story_pending += n
        self._story_last = asyncio.get_running_loop().create_task(run())
        self._tasks.add(self._story_last)
        self._story_last.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------ counters
    async def _publish_counters(self, partition: int) -> None:
        counters = self.runner.counters(partition)
        if counters is None:
            return
        try:
            counters["updated_at"] = time.time()
            await asyncio.wait_for(self._redis().hset(
                K.alert_counters(self.settings.redis_prefix), str(partition),
                json.dumps(counters, separators=(",", ":"))), 3)
        except Exception as e:  # counters are a view; the funnel goes on without Redis
            log.warning("cannot publish alert counters: %s", e)


def register_alerting(app: faust.App, settings: Settings) -> None:
    """Add the alert funnel to the worker ``app``: validate ``settings.alerting_config``, create
    ``alerts.funnel`` and the changelog (``topic_allow_declare=False``), register the agents and
    the 1 s timer. Raises alerting.config.ConfigError (names the key) or RuntimeError (a topic)."""
    config = load_configured(settings)
    # no standby replicas: each would replay every other partition's changelog
    app.conf.table_standby_replicas = 0
    svc = AlertingService(app, settings, config)
    create_topics(settings.broker_url, [svc.names.name(FUNNEL_TOPIC), svc.changelog_topic()],
                  settings.partitions, compacted=[svc.changelog_topic()], exact=True)
    app.alerting = svc  # handy for operators and tests in-process
    batched = svc.batch_handlers()
    for agent in svc.agents():
        if agent.name in batched:
            svc.rt.register_batch(agent, batched[agent.name], BATCH_SIZE, BATCH_WITHIN)
        else:
            svc.rt.register(agent)

    @app.task
    async def _reload_on_sighup() -> None:
        from alerting.amconfig import on_sighup

        on_sighup(svc.reload, "worker")

    @app.task
    async def _reload_on_request() -> None:
        await svc.follow_reload_requests()

    @app.timer(TICK_SECONDS, name="plait.alerts.tick")
    async def tick() -> None:
        await svc.tick_owned()
        await svc.check_dlq()

    @app.on_before_shutdown.connect
    async def _close(app_, **_: Any) -> None:  # pragma: no cover - shutdown path
        if svc.sender is not None:
            await svc.sender.aclose()
