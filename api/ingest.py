"""Publishing routed alerts and silence commands to ``alerts.funnel`` from
the API, on the API's one Kafka producer (``Services.producer``,
murmur2_random, docs/kafka-rules.md #8): the API decides each alert's
routes itself (one hop to the funnel), so it writes no ``alerts.raw``."""
from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from typing import Any

from alerting.model import Alert, AlertRejected
from alerting.routing import routing_version
from alerting.wire import (FUNNEL_TOPIC, MAX_COMMAND_BYTES, command, decided_commands, fits_command,
                           funnel_partition, pack_alerts, source_copies)
from plait import topics as T
from plait import tracing
from plait.errors import Unavailable
from plait.records import MAX_RECORD_BYTES
from plait.settings import Settings
from producers.sdk import PlaitProducer

Record = tuple[str, bytes, bytes, int | None]


def _key(partition: int) -> bytes:
    """The Kafka key of an ``alerts`` record the API sends: its partition
    (the record goes to that partition explicitly)."""
    return str(partition).encode()


def too_large(where: str, size: int) -> AlertRejected:
    """The rejection of an alert whose ``alerts.funnel`` command is ``size``
    bytes, too large for one record (docs/kafka-rules.md #17); ``where``
    its index prefix (``[3].``; ``body`` for a lone alert)."""
    room = MAX_COMMAND_BYTES - len(b'{"v":1,"kind":"alerts","items":[]}') - 4
    return AlertRejected(where.rstrip(".") or "body",
                         f"is {size} bytes as an alerts.funnel command, more than one Kafka "
                         f"record carries ({MAX_RECORD_BYTES} bytes with the record's key "
                         "and framing)",
                         f"an alert whose command is at most {room} bytes of JSON: shorten "
                         "its labels or annotations", "size")


class AlertIngest:
    """Sends routed alert commands to ``alerts.funnel`` and silence commands
    to every partition of it, waiting for the broker's acks."""

    #: Seconds to wait for the broker's acks (and topic metadata) before a 503.
    ack_timeout: float = 10.0

    def __init__(self, settings: Settings, producer: PlaitProducer) -> None:
        self.settings, self.producer = settings, producer
        self.topics = T.Topics(settings.topic_prefix)
        self._partitions: int | None = None

    async def send(self, records: list[Record]) -> None:
        """Produce ``(topic, key, value, partition)`` records, acked, off the
        loop; ``Unavailable`` (503) after :attr:`ack_timeout` s."""
        try:
            await asyncio.to_thread(self.producer.send_records, records, self.ack_timeout)
        except RuntimeError as e:
            raise Unavailable(str(e)) from None

    async def publish(self, alerts: list[tuple[str, Alert]], source: str, received_at: float,
                      config: Any) -> tuple[list[str], list[tuple[int, AlertRejected]]]:
        """Decide the routes of ``alerts`` (``(index prefix "[3].", normalized alert)``) with
        ``config`` and send their commands, each encoded once, to their receivers' ``alerts.funnel``
        partitions: one ``alerts`` record per partition, cut at 500 items and 256 KiB
        (docs/events.md, "Alert wire formats"). Returns (raw ids sent, in input order;
        ``(position, rejection)`` of each alert too large for one record, code ``size``).
        ``Unavailable`` (503) when Kafka does not ack in time."""
        eid, n = uuid.uuid4().hex, await self.funnel_partitions()
        topic = self.topics.name(FUNNEL_TOPIC)
        ids: list[str] = []
        refused: list[tuple[int, AlertRejected]] = []
        by_partition: dict[int, list[tuple[None, bytes]]] = {}
        sources: dict[int, list[tuple[None, bytes]]] = {}
        with tracing.span("alert.ingest", **{"plait.source": source,
                                             "plait.alerts": len(alerts)}):
            base = {"v": 1, "kind": "alert", "received_at": received_at, "source": source}
            if config is not None:
                base["cfg"] = routing_version(config)
            tp = tracing.current_traceparent()
            if tp:
                base["tp"] = tp
            for pos, (where, alert) in enumerate(alerts):
                rid = f"{eid}:{pos}"
                decided = decided_commands(config, alert, dict(base, id=rid))
                items = [(self.partition_of(r, n), command(**c)) for r, c in decided]
                large = [len(data) for p, data in items if not fits_command(data, _key(p))]
                if large:
                    refused.append((pos, too_large(where, large[0])))
                    continue
                ids.append(rid)
                for p, data in items:
                    by_partition.setdefault(p, []).append((None, data))
                fp = decided[0][1].get("fp")
                if fp:  # decided: an inhibition source reaches the other partitions too
                    for p, data in source_copies(config, alert, fp, {p for p, _ in items},
                                                 lambda r: self.partition_of(r, n)).items():
                        sources.setdefault(p, []).append((None, data))
            # the sources first: a target's partition knows its source before the target
            records: list[Record] = [(topic, _key(p), value, p) for p, items in sources.items()
                                     for value in pack_alerts(items, _key(p), "sources")]
            records += [(topic, _key(p), value, p) for p, items in by_partition.items()
                        for value in pack_alerts(items, _key(p))]
            if records:  # the records carry this span's traceparent header too
                await self.send(records)
        return ids, refused

    @staticmethod
    @functools.lru_cache(maxsize=1024)
    def partition_of(receiver: str, partitions: int) -> int:
        """:func:`alerting.wire.funnel_partition`, kept per receiver."""
        return funnel_partition(receiver, partitions)

    async def broadcast(self, key: bytes, value: bytes) -> None:
        """Send one command to every ``alerts.funnel`` partition (``Unavailable``: 503)."""
        n = await self.funnel_partitions()
        await self.send([(self.topics.name(FUNNEL_TOPIC), key, value, p) for p in range(n)])

    async def funnel_partitions(self) -> int:
        """Partition count of ``alerts.funnel`` (metadata; the setting as fallback)."""
        if self._partitions is None:
            name = self.topics.name(FUNNEL_TOPIC)
            try:
                self._partitions = (await asyncio.to_thread(
                    self.producer.partition_count, name, min(5.0, self.ack_timeout))
                    or self.settings.partitions)
            except Exception:
                return self.settings.partitions
        return self._partitions

    async def warm(self) -> None:
        """Look up ``alerts.funnel``'s partitions before the first POST; never raises."""
        try:
            await self.funnel_partitions()
        except Exception as exc:
            logging.getLogger("plait.api").warning("Kafka producer warm-up failed: %s", exc)
