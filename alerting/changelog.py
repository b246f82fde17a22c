"""The funnel's table with its changelog written per batch, not per write: a Faust table sends
each write as its own record through a producer buffer flushed one by one, which bounded a storm.

:class:`BatchedTable` reads and writes the table's local store at once and remembers each written
key's last value; the agent sends them (:meth:`BatchedTable.drain`: the records Faust would send,
a tombstone per delete) together and awaits their acks together. Recovery is Faust's own.
"""
from __future__ import annotations

from typing import Any, Iterator, MutableMapping

import orjson


class BatchedTable(MutableMapping[str, bytes]):
    """A ``MutableMapping`` over a Faust ``table``'s local store (keys ``"<partition>|..."``, bytes
    values) whose changelog records are collected instead of sent."""

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
        """Changelog records since the last drain, one per key (last value) in first-write order:
        ``[(partition, key bytes, value bytes or None)]``; the partition is the key's prefix."""
        pending, self._pending = self._pending, {}
        return [(int(key.partition("|")[0]), orjson.dumps(key), value)
                for key, value in pending.items()]

    def pending(self) -> int:
        """Writes waiting for :meth:`drain`."""
        return len(self._pending)


async def send_records(producer: Any, topic: str,
                       records: list[tuple[int, bytes, bytes | None]]) -> list[Any]:
    """Hand ``records`` (``(partition, key, value)``, in order) to Faust's ``producer`` for
    ``topic`` without waiting; returns the futures. aiokafka record batches per partition
    (``create_batch``/``send_batch``: compiled, cheaper than ``send``) when available, else and
    for an oversize record one ``send`` each."""
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
