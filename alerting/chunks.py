"""Values larger than one record (:data:`plait.records.MAX_RECORD_BYTES`), carried in several
(docs/kafka-rules.md #17): a message in flight of 10,000 alerts is megabytes.

- Table values (:mod:`alerting.store`): raw byte pieces under ``<p>|ck|<version>|<i>|<key>``; the
  key holds a head ``{"~chunks":[version, pieces, bytes, crc32]}``. A fresh version per write, the
  pieces written before the head and old pieces deleted after it, on one changelog partition: any
  durable prefix after ``kill -9`` leaves a head whose pieces are intact (:func:`join_value` checks
  length and CRC-32); orphan pieces are deleted on load.
- Topic records (``alerts.notifications``): consecutive records with the same key, each
  ``{"chunk": {"id", "part", "parts", "bytes", "crc32"}, "data": base64}``; :func:`join_records`
  gives the values back in order.
"""
from __future__ import annotations

import base64
import math
import os
import zlib
from typing import Any, Iterable, Iterator, MutableMapping

import orjson

from plait.records import MAX_RECORD_BYTES

#: The member a table head holds, and how its JSON bytes start.
HEAD = "~chunks"
_HEAD_START = b'{"' + HEAD.encode() + b'":'
#: Kind of the piece keys in a partition's key space (``<p>|ck|...``).
PIECE_KIND = "ck"


def is_head(raw: bytes) -> bool:
    """Whether a stored table value is a head (:func:`split_value`)."""
    return raw.startswith(_HEAD_START)


def fits(key: str, data: bytes) -> bool:
    """Whether ``data`` at table ``key`` fits one record (the changelog key is its JSON)."""
    if len(data) + 6 * len(key) + 2 <= MAX_RECORD_BYTES:  # a character is at most 6 bytes of JSON
        return True
    return len(orjson.dumps(key)) + len(data) <= MAX_RECORD_BYTES


def piece_key(prefix: str, key: str, version: str, i: int) -> str:
    """Table key of piece ``i`` of ``key``'s value written as ``version``."""
    return f"{prefix}{PIECE_KIND}|{version}|{i}|{key[len(prefix):]}"


def split_value(prefix: str, key: str, data: bytes) -> tuple[bytes, list[tuple[str, bytes]]]:
    """``data`` for table ``key`` (partition ``prefix`` ``"<p>|"``) as a head and pieces ``[(piece
    key, bytes)]``, each within one record. Write the pieces first, then the head."""
    version = os.urandom(4).hex()
    room = MAX_RECORD_BYTES - len(orjson.dumps(piece_key(prefix, key, version, 10**9)))
    n = max(1, math.ceil(len(data) / room))
    pieces = [(piece_key(prefix, key, version, i), data[i * room:(i + 1) * room]) for i in range(n)]
    head = orjson.dumps({HEAD: [version, n, len(data), zlib.crc32(data)]})
    return head, pieces


def piece_keys(prefix: str, key: str, head: bytes) -> list[str]:
    """The piece keys a head names."""
    version, n, _size, _crc = orjson.loads(head)[HEAD]
    return [piece_key(prefix, key, version, i) for i in range(n)]


def join_value(table: MutableMapping[str, Any], prefix: str, key: str, head: bytes) -> bytes:
    """The value a head stands for, read from its pieces. Raises ValueError: a piece missing, or
    length or CRC-32 not the head's."""
    _version, _n, size, crc = orjson.loads(head)[HEAD]
    parts = []
    for pk in piece_keys(prefix, key, head):
        part = table.get(pk)
        if part is None:
            raise ValueError(f"table value {key!r}: piece {pk!r} is missing")
        parts.append(bytes(part) if not isinstance(part, str) else part.encode())
    data = b"".join(parts)
    if len(data) != size or zlib.crc32(data) != crc:
        raise ValueError(f"table value {key!r}: pieces give {len(data)} bytes, crc "
                         f"{zlib.crc32(data)}; the head says {size}, {crc}")
    return data


def split_record(value: bytes, ident: str, key: bytes | None = None) -> list[bytes]:
    """``value`` as one record or as chunk records (``ident`` names it), to send in order with the
    same key."""
    room = MAX_RECORD_BYTES - (len(key) if key else 0)
    if len(value) <= room:
        return [value]
    frame = len(orjson.dumps({"chunk": {"id": ident, "part": 10**9, "parts": 10**9,
                                        "bytes": len(value), "crc32": 2**32}, "data": ""}))
    step = (room - frame) // 4 * 3  # base64: 4 bytes per 3
    n = math.ceil(len(value) / step)
    crc = zlib.crc32(value)
    return [orjson.dumps({"chunk": {"id": ident, "part": i, "parts": n, "bytes": len(value),
                                    "crc32": crc},
                          "data": base64.b64encode(value[i * step:(i + 1) * step]).decode()})
            for i in range(n)]


def join_records(values: Iterable[bytes]) -> Iterator[bytes]:
    """Whole values from one partition's records in order: non-chunks as they are, chunked values
    once complete (a value cut short by a restart is dropped when its first part comes again).
    Raises ValueError: length or CRC-32 not the chunks'."""
    open_: dict[str, list[bytes]] = {}
    for value in values:
        if not value.startswith(b'{"chunk":'):
            yield value
            continue
        doc = orjson.loads(value)
        c = doc["chunk"]
        if c["part"] == 0:
            open_[c["id"]] = []
        parts = open_.get(c["id"])
        if parts is None or len(parts) != c["part"]:
            continue  # a tail without its beginning
        parts.append(base64.b64decode(doc["data"]))
        if len(parts) == c["parts"]:
            data = b"".join(open_.pop(c["id"]))
            if len(data) != c["bytes"] or zlib.crc32(data) != c["crc32"]:
                raise ValueError(f"chunks of {c['id']!r} give {len(data)} bytes; "
                                 f"they say {c['bytes']}")
            yield data
