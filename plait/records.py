"""The one bound on a Kafka record the alert path and the API write (docs/kafka-rules.md #9).

:data:`MAX_RECORD_BYTES` bounds ``len(key) + len(value)``: a larger alert-path value is carried in
several records (``alerting.chunks``), one that still does not fit is dead-lettered
(``alerting.oversize``), and the API refuses such input. A quarter of Kafka's default
``max.message.bytes`` (1 MB) leaves room for headers and batch framing."""
from __future__ import annotations

MAX_RECORD_BYTES = 256 * 1024


def record_bytes(key: bytes | None, value: bytes | None) -> int:
    """``len(key) + len(value)`` (None counts 0), checked against :data:`MAX_RECORD_BYTES`."""
    return (len(key) if key else 0) + (len(value) if value else 0)


def cut_utf8(text: str, most: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 (lone surrogates replaced) fits ``most`` bytes."""
    data = text.encode("utf-8", errors="replace")
    return data[:most].decode("utf-8", errors="ignore")
