"""The funnel's table with its changelog written per batch, not per write.

A Faust table sends every ``table[key] = value`` to its changelog as its own
record through Faust's producer buffer: one background task publishing one
record at a time, and a ``flush`` that waits for them one by one (0.1 s
polls). A storm makes several writes per alert, so that path bounded the
whole funnel (issue 11, item 5).

:class:`BatchedTable` wraps the Faust table for :mod:`alerting.store`: reads
and writes go to the table's local store at once (what Faust's table would
hold), and each written key is remembered with its last value, so a batch
writes each key once. The agent then sends the remembered writes to the
changelog itself (:meth:`BatchedTable.drain`: records as the table would
have sent them, same key serialization (JSON), same raw value bytes, same
partition, a tombstone for a delete), all at once, and waits for their acks
together. Recovery after a restart is Faust's own: it reads the changelog
into the local store.
"""
from __future__ import annotations

from typing import Any, Iterator, MutableMapping

import orjson


class BatchedTable(MutableMapping[str, bytes]):
    """A ``MutableMapping`` over a Faust table's local store whose changelog
    records are collected instead of sent.

    Args:
        table: a Faust ``Table`` (``table.data`` is its store) whose keys are
            ``"<partition>|..."`` strings (:mod:`alerting.store`) and values
            raw bytes.
    """

    def __init__(self, table: Any) -> None:
        self.table = table
        self._pending: dict[str, bytes | None] = {}

    @property
    def store(self) -> MutableMapping[str, Any]:
        """The table's local store (Faust ``table.data``)."""
        return self.table.data

    def __getitem__(self, key: str) -> bytes:
        return self.store[key]

    def __setitem__(self, key: str, value: bytes) -> None:
        self.store[key] = value
        self._pending[key] = value

    def __delitem__(self, key: str) -> None:
        del self.store[key]
        self._pending[key] = None

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.store.keys()))

    def __len__(self) -> int:
        return len(self.store)

    def drain(self) -> list[tuple[int, bytes, bytes | None]]:
        """The changelog records of the writes since the last drain, one per
        key (its last value), in first-write order:
        ``[(partition, key bytes, value bytes or None for a delete)]``. The
        partition is the key's prefix (the funnel partition, as a Faust
        table writes from its event's partition)."""
        pending, self._pending = self._pending, {}
        return [(int(key.partition("|")[0]), orjson.dumps(key), value)
                for key, value in pending.items()]

    def pending(self) -> int:
        """Writes waiting for :meth:`drain`."""
        return len(self._pending)


async def send_records(producer: Any, topic: str,
                       records: list[tuple[int, bytes, bytes | None]]) -> list[Any]:
    """Hand ``records`` (``(partition, key, value)``, in order) to the Kafka
    producer without waiting for their acks; returns the futures to await.

    With Faust's aiokafka driver the records go into record batches built
    per partition (aiokafka ``create_batch`` / ``send_batch``: the batch
    builder is compiled code, about a tenth of ``send``'s cost per record),
    queued in order behind what the producer already holds for that
    partition. Otherwise, and for a record too big for an empty batch, one
    ``send`` per record.

    Args:
        producer: Faust's ``app.producer``.
        topic: the topic name.
    """
    futures: list[Any] = []
    kafka = getattr(producer, "_ensure_producer", None)
    kafka = kafka() if kafka is not None else None
    if kafka is None or not hasattr(kafka, "create_batch"):
        for partition, key, value in records:
            futures.append(await producer.send(topic, key, value, partition, None, None))
        return futures
    batches: dict[int, Any] = {}
    for partition, key, value in records:
        batch = batches.get(partition)
        if batch is None:
            batch = batches[partition] = kafka.create_batch()
        if batch.append(key=key, value=value, timestamp=None) is not None:
            continue
        if batch.record_count():  # full: send it, start the next one
            futures.append(await kafka.send_batch(batch, topic, partition=partition))
            batch = batches[partition] = kafka.create_batch()
            if batch.append(key=key, value=value, timestamp=None) is not None:
                continue
        batches.pop(partition)  # bigger than a batch: on its own
        futures.append(await producer.send(topic, key, value, partition, None, None))
    for partition, batch in batches.items():
        if batch.record_count():
            futures.append(await kafka.send_batch(batch, topic, partition=partition))
    return futures
