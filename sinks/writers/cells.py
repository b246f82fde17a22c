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
from sinks.writers.base import FileEntry, WriteReport

#: First characters that make a spreadsheet treat text as a formula (OWASP).
FORMULA_START = frozenset("=+-@\t\r")
#: Excel's maximum characters in one cell.
XLSX_MAX_CELL_CHARS = 32_767

_BAD_PY = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_BAD_RE2 = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x{FFFE}\x{FFFF}]"
_FORMULA_RE2 = r"^[=+\-@\t\r]"

QUALITY_KEYS = ("truncated", "sanitized", "formula_escaped", "converted_to_text")


@dataclass
class Quality:
    """Counts of cells a writer changed, by kind (see module docstring)."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(QUALITY_KEYS, 0))

    def add(self, kind: str, n: int = 1) -> None:
        """Count ``n`` more cells of ``kind``."""
        self.counts[kind] = self.counts.get(kind, 0) + n


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
               sanitize: bool = True, max_chars: int | None = None) -> list:
    """One text column of a batch as a list (``None`` for null).

    ``escape``: neutralize formula-like text with ``mark`` (csv: prefix ``'``;
    xlsx: :class:`Quoted`); ``sanitize``: drop XML-forbidden control characters;
    ``max_chars``: cut longer text (UTF-16 units). Counts go to ``quality``.
    """
    if not pa.types.is_string(col.type):
        col = pc.cast(col, pa.string())
    values = col.to_pylist()
    patterns = ([_BAD_RE2] if sanitize else []) + ([_FORMULA_RE2] if escape else [])
    need = pc.match_substring_regex(col, "|".join(patterns)) if patterns else None
    if max_chars is not None:
        long = pc.greater(pc.binary_length(col), max_chars)
        need = long if need is None else pc.or_(need, long)
    if need is None or not pc.any(need).as_py():
        return values
    for i in pc.indices_nonzero(pc.fill_null(need, False)).to_pylist():
        s = values[i]
        if sanitize and _BAD_PY.search(s):
            s = _BAD_PY.sub("", s)
            quality.add("sanitized")
        if max_chars is not None:
            cut = utf16_cut(s, max_chars)
            if len(cut) != len(s):
                quality.add("truncated")
            s = cut
        if escape and s[:1] in FORMULA_START:
            s = mark(s)
            quality.add("formula_escaped")
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
        values = [v if v is None or type(v) is str else repr(v) for v in values]
    return values, has_inf


def iso_cells(col: pa.Array) -> list:
    """Timestamps (in their column's zone) and dates as ISO-8601 text."""
    return [None if v is None else v.isoformat() for v in col.to_pylist()]


def other_cells(col: pa.Array) -> list:
    """Any other Arrow type (decimal, struct, list, binary...) as text: a cast to
    string where Arrow has one, else compact JSON."""
    try:
        return pc.cast(col, pa.string()).to_pylist()
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return [None if v is None else json.dumps(v, sort_keys=True, separators=(",", ":"),
                                                  ensure_ascii=False, default=str)
                for v in col.to_pylist()]


def kind_of(t: pa.DataType) -> str:
    """The rendering kind of an Arrow type: text, int, float, bool, datetime,
    date, or other (rendered as text)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t):
        return "text"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_boolean(t):
        return "bool"
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
