"""Publishing alerts and funnel commands from the API, on the API's one
Kafka producer (``Services.producer``, murmur2_random, docs/kafka-rules.md #8)."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from alerting.wire import FUNNEL_TOPIC, ordering_key, pack_raw
from plait import topics as T
from plait.errors import Unavailable
from plait.settings import Settings
from producers.sdk import PlaitProducer

#: Most alerts in one ``alerts.raw`` record.
CHUNK = 500

Record = tuple[str, bytes, bytes, int | None]


class AlertIngest:
    """Sends raw alerts to ``alerts.raw`` and commands to every
    ``alerts.funnel`` partition, waiting for the broker's acks."""

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

    async def publish(self, alerts: list[tuple[Any, bytes]], source: str,
                      received_at: float) -> list[str]:
        """Send ``(alert, JSON)`` pairs keyed by rule and asset (a firing and its
        resolve stay in order); the raw ids ``<event id>:<index>`` in input
        order. ``Unavailable`` (503) when not acked in time."""
        by_key: dict[str, list[int]] = {}
        for i, (alert, _data) in enumerate(alerts):
            by_key.setdefault(ordering_key(alert), []).append(i)
        ids: list[str] = [""] * len(alerts)
        records: list[Record] = []
        for key, positions in by_key.items():
            done = 0
            for eid, n, value in pack_raw([alerts[i][1] for i in positions], key.encode(),
                                          source, received_at, CHUNK):
                for k, i in enumerate(positions[done:done + n]):
                    ids[i] = f"{eid}:{k}"
                done += n
                records.append((self.topics.name(T.ALERTS_RAW), key.encode(), value, None))
        from plait import tracing

        with tracing.span("alert.ingest", **{"plait.source": source,
                                             "plait.alerts": len(alerts)}):
            await self.send(records)
        return ids

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
