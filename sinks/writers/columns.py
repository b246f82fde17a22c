"""Column-wise rendering in Arrow compute for the text writers (csv, jsonl): each function returns a
``pa.StringArray`` with the text the cell-by-cell helpers of :mod:`sinks.writers.cells` give (the
definition; ``tests/sinks/test_sinks_columns.py`` compares them); cells Arrow formats otherwise are
computed in Python, only those."""
from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from plait.spec import DocumentConfig
from sinks.values import iso_texts
from sinks.writers.cells import (
    BAD_RE2, FORMULA_RE2, NEGATIVE_NUMBER_RE2, Quality, mixed_column, number_text, other_cells, shortest,
)

_TWO53 = float(2**53)
_STR_NULL = pa.scalar(None, pa.string())
_DAY_US = 86_400_000_000
#: Python's datetime range (0001-01-01, 10000-01-01) in µs since 1970.
_FIRST_US = -62_135_596_800_000_000
_END_US = 253_402_300_800_000_000


def _patch(base: pa.Array, mask: pa.Array, fn, values: pa.Array) -> pa.Array:
    """``base`` with the cells where ``mask`` holds replaced by ``fn(value)``."""
    mask = pc.fill_null(mask, False)
    if not pc.any(mask).as_py():
        return base
    picked = pc.filter(values, mask).to_pylist()
    return pc.replace_with_mask(base, mask, pa.array([fn(v) for v in picked], pa.string()))


def float_texts(col: pa.Array, inf_text: str, json_style: bool = False) -> pa.Array:
    """Doubles as text: NaN -> null, +/-inf -> ``inf_text``; :func:`sinks.writers.cells.shortest`
    (csv, F9), or with ``json_style`` Python's ``repr`` (``1.0``, ``-0.0``)."""
    f = col.cast(pa.float64()) if col.type != pa.float64() else col
    finite = pc.is_finite(f)
    a = pc.abs(f)
    integral = pc.and_(pc.and_(finite, pc.equal(pc.floor(f), f)), pc.less(a, _TWO53))
    ints = pc.if_else(integral, f, 0.0).cast(pa.int64()).cast(pa.string())
    gen = f.cast(pa.string())  # shortest round-trip digits (Arrow), own layout
    if json_style:
        ints = pc.binary_join_element_wise(ints, ".0", "")
        small = pc.less(a, 1e16)
        integral = pc.and_(integral, small)
        negzero = pc.and_(pc.equal(f, 0.0), pc.less(pc.divide(1.0, f), 0.0))
        ints = pc.if_else(negzero, "-0.0", ints)
    out = pc.if_else(integral, ints, gen)
    # Python's repr uses exponents below 1e-4 and from 1e16, Arrow elsewhere: those cells go to
    # Python.
    odd = pc.and_(pc.and_(finite, pc.invert(integral)),
                  pc.or_(pc.or_(pc.match_substring(gen, "e"), pc.less(a, 1e-4)),
                         pc.greater_equal(a, _TWO53)))
    out = _patch(out, odd, repr if json_style else shortest, f)
    out = pc.if_else(finite, out, _STR_NULL)
    inf = pc.fill_null(pc.is_inf(f), False)
    if pc.any(inf).as_py():
        out = pc.if_else(inf, pc.if_else(pc.greater(f, 0.0), inf_text, "-" + inf_text), out)
    return out


def iso_array(col: pa.Array) -> pa.Array:
    """Timestamps (in their zone, ISO-8601 with offset) and dates as text,
    exactly as :func:`sinks.values.iso_texts` writes them."""
    if col.null_count == len(col):
        return pa.nulls(len(col), pa.string())
    if pa.types.is_date32(col.type):
        lo, hi = pc.min_max(col.cast(pa.int32())).values()
        if lo.as_py() >= _FIRST_US // _DAY_US and hi.as_py() < _END_US // _DAY_US:
            return col.cast(pa.string())
        return pa.array(iso_texts(col), pa.string())
    if not pa.types.is_timestamp(col.type) or col.type.unit != "us":
        return pa.array(iso_texts(col), pa.string())
    if len(col) >= _DISTINCT_MIN:
        # Few distinct instants a page: format each once, take the texts by index.
        uniq = pc.unique(col)
        if len(uniq) * 2 <= len(col):
            return pc.take(_iso_timestamps(uniq), pc.index_in(col, uniq))
    return _iso_timestamps(col)


_DISTINCT_MIN = 64


def _iso_timestamps(col: pa.Array) -> pa.Array:
    """:func:`iso_array` of a ``timestamp("us")`` column, cell by cell."""
    utc = col.cast(pa.int64())
    wall = pc.local_timestamp(col).cast(pa.int64()) if col.type.tz else utc
    lo, hi = pc.min_max(wall).values()
    if lo.as_py() < _FIRST_US or hi.as_py() >= _END_US:
        return pa.array(iso_texts(col), pa.string())
    if col.type.tz:
        off = pc.subtract(wall, utc)
        if pc.any(pc.not_equal(pc.subtract(off, pc.multiply(pc.divide(off, 60_000_000),
                                                            60_000_000)), 0)).as_py():
            return pa.array(iso_texts(col), pa.string())  # LMT offsets with seconds
        # Naive wall text, then each cell's offset; a zone has few offsets, formatted once (strftime
        # %z looks the zone up per cell).
        minutes = pc.divide(off, 60_000_000)
        offsets = pc.unique(minutes).drop_null()
        labels = pa.array([f"{'-' if m < 0 else '+'}{abs(m) // 60:02d}:{abs(m) % 60:02d}"
                           for m in offsets.to_pylist()], pa.string())
        return pc.binary_join_element_wise(
            _wall_texts(wall), pc.take(labels, pc.index_in(minutes, offsets)), "")
    return _wall_texts(utc)


def _wall_texts(wall: pa.Array) -> pa.Array:
    """µs since 1970 (years 1..9999) as naive ISO text, ``.ffffff`` only when not 0 (as
    ``datetime.isoformat``)."""
    whole = pc.fill_null(pc.equal(pc.subtract(wall, pc.multiply(pc.divide(wall, 1_000_000),
                                                                1_000_000)), 0), True)
    # Arrow's cast to text ("2023-11-14 22:13:20[.ffffff]") with the space made a "T": about ten
    # times cheaper than strftime, which formats through the zone library cell by cell
    seconds = pc.all(whole).as_py()  # the common case: whole seconds, no fraction to cut
    stamps = (pc.divide(wall, 1_000_000).cast(pa.timestamp("s")) if seconds
              else wall.cast(pa.timestamp("us")))
    text = pc.replace_substring(stamps.cast(pa.string()), " ", "T", max_replacements=1)
    return text if seconds else pc.replace_substring_regex(text, r"\.000000$", "")


def clean_text(col: pa.Array, quality: Quality, column: str | None, *, escape: bool,
               sanitize: bool = True, prefix: str = "'") -> pa.Array:
    """Text cells as :func:`sinks.writers.cells.text_cells` renders them for csv: forbidden
    characters removed (``sanitized``), formula-like starts prefixed with ``prefix`` when
    ``escape``."""
    if not pa.types.is_string(col.type):
        col = col.cast(pa.string())
    if col.null_count == len(col):
        return col
    if sanitize:
        bad = pc.fill_null(pc.match_substring_regex(col, BAD_RE2), False)
        n = pc.sum(bad).as_py() or 0
        if n:
            col = pc.replace_substring_regex(col, BAD_RE2, "")
            quality.add("sanitized", n, column)
    if escape:
        hit = pc.fill_null(pc.and_not(pc.match_substring_regex(col, FORMULA_RE2),
                                      pc.match_substring_regex(col, NEGATIVE_NUMBER_RE2)), False)
        n = pc.sum(hit).as_py() or 0
        if n:
            col = pc.if_else(hit, pc.binary_join_element_wise(prefix, col, ""), col)
            quality.add("formula_escaped", n, column)
    return col


def decimal_texts(col: pa.Array) -> pa.Array:
    """Decimals as plain digits at the column's scale (F11: ``0.0000001``, ``-0.100``): Arrow's
    cast writes an adjusted exponent below -6 in E-notation (``1E-7``), which is redone here. A
    negative scale keeps Arrow's form (``3.791E+5``: the digits the source gave)."""
    text = col.cast(pa.string())
    exp = pc.fill_null(pc.match_substring(text, "E-"), False)
    if not pc.any(exp).as_py():
        return text
    return pc.if_else(exp, pa.array([format(Decimal(v), "f") if v is not None and "E-" in v
                                     else None for v in text.to_pylist()], pa.string()), text)


def bool_texts(col: pa.Array) -> pa.Array:
    """Booleans as ``true``/``false`` (null stays null)."""
    return pc.if_else(col, "true", "false")


def text_column(kind: str, col: pa.Array, name: str, quality: Quality, doc: DocumentConfig,
                *, escape: bool) -> pa.Array:
    """One column as the text a reader sees (csv, pdf, docx), by ``kind``
    (:func:`sinks.writers.cells.kind_of_field`): text cleaned, numbers with every digit or shortest,
    booleans, ISO dates, mixed cells in source form; null stays null; counts to ``quality``."""
    if kind == "text":
        return clean_text(col, quality, name, escape=escape)
    if kind == "int":
        return col.cast(pa.string())
    if kind == "decimal":
        return decimal_texts(col)
    if kind == "float":
        return float_texts(col, doc.infText)
    if kind == "bool":
        return bool_texts(col)
    if kind in ("datetime", "date"):
        return iso_array(col)
    if kind == "mixed":
        inf = doc.infText
        values = mixed_column(col, name, quality, escape=escape, mark=lambda s: "'" + s)
        return pa.array([v if v is None or type(v) is str else
                         ("true" if v else "false") if type(v) is bool else
                         number_text(v, inf) for v in values], pa.string())
    return pa.array(other_cells(col), pa.string())
