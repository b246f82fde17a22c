"""Reference (cell by cell) implementation kept as the oracle of the vectorized writer.

JSON Lines writer: one JSON object per row, keys in column order.

UTF-8 without ``\\u`` escapes (``ensure_ascii=False``), compact separators,
LF after every record. NaN and null -> ``null``; +/-inf -> ``doc.infText`` /
``-infText`` strings (JSON, RFC 8259, has no infinities); datetimes ISO-8601
with offset in the export zone; dates ISO; text is written as is (JSON escapes
control characters, and no spreadsheet evaluates it, so no formula escaping).
Decimals are JSON numbers when a double reads back as the same value (``0.10``
-> ``0.1``), else strings with every digit (``converted_to_text``). Mixed
columns keep each cell's JSON type (F7).
"""
from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from plait.spec import DocumentConfig
from sinks.writers.base import WriteReport
from sinks.writers.cells import (
    SingleFileWriter, float_cells, iso_cells, json_decimal, kind_of_field, mixed_column, other_cells,
)

_BUFFER = 1 << 20


class ReferenceJsonlWriter(SingleFileWriter):
    """Writes ``path`` as JSON Lines; see the module docstring."""

    ext = "jsonl"

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig) -> None:
        super().__init__(path, schema, doc)
        self._file = open(path, "w", encoding="utf-8", newline="\n", buffering=_BUFFER)
        self._encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False,
                                        separators=(",", ":")).encode
        self._kinds = [kind_of_field(f) for f in schema]

    def _decimals(self, values: list, name: str) -> list:
        inf = self.doc.infText
        out = []
        for v in values:
            if type(v) is Decimal:
                f = json_decimal(v)
                if f is None:
                    self.quality.add("converted_to_text", 1, name)
                    v = str(v)
                else:
                    v = f
            elif type(v) is float and not math.isfinite(v):
                v = inf if v > 0 else "-" + inf
            out.append(v)
        return out

    def _column(self, c: int, col: pa.Array) -> list:
        kind, name = self._kinds[c], self.schema.names[c]
        if kind == "mixed":
            return self._decimals(mixed_column(col, name, self.quality, escape=False, mark=str,
                                               sanitize=False), name)
        if kind == "decimal":
            return self._decimals(col.to_pylist(), name)
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
        columns = [self._column(c, col) for c, col in enumerate(batch.columns)]
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
