"""The one bound on a Kafka record Plait's alert path and API write, and byte cuts.

:data:`MAX_RECORD_BYTES` (256 KiB) bounds ``len(key) + len(value)`` of every
record the alert funnel writes (``alerts.funnel`` commands, the funnel
table's changelog, ``alerts.ledger``, ``alerts.notifications``, the dead
letters it keeps in ``export.dlq``), whatever a receiver's bucket, its
``batch_size`` or ``max_alerts`` or the number of alerts allow: a value that
would be larger is carried in several records (``alerting.chunks``), and a
record that still does not fit is dead-lettered, never handed to the
producer (``alerting.oversize``). The API keeps the same bound on what it
writes: alerts are cut into ``alerts.raw`` events by size
(``alerting.wire.pack_raw``), and an alert, a silence or an export spec too
large for one record is refused at the edge naming it. Apache Kafka refuses records above its
``max.message.bytes`` (1 MB by default) and the producer above its
``max_request_size`` (2 MiB here): a quarter of the broker's default leaves
room for headers and batch framing (docs/kafka-rules.md #9, docs/topics.md).
"""
from __future__ import annotations

#: Most bytes of key plus value of one record the alert path writes.
MAX_RECORD_BYTES = 256 * 1024


def record_bytes(key: bytes | None, value: bytes | None) -> int:
    """``len(key) + len(value)`` (None counts 0): the size checked against
    :data:`MAX_RECORD_BYTES`."""
    return (len(key) if key else 0) + (len(value) if value else 0)


def cut_utf8(text: str, most: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding (lone surrogates
    replaced) is at most ``most`` bytes, cut between characters."""
    data = text.encode("utf-8", errors="replace")
    return data[:most].decode("utf-8", errors="ignore")
