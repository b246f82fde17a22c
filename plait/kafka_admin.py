"""Kafka topic creation, explicit with the deployment's partition count (docs/kafka-rules.md #7),
and reading a range of offsets back (docs/kafka-rules.md #18)."""
from __future__ import annotations

import time
from typing import Iterable


def create_topics(bootstrap: str, names: Iterable[str], partitions: int, *,
                  compacted: Iterable[str] = (), exact: bool = False,
                  timeout: float = 20.0) -> list[str]:
    """Create ``names`` with ``partitions`` partitions (replication 1) unless they exist; returns
    them as a list. ``compacted``: ``cleanup.policy=compact`` where the broker takes it; ``exact``:
    an existing topic must have ``partitions``. Raises RuntimeError naming the topic, KafkaException
    without metadata."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    names, compacted = list(names), set(compacted)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        try:
            meta = admin.list_topics(timeout=5).topics
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    missing = []
    for name in names:
        if name not in meta:
            missing.append(name)
        elif exact and len(meta[name].partitions) != partitions:
            raise RuntimeError(f"topic {name} has {len(meta[name].partitions)} partitions, "
                               f"expected {partitions} (PLAIT_PARTITIONS); recreate it or "
                               "change the setting")

    def create(wanted: dict[str, dict]) -> dict[str, Exception]:
        """Create ``wanted`` (name -> config); the failures (existing is no failure)."""
        if not wanted:
            return {}
        futures = admin.create_topics([NewTopic(n, partitions, 1, config=c)
                                       for n, c in wanted.items()])
        failed = {}
        for name, fut in futures.items():
            try:
                fut.result(timeout)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    failed[name] = exc
        return failed

    failed = create({n: {"cleanup.policy": "compact"} if n in compacted else {} for n in missing})
    failed = {n: e for n, e in failed.items() if n not in compacted} | create(
        {n: {} for n in failed if n in compacted})
    for name, exc in failed.items():
        raise RuntimeError(f"cannot create topic {name}: {exc}") from exc
    return names


def read_offsets(bootstrap: str, topic: str, partition: int, start: int, stop: int,
                 timeout: float = 30.0) -> list[tuple[int, bytes | None]]:
    """Blocking: the records of ``topic`` partition ``partition`` at offsets ``start`` to ``stop``
    (exclusive) as ``[(offset, value)]``, read without a consumer group (nothing committed); fewer
    when some are gone (retention) or the partition ends before ``stop`` (its end is the
    consumer's partition-EOF event: Tansu's watermarks lag its log). Raises TimeoutError after
    ``timeout`` s, KafkaException on a broker error."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "plait-read-offsets",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})
    out: list[tuple[int, bytes | None]] = []
    deadline = time.monotonic() + timeout
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        while not out or out[-1][0] < stop - 1:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}[{partition}] offsets {start}..{stop - 1}: read "
                                   f"{len(out)} in {timeout:.0f} s")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().name() == "_PARTITION_EOF":
                    break
                raise KafkaException(msg.error())
            if msg.offset() >= stop:
                break
            out.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return out
