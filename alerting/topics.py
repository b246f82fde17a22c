"""Topics and Redis keys the alerting room adds, in one place.

``alerts.funnel`` (internal, keyed by receiver) and the changelog of the
``alerting-state`` table are created here, explicitly, with the deployment's
partition count (PITFALLS.md #7: Faust runs with ``topic_allow_declare=False``
and broker auto-creation picks its own defaults). The changelog and the
funnel topic must have the same partition count: a table partition is
written from the event partition it belongs to.
"""
from __future__ import annotations

import time

from alerting.wire import FUNNEL_TOPIC

#: Redis hash: field = funnel partition, value = that partition's counters (JSON).
COUNTERS_KEY = "{prefix}:alerts:counters"
#: Redis hash: field = silence id, value = the silence (JSON, as created).
SILENCES_KEY = "{prefix}:alerts:silences"
#: Redis hash per funnel partition: field = episode key, value = the current
#: alert as Alertmanager's gettableAlert (JSON); see :mod:`alerting.view`.
VIEW_KEY = "{prefix}:alerts:view:{partition}"

__all__ = ["COUNTERS_KEY", "SILENCES_KEY", "VIEW_KEY", "FUNNEL_TOPIC", "ensure_topics"]


def ensure_topics(bootstrap: str, names: list[str], partitions: int,
                  compacted: list[str] = (), timeout: float = 20.0) -> None:
    """Create the topics ``names`` with ``partitions`` partitions (replication
    1) unless they exist; ``compacted`` ones get ``cleanup.policy=compact``
    (Kafka compacts the changelog; Tansu ignores or refuses the setting, then
    the topic is created without it).

    Raises:
        RuntimeError: naming the topic that could not be created, or an
            existing topic whose partition count differs.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

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
    for name in names:
        if name in meta:
            have = len(meta[name].partitions)
            if have != partitions:
                raise RuntimeError(f"topic {name} has {have} partitions, expected {partitions} "
                                   f"(PLAIT_PARTITIONS); recreate it or change the setting")
            continue
        configs = [{"cleanup.policy": "compact"}, {}] if name in compacted else [{}]
        for i, config in enumerate(configs):
            fut = admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name]
            try:
                fut.result(timeout)
                break
            except KafkaException as exc:
                code = exc.args[0].code()
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    break
                if i + 1 == len(configs):
                    raise RuntimeError(f"cannot create topic {name}: {exc}") from exc
