"""Reference (cell by cell) implementation kept as the oracle of the vectorized writer.

CSV writer (RFC 4180) streaming one record batch at a time.

- Quoting: ``csv.QUOTE_MINIMAL`` (RFC 4180 section 2: fields holding the
  delimiter, a quote or a line break are quoted, quotes doubled); embedded
  newlines are kept inside the quoted field, so one row stays one record.
- ``doc.csvFlavour``: ``excel`` = UTF-8 with BOM and CRLF records (what Excel
  needs to read UTF-8, e.g. CJK text); ``plain`` = UTF-8 and LF.
- ``doc.csvDelimiter`` separates fields.
- Datetimes: ISO-8601 with offset, in the export zone (the column's tz);
  dates ISO; NaN and null: empty field; +/-inf: ``doc.infText`` / ``-infText``;
  integers with every digit; floats in their shortest form (``1``, ``2.5``);
  decimals with every digit at the column's scale; booleans ``true``/``false``.
- Mixed columns print each cell's source form (``1``, ``N/A``, ``2``; F7).
- A lone carriage return inside a field is quoted in both flavours: Python's
  csv module quotes only the line terminator's characters, so with the
  ``plain`` flavour (LF) a row holding a CR is written with every field quoted
  (still RFC 4180; readers give back the same fields).
- Text starting with = + - @ tab CR gets a ``'`` prefix when
  ``doc.escapeFormulas`` (OWASP CSV injection); XML-forbidden control
  characters are removed so csv and xlsx carry the same text.
"""
from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from plait.spec import DocumentConfig
from sinks.writers.base import WriteReport
from sinks.writers.cells import (
    SingleFileWriter, float_cells, headers, iso_cells, kind_of_field, mixed_column, number_text,
    other_cells, text_cells,
)

_BUFFER = 1 << 20


def _prefix(s: str) -> str:
    return "'" + s


class ReferenceCsvWriter(SingleFileWriter):
    """Writes ``path`` as csv; see the module docstring for the rendering rules.

    Memory: one batch of rendered cells plus a 1 MiB file buffer.
    """

    ext = "csv"

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig) -> None:
        super().__init__(path, schema, doc)
        excel = doc.csvFlavour == "excel"
        self._file = open(path, "w", encoding="utf-8-sig" if excel else "utf-8",
                          newline="", buffering=_BUFFER)
        self._csv = csv.writer(self._file, delimiter=doc.csvDelimiter, quotechar='"',
                               quoting=csv.QUOTE_MINIMAL, doublequote=True,
                               lineterminator="\r\n" if excel else "\n")
        head = text_cells(pa.array(headers(schema, doc, with_zone=False), pa.string()),
                          self.quality, escape=doc.escapeFormulas, mark=_prefix)
        self._csv.writerow(head)
        self._kinds = [kind_of_field(f) for f in schema]
        # rows with a CR in a field, when CR is not part of the line terminator
        self._quote_all = None if excel else csv.writer(
            self._file, delimiter=doc.csvDelimiter, quotechar='"', quoting=csv.QUOTE_ALL,
            doublequote=True, lineterminator="\n")

    def _column(self, c: int, col: pa.Array) -> list:
        kind = self._kinds[c]
        if kind == "mixed":
            inf = self.doc.infText
            values = mixed_column(col, self.schema.names[c], self.quality,
                                  escape=self.doc.escapeFormulas, mark=_prefix)
            return [v if v is None or type(v) is str else
                    ("true" if v else "false") if type(v) is bool else number_text(v, inf)
                    for v in values]
        if kind == "decimal":  # F11: every digit at the column's scale, never an exponent
            if col.type.scale >= 0:
                return [None if v is None else format(v, "f") for v in col.to_pylist()]
            return pc.cast(col, pa.string()).to_pylist()  # a negative scale: as the source gave
        if kind == "text":
            values = text_cells(col, self.quality, escape=self.doc.escapeFormulas, mark=_prefix,
                                column=self.schema.names[c])
        elif kind == "int":
            values = pc.cast(col, pa.string()).to_pylist()
        elif kind == "float":
            values, _ = float_cells(col, self.doc.infText, as_text=True)
        elif kind == "bool":
            values = [None if v is None else ("true" if v else "false") for v in col.to_pylist()]
        elif kind in ("datetime", "date"):
            values = iso_cells(col)
        else:
            values = other_cells(col)
        return values

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append the rows of ``batch`` (columns as the writer's schema)."""
        self._check_batch(batch)
        if batch.num_rows == 0:
            return
        columns = [self._column(c, col) for c, col in enumerate(batch.columns)]
        # csv writes None as an empty field (the module's documented behaviour).
        cr = self._rows_with_cr(batch, columns) if self._quote_all else None
        if not cr:
            self._csv.writerows(zip(*columns))
        else:
            for i, row in enumerate(zip(*columns)):
                (self._quote_all if i in cr else self._csv).writerow(row)
        self.rows += batch.num_rows

    def _rows_with_cr(self, batch: pa.RecordBatch, columns: list[list]) -> set[int]:
        rows: set[int] = set()
        for c, kind in enumerate(self._kinds):
            if kind == "text":
                col = batch.column(c)
                if not pa.types.is_string(col.type):
                    continue
                hit = pc.fill_null(pc.match_substring(col, "\r"), False)
                if pc.any(hit).as_py():
                    rows.update(pc.indices_nonzero(hit).to_pylist())
            elif kind == "mixed":
                rows.update(i for i, v in enumerate(columns[c]) if type(v) is str and "\r" in v)
        return rows

    def close(self) -> WriteReport:
        """Flush and close the file; returns the report."""
        if not self.closed:
            self._file.close()
        return self.report()
