"""Kafka topic creation (admin client), the one place Plait creates topics.

Topics are created explicitly with the deployment's partition count
(docs/kafka-rules.md #7: Faust runs with ``topic_allow_declare=False`` and broker
auto-creation picks its own defaults, 1 partition on Kafka, 4 on Tansu).
Used by the CLI and the dev stack (every topic of ``plait.topics``) and by
the alert funnel (its internal topic and its table's compacted changelog).
"""
from __future__ import annotations

import time
from typing import Iterable


def create_topics(bootstrap: str, names: Iterable[str], partitions: int, *,
                  compacted: Iterable[str] = (), exact: bool = False,
                  timeout: float = 20.0) -> list[str]:
    """Create the topics ``names`` with ``partitions`` partitions (replication
    1) unless they exist; existing topics are left as they are.

    Args:
        bootstrap: ``host:port`` of a broker.
        names: full topic names (prefix applied, ``plait.topics.Topics``).
        partitions: partition count of every topic created.
        compacted: names among ``names`` that get ``cleanup.policy=compact``
            (Kafka compacts a changelog; Tansu ignores or refuses the setting,
            then the topic is created without it).
        exact: an existing topic must already have ``partitions`` partitions
            (a Faust table's changelog must match its event topic).
        timeout: seconds to wait for the broker's metadata and each creation.
    Returns:
        ``names`` as a list.
    Raises:
        RuntimeError: naming the topic that could not be created, or (with
            ``exact``) an existing topic whose partition count differs.
        confluent_kafka.KafkaException: no metadata within ``timeout``.
    """
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
        """Create ``wanted`` (name -> config); returns the failures (an
        existing topic is no failure)."""
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
    # a broker that refuses the compact setting gets the topic without it
    failed = {n: e for n, e in failed.items() if n not in compacted} | create(
        {n: {} for n in failed if n in compacted})
    for name, exc in failed.items():
        raise RuntimeError(f"cannot create topic {name}: {exc}") from exc
    return names
