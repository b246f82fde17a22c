"""xlsx writer: xlsxwriter in constant-memory mode, one row at a time.

Rules and their sources (Microsoft, "Excel specifications and limits"; OWASP
"CSV Injection"; XML 1.0 section 2.2):

- A sheet holds 1,048,576 rows: the header plus 1,048,575 data rows; further
  rows go to a new sheet (``Sheet1 (2)``...) with the same header.
- At most 16,384 columns (checked in ``open_writer`` / ``rows_to_batch``).
- Text: always ``write_string`` (no ``<f>`` element can appear); longer than
  32,767 characters -> cut (``truncated``); XML-forbidden control characters
  removed (``sanitized``); formula-like text keeps its characters in a
  quote-prefixed cell (``formula_escaped``) when ``doc.escapeFormulas``.
- Numbers with ``write_number``; integers beyond 2**53 (a double cannot hold
  them) as text (``converted_to_text``); NaN and null blank; +/-inf as
  ``doc.infText`` text; booleans with ``write_boolean``.
- Datetimes as naive wall time in the export zone with a date format; the
  header names the zone (``ts (UTC)``).
- Bold, frozen header row with an autofilter; column widths estimated from the
  header and the first batch; ``ColumnSpec.format`` is the cells' number format.
- Deterministic: fixed document properties, so equal input gives equal bytes.
"""
from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import xlsxwriter

from plait.spec import XLSX_MAX_ROWS, DocumentConfig
from sinks.values import MAX_EXACT_INT
from sinks.writers.base import WriteReport
from sinks.writers.cells import (
    XLSX_MAX_CELL_CHARS, Quoted, SingleFileWriter, float_cells, headers, kind_of, other_cells,
    text_cells,
)

#: Data rows per sheet (Excel's 1,048,576 rows minus the header row).
MAX_DATA_ROWS = XLSX_MAX_ROWS - 1
#: Fixed creation time so the same input gives a byte-identical file.
FIXED_CREATED = datetime(2000, 1, 1)
_SHEET_BAD = re.compile(r"[\[\]:*?/\\\x00-\x1f]")
_DEFAULT_FORMATS = {"datetime": "yyyy-mm-dd hh:mm:ss", "date": "yyyy-mm-dd"}


def sheet_name(name: str, suffix: str = "") -> str:
    """An Excel-valid sheet name: no ``[]:*?/\\`` or control characters, not
    starting/ending with ``'``, not ``History``, at most 31 characters including
    ``suffix`` (e.g. `` (2)``)."""
    base = _SHEET_BAD.sub("_", name).strip("'").strip() or "Sheet1"
    if base.lower() == "history":
        base = "History_"
    return base[: 31 - len(suffix)] + suffix


class XlsxWriter(SingleFileWriter):
    """Writes ``path`` as xlsx (see the module docstring).

    Memory: one batch of cell values plus xlsxwriter's current row; rows are
    flushed to a temp file in the output directory.
    """

    ext = "xlsx"

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig) -> None:
        super().__init__(path, schema, doc)
        wb = xlsxwriter.Workbook(str(path), {
            "constant_memory": True, "strings_to_formulas": False, "strings_to_numbers": False,
            "strings_to_urls": False, "tmpdir": str(path.parent)})
        wb.set_properties({"created": FIXED_CREATED})
        self._wb = wb
        self._kinds = [kind_of(f.type) for f in schema]
        spec_fmt = {c.fieldName: c.format for c in doc.columns or [] if c.format}
        self._fmts, self._quoted = [], []
        for f, kind in zip(schema, self._kinds):
            num = spec_fmt.get(f.name) or _DEFAULT_FORMATS.get(kind)
            self._fmts.append(wb.add_format({"num_format": num}) if num else None)
            self._quoted.append(wb.add_format(
                {"quote_prefix": True, **({"num_format": num} if num else {})}))
        self._bold = wb.add_format({"bold": True})
        self._blank = wb.add_format({"num_format": "General"})
        self._last_blank = False
        self._headers = text_cells(pa.array(headers(schema, doc, with_zone=True), pa.string()),
                                   self.quality, escape=False, mark=str,
                                   max_chars=XLSX_MAX_CELL_CHARS)
        self._widths: list[int] | None = None
        self._ws = None
        self._row = 0  # data rows in the current sheet
        self._new_sheet()

    # -- sheets ------------------------------------------------------------
    def _new_sheet(self) -> None:
        self._finish_sheet()
        self.sheets += 1
        suffix = "" if self.sheets == 1 else f" ({self.sheets})"
        ws = self._wb.add_worksheet(sheet_name(self.doc.sheetName, suffix))
        for c, h in enumerate(self._headers):
            ws.write_string(0, c, h or "", self._bold)
        ws.freeze_panes(1, 0)
        if self._widths:
            self._apply_widths(ws)
        self._ws, self._row = ws, 0

    def _finish_sheet(self) -> None:
        if self._ws is not None and self.schema.names:
            self._ws.autofilter(0, 0, self._row, len(self.schema) - 1)
            if self._last_blank and self._row:
                # A styled blank cell keeps a trailing all-blank row in the
                # sheet, so readers count it (xlsxwriter skips unstyled blanks).
                self._ws.write_blank(self._row, 0, None, self._blank)

    def _apply_widths(self, ws) -> None:
        for c, w in enumerate(self._widths or []):
            ws.set_column(c, c, w)

    def _estimate_widths(self, columns: list[list]) -> None:
        widths = []
        for c, values in enumerate(columns):
            longest = len(self._headers[c] or "")
            kind = self._kinds[c]
            if kind == "datetime":
                longest = max(longest, 19)
            else:
                for v in values[:1000]:
                    if v is not None:
                        longest = max(longest, len(str(v)))
            widths.append(min(max(longest + 2, 8), 60))
        self._widths = widths
        self._apply_widths(self._ws)

    # -- cells -------------------------------------------------------------
    def _column(self, c: int, col: pa.Array):
        """``(values, write)`` for one column of a batch; ``write(r, c, v, fmt)``."""
        ws, kind = self._ws, self._kinds[c]
        if kind == "text" or kind == "other":
            if kind == "other":
                col = pa.array(other_cells(col), pa.string())
            values = text_cells(col, self.quality, escape=self.doc.escapeFormulas, mark=Quoted,
                                max_chars=XLSX_MAX_CELL_CHARS)
            if pc.any(pc.equal(pc.binary_length(col), 0)).as_py():
                values = [v or None for v in values]  # "" is a blank cell, not an empty string
            if not any(type(v) is Quoted for v in values):
                return values, ws.write_string
            quoted = self._quoted[c]

            def write_text(r, c, v, fmt):
                ws.write_string(r, c, v, quoted if type(v) is Quoted else fmt)
            return values, write_text
        if kind == "int":
            values = col.to_pylist()
            lo, hi = pc.min_max(col).values()
            if lo.as_py() is None or (-MAX_EXACT_INT <= lo.as_py() and hi.as_py() <= MAX_EXACT_INT):
                return values, ws.write_number

            def write_int(r, c, v, fmt):
                if -MAX_EXACT_INT <= v <= MAX_EXACT_INT:
                    ws.write_number(r, c, v, fmt)
                else:
                    self.quality.add("converted_to_text")
                    ws.write_string(r, c, str(v), fmt)
            return values, write_int
        if kind == "float":
            values, has_inf = float_cells(col, self.doc.infText, as_text=False)
            if not has_inf:
                return values, ws.write_number

            def write_float(r, c, v, fmt):
                if type(v) is str:
                    ws.write_string(r, c, v)
                else:
                    ws.write_number(r, c, v, fmt)
            return values, write_float
        if kind == "bool":
            return col.to_pylist(), ws.write_boolean
        if kind == "datetime":
            return pc.local_timestamp(col).to_pylist(), ws.write_datetime
        return col.to_pylist(), ws.write_datetime  # date

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append ``batch``'s rows, starting a new sheet after 1,048,575 rows."""
        self._check_batch(batch)
        start = 0
        while start < batch.num_rows:
            if self._row >= MAX_DATA_ROWS:
                self._new_sheet()
            take = min(MAX_DATA_ROWS - self._row, batch.num_rows - start)
            self._write_rows(batch.slice(start, take))
            start += take

    def _write_rows(self, batch: pa.RecordBatch) -> None:
        prepared = [self._column(c, col) for c, col in enumerate(batch.columns)]
        columns = [p[0] for p in prepared]
        if self._widths is None:
            self._estimate_widths(columns)
        writes = [p[1] for p in prepared]
        fmts = self._fmts
        cols = range(len(columns))
        r = self._row + 1
        for row in zip(*columns):
            for c in cols:
                v = row[c]
                if v is not None:
                    writes[c](r, c, v, fmts[c])
            r += 1
        self._last_blank = batch.num_rows > 0 and all(col[-1] is None for col in columns)
        self._row += batch.num_rows
        self.rows += batch.num_rows

    def close(self) -> WriteReport:
        """Finish the last sheet and write the workbook; returns the report."""
        if not self.closed:
            self._finish_sheet()
            self._wb.close()
        return self.report()
