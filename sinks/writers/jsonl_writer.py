"""JSON Lines writer: one JSON object per row, keys in column order.

UTF-8 without ``\\u`` escapes (``ensure_ascii=False``), compact separators,
LF after every record. NaN and null -> ``null``; +/-inf -> ``doc.infText`` /
``-infText`` strings (JSON, RFC 8259, has no infinities); datetimes ISO-8601
with offset in the export zone; dates ISO; text is written as is (JSON escapes
control characters, and no spreadsheet evaluates it, so no formula escaping).
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from plait.spec import DocumentConfig
from sinks.writers.base import WriteReport
from sinks.writers.cells import SingleFileWriter, float_cells, iso_cells, kind_of, other_cells

_BUFFER = 1 << 20


class JsonlWriter(SingleFileWriter):
    """Writes ``path`` as JSON Lines; see the module docstring."""

    ext = "jsonl"

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig) -> None:
        super().__init__(path, schema, doc)
        self._file = open(path, "w", encoding="utf-8", newline="\n", buffering=_BUFFER)
        self._encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False,
                                        separators=(",", ":")).encode

    def _column(self, col: pa.Array) -> list:
        kind = kind_of(col.type)
        if kind == "float":
            return float_cells(col, self.doc.infText, as_text=False)[0]
        if kind in ("datetime", "date"):
            return iso_cells(col)
        if kind == "other":
            return other_cells(col)
        return col.to_pylist()

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append one line per row of ``batch``."""
        self._check_batch(batch)
        names = batch.schema.names
        columns = [self._column(c) for c in batch.columns]
        encode, write = self._encode, self._file.write
        for row in zip(*columns):
            write(encode(dict(zip(names, row))))
            write("\n")
        self.rows += batch.num_rows

    def close(self) -> WriteReport:
        """Flush and close the file; returns the report."""
        if not self.closed:
            self._file.close()
        return self.report()
