"""A page's shard (``streams.files``): an Arrow IPC file read back exactly, in the pieces the
growing file writes, and a damaged one refused with ``ArrowInvalid`` before any kernel runs
on it."""
from __future__ import annotations

import itertools

import pyarrow as pa
import pytest

from export_harness import spec
from sinks.values import rows_to_batch
from streams import files
from streams.layout import QUALITY_KEY

pytestmark = pytest.mark.timeout(30)


def page_batch(n: int) -> tuple[pa.RecordBatch, dict]:
    rows = [{"id": i, "s": f"text {i}" * (i % 3), "f": i / 7, "n": None} for i in range(n)]
    return rows_to_batch(rows, spec().documentConfig, page=0)


def test_a_shard_reads_back_exactly_in_pieces_of_batch_rows():
    # given a page of more rows than one piece
    batch, quality = page_batch(files.BATCH_ROWS * 2 + 5)
    data = files.encode_shard(batch, quality)
    # when it is read back
    schema, batches = files.read_shard(data)
    pieces = list(batches)
    # then the pieces hold every row in order, none over BATCH_ROWS, and the schema keeps
    # the quality counts and each int column's digits
    assert [p.num_rows for p in pieces] == [files.BATCH_ROWS, files.BATCH_ROWS, 5]
    assert pa.Table.from_batches(pieces).to_pylist() == batch.to_pylist()
    assert QUALITY_KEY in schema.metadata and schema.field("id").metadata
    decoded, counts = files.decode_shard(data)
    assert decoded.to_pylist() == batch.to_pylist() and counts == quality
    assert decoded.schema.types == batch.schema.types


def damaged_copies(data: bytes):
    """Copies of ``data`` with one byte changed that still decode without error into a batch
    whose buffers are inconsistent (what a bad disk or transfer can leave)."""
    for at in range(len(data)):
        copy = bytearray(data)
        copy[at] ^= 0x57
        try:
            batch = pa.ipc.open_file(pa.BufferReader(bytes(copy))).get_batch(0)
        except (pa.ArrowException, OSError):  # refused already (bad length, bad frame...)
            continue
        try:
            batch.validate(full=True)
        except pa.ArrowInvalid:
            yield bytes(copy)


def test_a_damaged_shard_is_refused_not_handed_to_a_writer():
    # given shards damaged so that Arrow's reader alone does not notice
    batch, quality = page_batch(300)
    damaged = list(itertools.islice(damaged_copies(files.encode_shard(batch, quality)), 20))
    assert damaged, "no damaged copy decodes without error: the test shows nothing"
    # then reading one raises ArrowInvalid (a writer's kernel would abort the process)
    for data in damaged:
        with pytest.raises(pa.ArrowInvalid):
            files.decode_shard(data)
