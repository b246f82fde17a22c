"""xlsx writer: xlsxwriter in constant-memory mode, one row at a time. Sources: Microsoft, "Excel
specifications and limits"; OWASP "CSV Injection"; XML 1.0 s2.2.

- 1,048,575 data rows a sheet, then ``Sheet1 (2)``...; at most 16,384 columns. - Text always
``write_string``; cut, sanitized and formula-escaped as ``sinks.writers.cells``. - Numbers: integers
beyond 2**53 as text (``converted_to_text``); doubles with 17 digits (``repr``); one Excel cannot
show as text; -0.0 as 0 (F2); NaN blank; inf as ``doc.infText``; decimals as doubles when exact to
15 digits, else text (F11). - Datetimes: wall time in the export zone (named in the header), serials
rounded to ms never across midnight with ``.000`` formats (F3), 1900-01-01..1900-02-28 as 1..59,
outside Excel's range ISO text (``out_of_range``, F4, F12). Mixed columns: each cell its own type
(F7). - Bold frozen header with autofilter, widths from the first batch; fixed document properties.
"""
from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import xlsxwriter

from plait.spec import XLSX_MAX_ROWS, DocumentConfig
from sinks.values import MAX_EXACT_INT, iso_texts
from sinks.writers.base import WriteReport
from sinks.writers.cells import (
    XLSX_MAX_CELL_CHARS, Quoted, SingleFileWriter, decimal_float, excel_number_ok, float_cells,
    headers, kind_of_field, mixed_column, other_cells, text_cells,
)

MAX_DATA_ROWS = XLSX_MAX_ROWS - 1
FIXED_CREATED = datetime(2000, 1, 1)
_SHEET_BAD = re.compile(r"[\[\]:*?/\\\x00-\x1f]")
DEFAULT_FORMATS = {"datetime": "yyyy-mm-dd hh:mm:ss", "date": "yyyy-mm-dd"}
#: Default format of a datetime cell with a sub-second part (F3).
MS_FORMAT = "yyyy-mm-dd hh:mm:ss.000"
DAY_US = 86_400_000_000
#: Excel's date range, days from 1970-01-01.
EXCEL_FIRST_DAY = -25_567
EXCEL_LAST_DAY = 2_932_896
PY_FIRST_DAY = -719_162
SERIAL_1970 = 25_569


class _Exact(float):
    """A double that xlsxwriter writes with ``repr`` (17 significant digits)
    instead of ``%.16G``, so the cell reads back as the same double."""

    __slots__ = ()

    def __format__(self, spec: str) -> str:
        return float.__repr__(self).upper()


def excel_serial(us: int) -> tuple[float, bool] | None:
    """``(serial, sub_second)`` of a wall time in µs since 1970 (1900 date system), or None outside
    1900-01-01..9999-12-31; rounded to ms never across midnight; 1900-01-01..02-28 are 1..59."""
    days, rem = divmod(us, DAY_US)
    if not EXCEL_FIRST_DAY <= days <= EXCEL_LAST_DAY:
        return None
    ms = (rem + 500) // 1000
    if ms >= 86_400_000:
        ms = 86_399_999
    day = days + SERIAL_1970
    if day < 61:
        day -= 1
    return day + ms / 86_400_000, rem % 1_000_000 != 0


def sheet_name(name: str, suffix: str = "") -> str:
    """An Excel-valid sheet name (no ``[]:*?/\\`` or controls, no edge ``'``, not ``History``), at
    most 31 characters with ``suffix``."""
    base = _SHEET_BAD.sub("_", name).strip("'").strip() or "Sheet1"
    if base.lower() == "history":
        base = "History_"
    return base[: 31 - len(suffix)] + suffix


class XlsxWriter(SingleFileWriter):
    """Writes ``path`` as xlsx. Memory: one batch of cells plus the current row; rows flush to a
    temp file."""

    ext = "xlsx"

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig) -> None:
        super().__init__(path, schema, doc)
        wb = xlsxwriter.Workbook(str(path), {
            "constant_memory": True, "strings_to_formulas": False, "strings_to_numbers": False,
            "strings_to_urls": False, "tmpdir": str(path.parent)})
        wb.set_properties({"created": FIXED_CREATED})
        self._wb = wb
        self._kinds = [kind_of_field(f) for f in schema]
        spec_fmt = {c.fieldName: c.format for c in doc.columns or [] if c.format}
        self._fmts, self._quoted, self._ms_fmts = [], [], []
        ms_format = wb.add_format({"num_format": MS_FORMAT})
        for f, kind in zip(schema, self._kinds):
            num = spec_fmt.get(f.name) or DEFAULT_FORMATS.get(kind)
            self._fmts.append(wb.add_format({"num_format": num}) if num else None)
            self._ms_fmts.append(ms_format if kind == "datetime" and f.name not in spec_fmt
                                 else self._fmts[-1])
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
                # A styled blank keeps a trailing all-blank row (xlsxwriter skips unstyled blanks).
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
                                max_chars=XLSX_MAX_CELL_CHARS, column=self.names[c])
            if "" in values:  # also text that held only XML-forbidden characters
                values = [v or None for v in values]  # "" is a blank cell, not an empty string
            if not any(type(v) is Quoted for v in values):
                return values, ws.write_string
            quoted = self._quoted[c]

            def write_text(r, c, v, fmt):
                ws.write_string(r, c, v, quoted if type(v) is Quoted else fmt)
            return values, write_text
        name = self.names[c]
        if kind == "int":
            values = col.to_pylist()
            lo, hi = pc.min_max(col).values()
            if lo.as_py() is None or (-MAX_EXACT_INT <= lo.as_py() and hi.as_py() <= MAX_EXACT_INT):
                return values, ws.write_number
            return values, self._number_writer(name)
        if kind == "float":
            values, _ = float_cells(col, self.doc.infText, as_text=False)
            return values, self._number_writer(name)
        if kind == "decimal":
            return col.to_pylist(), self._number_writer(name)
        if kind == "bool":
            return col.to_pylist(), ws.write_boolean
        if kind == "mixed":
            values = mixed_column(col, name, self.quality, escape=self.doc.escapeFormulas,
                                  mark=Quoted, max_chars=XLSX_MAX_CELL_CHARS)
            return values, self._number_writer(name, self._quoted[c])
        if kind == "datetime":
            wall = pc.local_timestamp(col) if col.type.tz else col
            values = wall.cast(pa.int64()).to_pylist()
        else:
            values = [None if d is None else d * DAY_US
                      for d in col.cast(pa.int32()).to_pylist()]
        ms_fmt = self._ms_fmts[c]
        texts: list = []

        def write_time(r, c, v, fmt):
            got = excel_serial(v)
            if got is None:
                if not texts:
                    texts.append(iso_texts(col))
                if EXCEL_FIRST_DAY > v // DAY_US >= PY_FIRST_DAY:
                    # beyond Python's years 1..9999 the normalizer counted it already
                    self.quality.add("out_of_range", 1, name)
                ws.write_string(r, c, texts[0][r - first_row])
            else:
                ws.write_number(r, c, got[0], ms_fmt if got[1] else fmt)
        first_row = self._row + 1
        return values, write_time

    def _number_writer(self, name: str, quoted=None):
        """``write(r, c, v, fmt)`` for a cell of any Python type: numbers exact or as counted text,
        booleans, text."""
        ws, quality, inf_text = self._ws, self.quality, self.doc.infText

        def write(r, c, v, fmt):
            t = type(v)
            if t is float:
                if v != v:
                    return
                if excel_number_ok(v):
                    ws.write_number(r, c, _Exact(v or 0.0), fmt)
                elif v in (float("inf"), float("-inf")):
                    ws.write_string(r, c, inf_text if v > 0 else "-" + inf_text)
                else:
                    quality.add("converted_to_text", 1, name)
                    ws.write_string(r, c, repr(v))
            elif t is int:
                if -MAX_EXACT_INT <= v <= MAX_EXACT_INT:
                    ws.write_number(r, c, v, fmt)
                else:
                    quality.add("converted_to_text", 1, name)
                    ws.write_string(r, c, str(v), fmt)
            elif t is Decimal:
                f = decimal_float(v)
                if f is None:
                    quality.add("converted_to_text", 1, name)
                    ws.write_string(r, c, format(v, "f"))
                else:
                    ws.write_number(r, c, _Exact(f), fmt)
            elif t is bool:
                ws.write_boolean(r, c, v)
            elif t is Quoted:
                ws.write_string(r, c, v, quoted)
            else:  # text (a mixed column's text cell, or the inf text of a float column)
                ws.write_string(r, c, v)
        return write

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
