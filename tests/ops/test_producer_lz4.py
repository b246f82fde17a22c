"""The worker's producer compresses LZ4 record batches at the fast level
(docs/kafka-rules.md #16), in the compiled record builder the producer uses,
and the batches still read back record for record."""
from __future__ import annotations

import random

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords

from streams.app import LZ4_LEVEL, fast_lz4

CODEC_LZ4 = 3


def _batch(values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=CODEC_LZ4, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 22)
    for i, value in enumerate(values):
        appended = builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=value,
                                  headers=[])
        assert appended is not None
    return bytes(builder.build())


def _values() -> list[bytes]:
    rnd = random.Random(16)
    return [b'{"fp":"%016x","status":"firing","last_seen":%.6f,"alert":{"rule":"Storm%d","asset":"s%04d"}}'
            % (rnd.getrandbits(64), 1.7e9 + rnd.random() * 1e6, rnd.randrange(10), rnd.randrange(2000))
            for _ in range(3000)]


def test_the_builder_compresses_at_the_level_set_and_the_records_read_back():
    values = _values()
    try:
        fast_lz4(9)  # aiokafka's own default
        slow = _batch(values)
        fast_lz4(LZ4_LEVEL)
        fast = _batch(values)
    finally:
        fast_lz4()
    # LZ4HC (level 9) finds more matches (~15% here): had the level not reached
    # the builder, both batches would be the same bytes
    assert len(slow) * 1.05 < len(fast) < len(b"".join(values))
    assert DefaultRecordBatchBuilder.__module__.endswith("_crecords.default_records")
    for data in (slow, fast):
        records = MemoryRecords(data).next_batch()
        assert [r.value for r in records] == values
