"""Parquet writer: typed columns as unified by ``sinks.values``, zstd.

Parquet keeps the data typed, so nothing is rendered: NaN stays NaN, +/-inf
stay infinities (a float column cannot hold ``doc.infText``), nulls stay null,
text keeps every character (no Excel limits apply), timestamps keep their zone
(also instants beyond year 9999), decimals are ``decimal128``/``decimal256``
with every digit. A mixed column (``sinks.values.MIXED``) cannot keep per-cell
types in Parquet: it is a string column of each cell's source form (``1``,
``N/A``, ``2.5``), counted ``mixed_types`` (F7).

Batches are buffered up to :data:`ROW_GROUP_ROWS` rows or
:data:`ROW_GROUP_BYTES` bytes and written as one row group, so a file of many
small pages does not end up with thousands of tiny row groups; memory stays
bounded by that buffer.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from plait.spec import DocumentConfig
from sinks.writers.base import WriteReport
from sinks.values import is_mixed
from sinks.writers.cells import SingleFileWriter, mixed_column, number_text

#: Rows buffered before a row group is written.
ROW_GROUP_ROWS = 65_536
#: Bytes buffered before a row group is written.
ROW_GROUP_BYTES = 32 << 20


class ParquetFileWriter(SingleFileWriter):
    """Writes ``path`` as Parquet (zstd) with ``schema``; see module docstring."""

    ext = "parquet"

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig) -> None:
        super().__init__(path, schema, doc)
        self._mixed = [i for i, f in enumerate(schema) if is_mixed(f)]
        self._out_schema = pa.schema([pa.field(f.name, f.type) if is_mixed(f) else f
                                      for f in schema])
        self._writer = pq.ParquetWriter(str(path), self._out_schema, compression="zstd")
        self._buffer: list[pa.RecordBatch] = []
        self._buffered_rows = 0
        self._buffered_bytes = 0

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Buffer ``batch``; flush a row group when the buffer is full."""
        self._check_batch(batch)
        if batch.num_rows == 0:
            return
        if self._mixed:
            batch = self._plain(batch)
        self._buffer.append(batch)
        self._buffered_rows += batch.num_rows
        self._buffered_bytes += batch.nbytes
        self.rows += batch.num_rows
        if self._buffered_rows >= ROW_GROUP_ROWS or self._buffered_bytes >= ROW_GROUP_BYTES:
            self._flush()

    def _plain(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Mixed columns as plain text of each cell's source form."""
        columns = list(batch.columns)
        inf = self.doc.infText
        for i in self._mixed:
            values = mixed_column(columns[i], self.names[i], self.quality, escape=False,
                                  mark=str, sanitize=False)
            columns[i] = pa.array([v if v is None or type(v) is str else
                                   ("true" if v else "false") if type(v) is bool
                                   else number_text(v, inf) for v in values], pa.string())
        return pa.RecordBatch.from_arrays(columns, schema=self._out_schema)

    def _flush(self) -> None:
        if self._buffer:
            table = pa.Table.from_batches(self._buffer, schema=self._out_schema)
            self._writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self._buffer, self._buffered_rows, self._buffered_bytes = [], 0, 0

    def close(self) -> WriteReport:
        """Write the last row group and the footer; returns the report."""
        if not self.closed:
            self._flush()
            self._writer.close()
        return self.report()
