"""Producer SDK (docs/kafka-rules.md #8): emit export requests (and, in push mode, page batches) to
Kafka directly, keyed by task id, with the idempotent producer and ``murmur2_random`` partitioning
(the Java client's and aiokafka's hash), so a task's events land on one partition whoever sends
them."""
from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from datetime import date, datetime, time as dtime
from decimal import Decimal
from typing import Any
from uuid import UUID

from confluent_kafka import KafkaError, Producer

from plait import topics as T
from plait.clock import new_task_id, utcnow_iso
from plait.devenv import dev_value
from plait.errors import Unavailable
from plait.events import ExportRequested, PageBatch, Payload, encode
from plait.logs import kafka_logger
from plait.spec import ExportSpec
from plait.topics import Topics


class BrokerUnreachable(Unavailable, ConnectionError, RuntimeError):
    """No Kafka broker answered: an ``Unavailable`` (503), a ``ConnectionError`` and a
    ``RuntimeError``."""


def _json_row(index: int, row: Mapping[str, Any]) -> dict[str, Any]:
    """One pushed row with values as the pull contract's JSON carries them. Raises ``TypeError``
    naming row and column."""
    if not isinstance(row, Mapping):
        raise TypeError(f"row {index}: a row is a mapping of column -> value, "
                        f"not {type(row).__name__}")
    out = {}
    for column, value in row.items():
        try:
            out[str(column)] = _json_value(value)
        except TypeError as exc:
            raise TypeError(f"row {index}, column {column!r}: {exc}") from None
    return out


_PLAIN = (str, int, float, bool, Decimal, type(None))


def _json_value(value: Any) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (datetime, date, dtime)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, UUID):
        return str(value)
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        return _json_value(value.item())
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    raise TypeError(f"cannot send a value of type {type(value).__name__} (send str, int, "
                    f"float, bool, Decimal, bytes, date/datetime/time, UUID, a numpy "
                    f"scalar, dict or list)")


class PlaitProducer:
    """Sends Plait events; thread-safe. ``bootstrap`` and ``topic_prefix`` default to
    ``PLAIT_BROKER_URL``/``PLAIT_TOPIC_PREFIX``, else the running ``plait dev``'s
    (:mod:`plait.devenv`); ``config``: extra librdkafka settings. Raises ValueError when no broker
    is found."""

    def __init__(self, bootstrap: str | None = None, topic_prefix: str | None = None,
                 source: str = "plait-sdk", **config: Any) -> None:
        bootstrap = bootstrap or dev_value("PLAIT_BROKER_URL")
        if not bootstrap:
            raise ValueError("no Kafka to send to: pass bootstrap='host:port', set "
                             "PLAIT_BROKER_URL, or start `plait dev` (it writes .plait/dev.env)")
        if topic_prefix is None:
            topic_prefix = dev_value("PLAIT_TOPIC_PREFIX") or ""
        self.bootstrap = bootstrap
        self.topics = Topics(topic_prefix)
        self.source = source
        self._errors: list[str] = []
        self._down: str | None = None
        self._producer = Producer({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "partitioner": "murmur2_random",
            "compression.type": "lz4",
            "linger.ms": 5,
            "message.max.bytes": 2 * 1024 * 1024,
            "error_cb": self._on_error,
            **config,
        }, logger=kafka_logger())

    def send(self, topic: str, key: str, payload: Payload) -> None:
        """Queue one event (base topic name); raises ``BufferError`` when the local queue is full
        (``flush``)."""
        from plait import tracing

        tp = tracing.current_traceparent()
        self._producer.produce(self.topics.name(topic), key=key.encode(),
                               value=encode(payload, key, self.source, tp),
                               headers=[(tracing.TRACEPARENT, tp.encode())] if tp else None,
                               on_delivery=self._delivered)
        self._producer.poll(0)

    def request_export(self, spec: ExportSpec | dict, task_id: str | None = None) -> str:
        """Emit ExportRequested for ``spec`` and wait for the broker; returns the task id. Raises
        ``pydantic.ValidationError``, ``BrokerUnreachable`` (5 s) or ``RuntimeError`` (no ack in 30
        s)."""
        spec = spec if isinstance(spec, ExportSpec) else ExportSpec.model_validate(spec)
        task_id = task_id or new_task_id()
        self.send(T.REQUESTS, task_id, ExportRequested(
            taskId=task_id, spec=spec, fingerprint=spec.fingerprint(), requestedAt=utcnow_iso()))
        self.flush()
        return task_id

    def send_page(self, task_id: str, spec: ExportSpec, seq: int, rows: list[Mapping[str, Any]],
                  rows_before: int = 0, is_last: bool = False, *, partition: int = 0,
                  partitions: int = 1) -> None:
        """Push mode: queue page ``seq`` of ``partition`` (then :meth:`flush`); keep a page under ~1
        MB of JSON.

        Each producer of a task numbers its own ``partition``'s pages from 0 and marks the last
        ``is_last``; pages may arrive in any order and repeat; the file holds partition 0's pages in
        seq order, then 1's... (docs/events.md, "Push contract"). Values go as a data API's JSON
        would carry them (Decimal literal, base64 bytes, ISO 8601 times, UUID text, numpy scalars,
        nested dicts and lists). Raises ``TypeError`` (row, column), ``pydantic.ValidationError`` or
        ``BufferError``."""
        from sinks.values import dumps_rows  # pyarrow: only push mode needs it, not the API

        clean = [_json_row(i, row) for i, row in enumerate(rows)]
        body, _plain = dumps_rows(clean)
        self.send(T.PAGES, task_id, PageBatch(
            taskId=task_id, seq=seq, partition=partition, partitions=partitions,
            rowsJson=body.decode("utf-8"), rowCount=len(clean), rowsBefore=rows_before,
            isLast=is_last, spec=spec))

    def send_records(self, records: list[tuple[str, bytes, bytes, int | None]],
                     timeout: float) -> None:
        """Produce encoded records ``(full topic name, key, value, partition or
        None)`` with the current trace's ``traceparent`` header and wait for
        their acks (blocking: call it in a thread).

        Raises:
            RuntimeError: one was refused or not acknowledged within ``timeout`` s.
        """
        from plait import tracing

        errors: list[str] = []

        def done(err, _msg):
            if err is not None:
                errors.append(str(err))

        tp = tracing.current_traceparent()
        for topic, key, value, partition in records:
            kwargs: dict[str, Any] = {"partition": partition} if partition is not None else {}
            if tp:
                kwargs["headers"] = [(tracing.TRACEPARENT, tp.encode())]
            self._producer.produce(topic, key=key, value=value, on_delivery=done, **kwargs)
        remaining = self._producer.flush(timeout)
        if remaining or errors:
            raise RuntimeError(f"Kafka did not take the events: {errors or f'{remaining} unsent'}")

    def partition_count(self, topic: str, timeout: float) -> int | None:
        """Partitions of ``topic`` (full name) from the broker's metadata;
        None when the topic is unknown. Blocking; raises ``KafkaException``
        when the broker does not answer within ``timeout`` s."""
        meta = self._producer.list_topics(topic, timeout=timeout).topics.get(topic)
        return len(meta.partitions) if meta is not None and meta.partitions else None

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self._errors.append(f"{msg.topic()}: {err}")
        else:
            self._down = None

    def _on_error(self, err) -> None:
        # librdkafka's client-wide errors; it keeps retrying on its own
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self._down = err.str()

    def flush(self, timeout: float = 30.0, unreachable_after: float = 5.0) -> None:
        """Wait until every queued event is acknowledged. Raises BrokerUnreachable after
        ``unreachable_after`` s without a broker (events stay queued), or RuntimeError after
        ``timeout`` s or on refusals (naming topic and error)."""
        start = time.monotonic()
        while True:  # short flushes, so an unreachable broker is noticed early
            left = self._producer.flush(min(0.5, timeout))
            if not left or time.monotonic() - start >= timeout:
                break
            if self._down and time.monotonic() - start >= unreachable_after:
                raise BrokerUnreachable(
                    f"cannot reach Kafka at {self.bootstrap} ({left} events queued); start the "
                    f"broker (`plait dev`) or pass the right bootstrap / PLAIT_BROKER_URL")
        if left:
            raise RuntimeError(f"{left} events not acknowledged by the broker after {timeout}s")
        if self._errors:
            errors, self._errors = self._errors, []
            raise RuntimeError(f"{len(errors)} events refused by the broker: {errors[0]}")
