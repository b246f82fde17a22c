"""Producer SDK: emit export requests (and, in push mode, page batches) to
Kafka directly, keyed by task id, without going through the API.

Uses confluent-kafka with the idempotent producer and ``murmur2_random``
partitioning, the Java client's and aiokafka's (Faust's) key hash, so a
task's events land on the same partition whoever sends them (PITFALLS.md #8).
"""
from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import Producer

from plait import topics as T
from plait.clock import new_task_id, utcnow_iso
from plait.events import ExportRequested, PageBatch, Payload, encode
from plait.spec import ExportSpec
from plait.topics import Topics


class PlaitProducer:
    """Sends Plait events. Thread-safe (confluent-kafka's Producer is).

    Args:
        bootstrap: Kafka bootstrap servers, ``host:port``.
        topic_prefix: the deployment's topic prefix (``PLAIT_TOPIC_PREFIX``).
        source: CloudEvents ``source`` of the events sent.
    """

    def __init__(self, bootstrap: str, topic_prefix: str = "", source: str = "plait-sdk",
                 **config: Any) -> None:
        self.topics = Topics(topic_prefix)
        self.source = source
        self._errors: list[str] = []
        self._producer = Producer({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "partitioner": "murmur2_random",
            "compression.type": "lz4",
            "linger.ms": 5,
            "message.max.bytes": 2 * 1024 * 1024,
            **config,
        }, logger=logging.getLogger("plait.kafka"))  # librdkafka logs via logging, not stderr

    def send(self, topic: str, key: str, payload: Payload) -> None:
        """Queue one event (base topic name from ``plait.topics``); raises
        ``BufferError`` when the local queue is full (call ``flush``)."""
        self._producer.produce(self.topics.name(topic), key=key.encode(),
                               value=encode(payload, key, self.source),
                               on_delivery=self._delivered)
        self._producer.poll(0)

    def request_export(self, spec: ExportSpec | dict, task_id: str | None = None) -> str:
        """Emit ExportRequested for ``spec`` and wait until the broker has it.

        Returns the task id. Raises ``pydantic.ValidationError`` for an invalid
        spec (naming the field) and ``RuntimeError`` when the broker did not
        acknowledge within 30 s.
        """
        spec = spec if isinstance(spec, ExportSpec) else ExportSpec.model_validate(spec)
        task_id = task_id or new_task_id()
        self.send(T.REQUESTS, task_id, ExportRequested(
            taskId=task_id, spec=spec, fingerprint=spec.fingerprint(), requestedAt=utcnow_iso()))
        self.flush()
        return task_id

    def send_page(self, task_id: str, spec: ExportSpec, seq: int, rows: list[dict[str, Any]],
                  rows_before: int, is_last: bool) -> None:
        """Push mode: emit page ``seq`` (rows inline; keep a page under ~1 MB)."""
        self.send(T.PAGES, task_id, PageBatch(
            taskId=task_id, seq=seq, rows=rows, rowCount=len(rows), rowsBefore=rows_before,
            isLast=is_last, spec=spec))

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self._errors.append(f"{msg.topic()}: {err}")

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until every queued event is acknowledged.

        Raises ``RuntimeError`` when some are still queued after ``timeout``
        seconds, or when the broker refused some (naming the topic and error).
        """
        left = self._producer.flush(timeout)
        if left:
            raise RuntimeError(f"{left} events not acknowledged by the broker after {timeout}s")
        if self._errors:
            errors, self._errors = self._errors, []
            raise RuntimeError(f"{len(errors)} events refused by the broker: {errors[0]}")
