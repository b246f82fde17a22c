"""Cell rendering shared by the text-like writers (csv, xlsx, jsonl).

A writer gets one record batch at a time and turns each column into a plain
Python list (``Array.to_pylist`` per batch: memory is one batch, never the
file). The expensive per-cell checks (formula start, XML-forbidden control
characters, over-long text) are first done vectorized with Arrow compute; only
the few cells that match are touched in Python.

Rules and where they come from:

- Formula injection (OWASP "CSV Injection"): a text starting with ``=``, ``+``,
  ``-``, ``@``, tab or carriage return is neutralized, counted as
  ``formula_escaped``. csv prefixes a single quote; xlsx keeps the text as is in
  a string cell styled with Excel's quote prefix (``'`` shown in the edit bar,
  so even re-editing the cell cannot turn it into a formula).
- XML 1.0 forbids the control characters U+0000..U+001F except tab, LF and CR,
  and U+FFFE/U+FFFF; xlsx is XML, so they are removed (``sanitized``). csv
  removes them too so that both formats carry the same text.
- Excel holds at most 32,767 characters in a cell ("Excel specifications and
  limits"); longer text is cut (``truncated``), counting UTF-16 code units the
  way Excel does and never splitting a surrogate pair.
- Numbers as text (csv, mixed columns in parquet) use the shortest form that
  reads back as the same number: ``1`` for an integral double below 2**53,
  else Python's ``repr`` (``2.5``, ``1e+16``, ``5e-324``) (F8, F9).
- Mixed columns (``sinks.values.MIXED``) are decoded cell by cell, so every
  writer gives each cell its own type; their cells are counted ``mixed_types``
  (F7). Counts carry the column too (``kind:column``), see docs/fidelity-rules.md.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from plait.spec import DocumentConfig
from sinks.values import (
    MAX_DECIMAL_DIGITS, MAX_EXACT_INT, MIXED_TYPES, is_mixed, iso_texts, read_mixed_cell,
)
from sinks.writers.base import FileEntry, WriteReport

#: First characters that make a spreadsheet treat text as a formula (OWASP).
FORMULA_START = frozenset("=+-@\t\r")
#: Excel's maximum characters in one cell.
XLSX_MAX_CELL_CHARS = 32_767

BAD_PY = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
BAD_RE2 = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x{FFFE}\x{FFFF}]"
_FORMULA_RE2 = r"^[=+\-@\t\r]"

QUALITY_KEYS = ("truncated", "sanitized", "formula_escaped", "converted_to_text")


@dataclass
class Quality:
    """Counts of cells a writer changed, by kind (see module docstring)."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(QUALITY_KEYS, 0))

    def add(self, kind: str, n: int = 1, column: str | None = None) -> None:
        """Count ``n`` more cells of ``kind`` (and of ``kind:column`` when given)."""
        self.counts[kind] = self.counts.get(kind, 0) + n
        if column is not None:
            key = f"{kind}:{column}"
            self.counts[key] = self.counts.get(key, 0) + n


class Quoted(str):
    """A text cell that had to be neutralized (xlsx writes it quote-prefixed)."""

    __slots__ = ()


def headers(schema: pa.Schema, doc: DocumentConfig, with_zone: bool) -> list[str]:
    """Header text per field: ``ColumnSpec.headerName`` or the field name; with
    ``with_zone`` a timestamp column's header names its zone (``ts (UTC)``)."""
    names = {c.fieldName: c.header for c in doc.columns or []}
    out = []
    for f in schema:
        h = names.get(f.name, f.name)
        if with_zone and pa.types.is_timestamp(f.type):
            h = f"{h} ({f.type.tz or 'UTC'})"
        out.append(h)
    return out


def utf16_cut(s: str, limit: int) -> str:
    """``s`` cut to at most ``limit`` UTF-16 code units without splitting a pair."""
    if len(s) <= limit // 2:
        return s
    units = 0
    for i, ch in enumerate(s):
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit:
            return s[:i]
    return s


def text_cells(col: pa.Array, quality: Quality, *, escape: bool, mark: Callable[[str], str],
               sanitize: bool = True, max_chars: int | None = None,
               column: str | None = None) -> list:
    """One text column of a batch as a list (``None`` for null).

    ``escape``: neutralize formula-like text with ``mark`` (csv: prefix ``'``;
    xlsx: :class:`Quoted`); ``sanitize``: drop XML-forbidden control characters;
    ``max_chars``: cut longer text (UTF-16 units). Counts go to ``quality``
    (also per ``column`` when given).
    """
    if not pa.types.is_string(col.type):
        col = pc.cast(col, pa.string())
    values = col.to_pylist()
    patterns = ([BAD_RE2] if sanitize else []) + ([_FORMULA_RE2] if escape else [])
    need = pc.match_substring_regex(col, "|".join(patterns)) if patterns else None
    if max_chars is not None:
        long = pc.greater(pc.binary_length(col), max_chars)
        need = long if need is None else pc.or_(need, long)
    if need is None or not pc.any(need).as_py():
        return values
    for i in pc.indices_nonzero(pc.fill_null(need, False)).to_pylist():
        s = values[i]
        if sanitize and BAD_PY.search(s):
            s = BAD_PY.sub("", s)
            quality.add("sanitized", 1, column)
        if max_chars is not None:
            cut = utf16_cut(s, max_chars)
            if len(cut) != len(s):
                quality.add("truncated", 1, column)
            s = cut
        if escape and s[:1] in FORMULA_START:
            s = mark(s)
            quality.add("formula_escaped", 1, column)
        values[i] = s
    return values


def float_cells(col: pa.Array, inf_text: str, as_text: bool) -> tuple[list, bool]:
    """A float column as a list: NaN -> ``None``, +/-inf -> ``inf_text`` /
    ``-inf_text``; other values stay floats, or shortest round-trip text when
    ``as_text``. Returns ``(values, has_inf)``."""
    values = col.to_pylist()
    has_inf = bool(pc.any(pc.is_inf(col)).as_py())
    has_nan = bool(pc.any(pc.is_nan(col)).as_py())
    if has_inf or has_nan:
        for i, v in enumerate(values):
            if v is not None and not math.isfinite(v):
                values[i] = None if v != v else (inf_text if v > 0 else "-" + inf_text)
    if as_text:
        values = [v if v is None or type(v) is str else shortest(v) for v in values]
    return values, has_inf


def shortest(v: float) -> str:
    """The shortest text that reads back as the double ``v``: ``1`` for an
    integral value below 2**53 in magnitude (``-0.0`` -> ``0``), else ``repr``."""
    if v.is_integer() and -MAX_EXACT_INT < v < MAX_EXACT_INT:
        return str(int(v))
    return repr(v)


def number_text(v: object, inf_text: str) -> str:
    """Source form of a number cell of a mixed column (int, float, Decimal)."""
    if type(v) is float:
        if math.isfinite(v):
            return shortest(v)
        return inf_text if v > 0 else "-" + inf_text
    return str(v)


def iso_cells(col: pa.Array) -> list:
    """Timestamps (in their column's zone) and dates as ISO-8601 text (also
    beyond year 9999, see ``sinks.values.iso_texts``)."""
    return iso_texts(col)


def mixed_cells(col: pa.Array) -> list:
    """The decoded values of a mixed column (str, int, float, Decimal, bool, None)."""
    return [read_mixed_cell(v) for v in col.to_pylist()]


def decimal_float(d, digits: int = MAX_DECIMAL_DIGITS) -> float | None:
    """``float(d)`` when that double holds the Decimal ``d`` exactly to
    ``digits`` significant digits (Excel keeps 15) and Excel can show it; else
    ``None`` (the caller writes the digits as text)."""
    if not d.is_finite():
        return None
    if d.is_zero():
        return 0.0
    if len(d.normalize().as_tuple().digits) > digits:
        return None
    f = float(d)
    return f if excel_number_ok(f) else None


def json_decimal(d) -> float | None:
    """``float(d)`` when it reads back as the same value (``0.10`` -> 0.1), else
    ``None``: JSON writers then write the digits as a string."""
    try:
        f = float(d)
    except (OverflowError, ValueError):
        return None
    return f if math.isfinite(f) and type(d)(repr(f)) == d else None


#: Smallest positive normal double and Excel's largest number (Microsoft,
#: "Excel specifications and limits": 9.99999999999999E+307).
EXCEL_MIN_NUMBER = 2.2250738585072014e-308
EXCEL_MAX_NUMBER = 9.99999999999999e307


def excel_number_ok(v: float) -> bool:
    """Whether Excel shows the double ``v`` as itself (not 0, not an error)."""
    a = abs(v)
    return a == 0 or EXCEL_MIN_NUMBER <= a <= EXCEL_MAX_NUMBER


def other_cells(col: pa.Array) -> list:
    """Any other Arrow type (decimal, struct, list, binary...) as text: a cast to
    string where Arrow has one, else compact JSON."""
    try:
        return pc.cast(col, pa.string()).to_pylist()
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return [None if v is None else json.dumps(v, sort_keys=True, separators=(",", ":"),
                                                  ensure_ascii=False, default=str)
                for v in col.to_pylist()]


def kind_of_field(f: pa.Field) -> str:
    """:func:`kind_of` of a field, or ``mixed`` for a mixed column."""
    return "mixed" if is_mixed(f) else kind_of(f.type)


def kind_of(t: pa.DataType) -> str:
    """The rendering kind of an Arrow type: text, int, float, decimal, bool,
    datetime, date, or other (rendered as text)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t):
        return "text"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_timestamp(t):
        return "datetime"
    if pa.types.is_date(t):
        return "date"
    return "other"


class SingleFileWriter:
    """Common state of the one-file writers: target path, schema, rows written,
    quality counts and sheets; :meth:`report` builds the :class:`WriteReport`."""

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig) -> None:
        self.path, self.schema, self.doc = path, schema, doc
        # column names once: ``pa.Schema.names`` builds a new list on every
        # access, so indexing it per column is quadratic in the column count
        self.names: list[str] = schema.names
        self.rows = 0
        self.sheets = 0
        self.quality = Quality()
        self.closed = False

    def _check_batch(self, batch: pa.RecordBatch) -> None:
        if self.closed:
            raise RuntimeError(f"writer for {self.path.name} is closed")
        if batch.schema.names != self.schema.names:
            raise ValueError(f"batch columns {batch.schema.names[:5]}... do not match the "
                             f"writer schema {self.schema.names[:5]}... (conform it first)")

    def report(self) -> WriteReport:
        """The report of this one file; ``quality`` also holds ``files``/``sheets``."""
        self.closed = True
        quality = dict(self.quality.counts, files=1, sheets=self.sheets)
        return WriteReport(path=self.path, rows=self.rows,
                           files=[FileEntry(self.path.name, self.rows)],
                           sheets=self.sheets, quality=quality)


def mixed_column(col: pa.Array, name: str, quality: Quality, **text_rules) -> list:
    """A mixed column of a batch as decoded values; its text cells already went
    through :func:`text_cells` with ``text_rules`` (escape, mark, sanitize,
    max_chars). Counts the non-null cells as ``mixed_types`` for ``name``."""
    values = mixed_cells(col)
    texts = [i for i, v in enumerate(values) if type(v) is str]
    if texts:
        done = text_cells(pa.array([values[i] for i in texts], pa.string()), quality,
                          column=name, **text_rules)
        for i, v in zip(texts, done):
            values[i] = v
    n = len(values) - values.count(None)
    if n:
        quality.add(MIXED_TYPES, n, name)
    return values
