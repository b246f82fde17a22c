"""Cell rendering shared by the text-like writers (csv, xlsx, jsonl), one batch at a time; per-cell
checks run vectorized in Arrow first and only matching cells are touched in Python. Rules:

- formula injection (OWASP "CSV Injection"): text starting ``=+-@``, tab or CR is neutralized,
``formula_escaped`` (csv: ``'`` prefix; xlsx: a quote-prefixed string cell); - XML 1.0 s2.2 forbids
U+0000..U+001F but tab/LF/CR, and U+FFFE/U+FFFF: removed (``sanitized``), in csv too so both carry
the same text; - Excel holds 32,767 characters a cell ("Excel specifications and limits"): longer
text is cut in UTF-16 units, never splitting a pair (``truncated``); - numbers as text use the
shortest form that reads back the same (F8, F9); mixed columns are decoded cell by cell
(``mixed_types``, F7). Counts also per ``kind:column``."""
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

FORMULA_START = frozenset("=+-@\t\r")
XLSX_MAX_CELL_CHARS = 32_767

BAD_PY = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
BAD_RE2 = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x{FFFE}\x{FFFF}]"
FORMULA_RE2 = r"^[=+\-@\t\r]"
#: A negative number literal (``-12``, ``-0.5``, an E8 id as text): no spreadsheet reads it as a
#: formula and a prefix would change the number (E6, E8), so it is never escaped.
NEGATIVE_NUMBER = re.compile(r"-[0-9]+(\.[0-9]+)?")
NEGATIVE_NUMBER_RE2 = r"^-[0-9]+(\.[0-9]+)?$"

QUALITY_KEYS = ("truncated", "sanitized", "formula_escaped", "converted_to_text")


def formula_like(s: str) -> bool:
    """True when ``s`` starts as a formula could (OWASP "CSV Injection": ``=+-@``, tab, CR) and
    is not a negative number literal (:data:`NEGATIVE_NUMBER`)."""
    return s[:1] in FORMULA_START and not NEGATIVE_NUMBER.fullmatch(s)


@dataclass
class Quality:
    """Counts of cells a writer changed, by kind and by ``kind:column``."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(QUALITY_KEYS, 0))

    def add(self, kind: str, n: int = 1, column: str | None = None) -> None:
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
    """One text column of a batch as a list (None for null): ``escape`` formula-like text with
    ``mark``, ``sanitize`` forbidden characters, cut past ``max_chars`` UTF-16 units; counts to
    ``quality``."""
    if not pa.types.is_string(col.type):
        col = pc.cast(col, pa.string())
    values = col.to_pylist()
    patterns = ([BAD_RE2] if sanitize else []) + ([FORMULA_RE2] if escape else [])
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
        if escape and formula_like(s):
            s = mark(s)
            quality.add("formula_escaped", 1, column)
        values[i] = s
    return values


def float_cells(col: pa.Array, inf_text: str, as_text: bool) -> tuple[list, bool]:
    """``(values, has_inf)`` of a float column: NaN -> None, +/-inf -> ``inf_text``; floats, or
    shortest text when ``as_text``."""
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
    """The shortest text reading back as ``v``: ``1`` for an integral value within 2**53 (``-0.0``
    -> ``0``), else ``repr``."""
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
    """Timestamps (in their zone) and dates as ISO-8601 text, also beyond year 9999."""
    return iso_texts(col)


def mixed_cells(col: pa.Array) -> list:
    """The decoded values of a mixed column (str, int, float, Decimal, bool, None)."""
    return [read_mixed_cell(v) for v in col.to_pylist()]


def decimal_float(d, digits: int = MAX_DECIMAL_DIGITS) -> float | None:
    """``float(d)`` when it holds ``d`` exactly to ``digits`` significant digits (Excel keeps 15)
    and Excel shows it; else None (written as text)."""
    if not d.is_finite():
        return None
    if d.is_zero():
        return 0.0
    if len(d.normalize().as_tuple().digits) > digits:
        return None
    f = float(d)
    return f if excel_number_ok(f) else None


def json_decimal(d) -> float | None:
    """``float(d)`` when it reads back as the same value, else None (JSON writers write a string).
    """
    try:
        f = float(d)
    except (OverflowError, ValueError):
        return None
    return f if math.isfinite(f) and type(d)(repr(f)) == d else None


#: Smallest positive normal double; Excel's largest number ("Excel specifications and limits").
EXCEL_MIN_NUMBER = 2.2250738585072014e-308
EXCEL_MAX_NUMBER = 9.99999999999999e307


def excel_number_ok(v: float) -> bool:
    """Whether Excel shows the double ``v`` as itself (not 0, not an error)."""
    a = abs(v)
    return a == 0 or EXCEL_MIN_NUMBER <= a <= EXCEL_MAX_NUMBER


def other_cells(col: pa.Array) -> list:
    """Any other Arrow type as text: Arrow's cast to string, else compact JSON."""
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
    """The rendering kind of an Arrow type: text, int, float, decimal, bool, datetime, date or
    other."""
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
    """Common state of the one-file writers; :meth:`report` builds the :class:`WriteReport`."""

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig) -> None:
        self.path, self.schema, self.doc = path, schema, doc
        # ``Schema.names`` builds a new list per access: indexing it per column is quadratic.
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
    """A mixed column as decoded values, its text cells through :func:`text_cells` (``text_rules``);
    non-null cells counted ``mixed_types``."""
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
