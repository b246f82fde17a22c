"""Value normalization: one page of JSON rows -> one typed Arrow record batch
(:func:`rows_to_batch`); the finalizer merges the shards' schemas (:func:`unify_schemas`) and casts
each batch (:func:`conform`).

Each rule is a case of docs/fidelity.md (E1..E16) or docs/fidelity-rules.md (F1..F12): ints stay
``int64`` within 2**53 (else text, E8); inexact number literals arrive as ``Decimal`` (F11); strings
are never guessed into numbers (E9), but an untyped column of RFC 3339 date-times with an offset is
a datetime column (F10); datetimes go to ``doc.timeZone`` (E10, F6); a column of text and numbers is
*mixed* (metadata ``plait.mixed``, JSON cells, F7); an all-null column is ``string`` with
``plait.all_null``. Counts come per kind and per ``kind:column``; with ``onInvalidValue: "fail"``
the :data:`STRICT_KINDS` raise PermanentError instead."""
from __future__ import annotations

import base64
import json
import math
import re
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal, InvalidOperation
from itertools import chain, repeat
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import PermanentError
from plait.spec import XLSX_DATA_TOO_WIDE, ColumnSpec, DocumentConfig, check_xlsx_columns

#: Largest integer magnitude a IEEE-754 double (Excel, JavaScript) holds exactly.
MAX_EXACT_INT = 2**53
#: Excel keeps 15 significant digits of a number ("Excel specifications and limits").
MAX_DECIMAL_DIGITS = 15
#: Widest decimal Arrow holds (decimal256).
MAX_DECIMAL_PRECISION = 76
#: Field metadata key marking a column that was all-null on its page.
ALL_NULL = b"plait.all_null"
#: Field metadata key marking a mixed column (cells are JSON-encoded values).
MIXED = b"plait.mixed"
#: Field metadata of an ``int64`` shard column: the digits of its widest value (ASCII), so a merge
#: with a decimal page is as narrow as a declared ``decimal`` column (F11, :func:`with_int_digits`).
INT_DIGITS = b"plait.int_digits"
#: Field metadata of an inferred decimal shard column whose every value equals its double (``0.10``,
#: not ``0.1000000000000000000001``): with a float page of the same column the column is a float
#: column, as on one page holding both (F11), whatever the page boundaries.
AS_DOUBLE = b"plait.as_double"

#: Kinds of cell change (quality report keys, docs/fidelity-rules.md).
REPLACED_INVALID_UNICODE = "replaced_invalid_unicode"
CONVERTED_TO_TEXT = "converted_to_text"
OUT_OF_RANGE = "out_of_range"
INVALID_DATE = "invalid_date"
NONEXISTENT_LOCAL_TIME = "nonexistent_local_time"
AMBIGUOUS_LOCAL_TIME = "ambiguous_local_time"
TYPE_MISMATCH = "type_mismatch"
MIXED_TYPES = "mixed_types"
#: A row without a declared column's field (blank cell).
MISSING_FIELD = "missing_field"
#: Kinds that change or drop a value: ``onInvalidValue: "fail"`` fails on them.
STRICT_KINDS = frozenset({REPLACED_INVALID_UNICODE, OUT_OF_RANGE, INVALID_DATE,
                          NONEXISTENT_LOCAL_TIME, AMBIGUOUS_LOCAL_TIME, TYPE_MISMATCH})

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)
_DAY_US = 86_400_000_000

_NONE = type(None)
_SCALARS = frozenset({str, int, float, Decimal, bool})
_NUMBERS = frozenset({int, float, Decimal})
_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}
_MASK_KEYS = {"first": "first", "keepFirst": "first", "head": "first",
              "last": "last", "keepLast": "last", "tail": "last"}
SURROGATE = re.compile("[\ud800-\udfff]")
#: RFC 3339 date-time with an offset (F10); seconds and fraction optional.
OFFSET_DATETIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:[Zz]|[+-]\d{2}:\d{2})\Z")
_ZERO_DATE = ("0000-00-00", "0000-00-00 00:00:00")


def json_number(literal: str) -> float | Decimal:
    """``parse_float`` for ``json.loads``: ``float`` when the literal is the shortest repr of its
    double, else ``Decimal`` with every digit (``0.10``, ``1E+5``)."""
    if len(literal) <= 16 and literal[-1] != "0" and "e" not in literal and "E" not in literal:
        return float(literal)  # <= 15 significant digits: repr(float) spells the same digits
    f = float(literal)
    if repr(f) == literal:
        return f
    return Decimal(literal)


_MAYBE_INEXACT = frozenset({float, dict, list})


def loads_exact(body: bytes) -> object:
    """``json.loads(body, parse_float=json_number)``, via orjson (about twice as fast) when its
    answer holds no float; else, and for anything orjson refuses, the standard path, which raises
    ``ValueError``."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body, parse_float=json_number)
    return doc if _exact(doc) else json.loads(body, parse_float=json_number)


_DICT_ONLY = {dict}


def all_dicts(items: list) -> bool:
    """Whether every item of ``items`` is a ``dict``, in one C pass over their types for plain
    dicts."""
    return set(map(type, items)) <= _DICT_ONLY or all(isinstance(r, dict) for r in items)


def _exact(v: object) -> bool:
    """Whether an orjson answer holds no float; a list of objects in one C pass over their values.
    """
    t = type(v)
    if t is dict:
        return all(map(_exact, v.values()))  # type: ignore[union-attr]
    if t is list:
        if v and set(map(type, v)) == _DICT_ONLY:  # type: ignore[arg-type]
            kinds = set(map(type, chain.from_iterable(map(dict.values, v))))  # type: ignore[arg-type]
            if not kinds & _MAYBE_INEXACT:
                return True
        return all(map(_exact, v))  # type: ignore[arg-type]
    return t is not float


def dumps_rows(rows: list) -> tuple[bytes, bool]:
    """``(JSON bytes of rows, plain)``: plain rows (no ``Decimal``, no lone surrogate) as UTF-8
    JSON; else ASCII JSON keeping Decimal literals and ``\\uXXXX`` surrogates, read back with
    ``json.loads(body, parse_float=json_number)``."""
    try:
        return json.dumps(rows, separators=(",", ":"), ensure_ascii=False).encode(), True
    except (TypeError, UnicodeEncodeError, ValueError):
        return _exact_json(rows).encode("ascii"), False


def _exact_json(v: object) -> str:
    t = type(v)
    if t is Decimal:
        return str(v) if v.is_finite() else json.dumps(str(v))  # type: ignore[union-attr]
    if t is dict:
        return "{" + ",".join(json.dumps(str(k)) + ":" + _exact_json(x)
                              for k, x in v.items()) + "}"  # type: ignore[union-attr]
    if t is list or t is tuple:
        return "[" + ",".join(map(_exact_json, v)) + "]"  # type: ignore[arg-type]
    return json.dumps(v, separators=(",", ":"), default=str)


def fix_unicode(s: str) -> str:
    """``s`` with every lone UTF-16 surrogate replaced by U+FFFD (F1)."""
    return SURROGATE.sub("\ufffd", s)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def rows_to_batch(rows: list[dict], doc: DocumentConfig, page: int | None = None,
                  partition: int = 0) -> tuple[pa.RecordBatch, dict[str, int]]:
    """``(batch, counts)`` of one page of ``rows`` (JSON-decoded dicts; also Decimal, bytes, date,
    datetime).

    Columns follow ``doc.columns`` (missing fields null, extra ignored), else the keys in first-seen
    order; types are declared or inferred from the page; ``dictionary``/``mask`` columns are text.
    ``counts``: ``{"converted_to_text": 2, "converted_to_text:id": 2}``. ``page``: for messages;
    page 0 of ``partition`` 0 is the file's first page, where declared columns must show
    (:func:`check_columns_present`).
    Raises PermanentError (naming column and page) for a non-object row, more xlsx columns than
    Excel holds, an unknown zone, a bad mask, a strict-kind value under ``"fail"``, or any column
    failure."""
    specs = _column_specs(rows, doc)
    if page == 0 and partition == 0 and doc.columns and not doc.allowMissingColumns:
        check_columns_present(rows, doc)
    check_xlsx_columns(doc.fileFormat, len(specs), PermanentError, XLSX_DATA_TOO_WIDE)
    zone = zone_of(doc.timeZone)
    where = "the page" if page is None else f"page {page}"
    counts: dict[str, int] = {}
    fields, arrays = [], []
    for spec in specs:
        name = spec.fieldName
        conv = _Converter(name, zone, doc, counts, where)
        try:
            values = list(map(dict.get, rows, repeat(name)))  # rows are dicts (checked)
            if doc.columns:
                conv.count(MISSING_FIELD, len(rows) - sum(map(dict.__contains__, rows,
                                                              repeat(name))))
            ctype = spec.type
            if spec.dictionary:
                values = _relabel(values, spec.dictionary)
                ctype = "string"
            if spec.mask:
                values = _mask(values, spec.mask, name)
                ctype = "string"
            arr = conv.declared(values, ctype) if ctype else conv.inferred(values)
            if conv.mixed:
                meta = {MIXED: b"1"}
            elif conv.as_double and pa.types.is_decimal(arr.type):
                meta = {AS_DOUBLE: b"1"}
            else:
                meta = {ALL_NULL: b"1"} if arr.null_count == len(arr) and not ctype else None
            field_name = name
            if SURROGATE.search(name):
                field_name = fix_unicode(name)
                conv.count(REPLACED_INVALID_UNICODE, 1)
            fields.append(pa.field(field_name, arr.type, metadata=meta))
        except PermanentError:
            raise
        except Exception as exc:  # a data problem must never surface as "internal error"
            raise PermanentError(f"column {_show(name)}, {where}: cannot normalize the values "
                                 f"({type(exc).__name__}: {str(exc)[:200]})") from exc
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields)), counts


def check_columns_present(rows: list[dict], doc: DocumentConfig) -> None:
    """Raise PermanentError when a ``doc.columns`` field is in none of ``rows`` (the first page),
    naming it and the rows' fields."""
    if not rows:
        return
    seen: dict = {}
    for r in rows:
        seen.update(dict.fromkeys(r))
    absent = [c.fieldName for c in doc.columns or [] if c.fieldName not in seen]
    if absent:
        have = [str(k) for k in seen]
        more = f" and {len(have) - 50} more" if len(have) > 50 else ""
        raise PermanentError(
            f"documentConfig.columns: fieldName {', '.join(map(_show, absent))} is in no row of "
            f"the first page; the rows have {', '.join(map(_show, have[:50]))}{more} (a "
            "misspelt fieldName? set documentConfig.allowMissingColumns to keep it empty)")


def zone_of(name: str) -> ZoneInfo:
    """The IANA zone ``name``; raises :class:`PermanentError` when unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise PermanentError(f"documentConfig.timeZone {name!r} is not an IANA time zone") from exc


def _column_specs(rows: list[dict], doc: DocumentConfig) -> list[ColumnSpec]:
    for i, r in enumerate(() if all_dicts(rows) else rows):
        if not isinstance(r, dict):
            raise PermanentError(f"row {i} of the page is {type(r).__name__}, expected a JSON object")
    if doc.columns:
        names = [c.fieldName for c in doc.columns]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise PermanentError(f"documentConfig.columns lists fieldName {dup!r} twice")
        return list(doc.columns)
    order: dict = {}
    for r in rows:
        order.update(r)
    # a field name the data gives is taken as it is (the 1..256 rule is for declared columns)
    return [ColumnSpec.model_construct(fieldName=str(k)) for k in order]


def _key(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else str(v)


def _relabel(values: list, labels: dict[str, str]) -> list:
    return [None if v is None else labels.get(_key(v), _key(v)) for v in values]


def _mask(values: list, mask: dict[str, int], name: str) -> list:
    """Keep the first/last N characters, replace the rest with ``*``."""
    keep = {"first": 0, "last": 0}
    for k, n in mask.items():
        if k not in _MASK_KEYS or n < 0:
            raise PermanentError(f"column {name!r}: mask key {k!r}={n} is not valid; "
                                 "use {'first': N, 'last': M} with N, M >= 0")
        keep[_MASK_KEYS[k]] = n
    head, tail = keep["first"], keep["last"]
    out = []
    for v in values:
        if v is None:
            out.append(None)
            continue
        s = _key(v)
        if head + tail >= len(s):
            out.append("*" * len(s))
        else:
            out.append(s[:head] + "*" * (len(s) - head - tail) + (s[len(s) - tail:] if tail else ""))
    return out


def _json(v: object) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def mixed_cell(v: object) -> str | None:
    """One value as a mixed-column cell: its JSON text (Decimal literal, +/-inf as ``Infinity``, NaN
    -> None; else a JSON string)."""
    t = type(v)
    if v is None:
        return None
    if t is str:
        return json.dumps(v, ensure_ascii=False)
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(v)
    if t is float:
        if math.isfinite(v):  # type: ignore[arg-type]
            return repr(v)
        return None if v != v else ("Infinity" if v > 0 else "-Infinity")  # type: ignore[operator]
    if t is Decimal and v.is_finite():  # type: ignore[union-attr]
        return str(v)
    return json.dumps(_text(v, "inf"), ensure_ascii=False)


def read_mixed_cell(cell: str | None) -> object:
    """The value of a mixed-column cell (inverse of :func:`mixed_cell`)."""
    return None if cell is None else json.loads(cell, parse_float=json_number)


def _text(v: object, inf_text: str) -> str | None:
    """Text rendering of any value; numbers keep every digit."""
    t = type(v)
    if t is str or v is None:
        return v  # type: ignore[return-value]
    if t is bool:
        return "true" if v else "false"
    if t is float:
        if math.isfinite(v):  # type: ignore[arg-type]
            return repr(v)
        return None if v != v else (inf_text if v > 0 else "-" + inf_text)  # type: ignore[operator]
    if t is Decimal:
        return format(v, "f")
    if t in (dict, list, tuple):
        return _json(v)
    if t in (bytes, bytearray):
        return base64.b64encode(v).decode("ascii")  # type: ignore[arg-type]
    if t is datetime or t is date:
        return v.isoformat()  # type: ignore[union-attr]
    return str(v)


def _float_exact(d: Decimal) -> bool:
    """Whether the double nearest ``d`` has the same value (``0.10`` yes)."""
    try:
        f = float(d)
    except (OverflowError, ValueError):
        return False
    return math.isfinite(f) and Decimal(repr(f)) == d


def decimal_type(decs: list) -> pa.DataType | None:
    """The narrowest Arrow decimal holding every finite Decimal of ``decs`` (128 up to 38 digits,
    256 up to 76), or None."""
    scale, whole = 0, 1
    for d in decs:
        if d is not None:
            _, digits, exp = d.as_tuple()
            if -exp > scale:
                scale = -exp
            if len(digits) + exp > whole:
                whole = len(digits) + exp
    precision = whole + scale
    if precision <= 38:
        return pa.decimal128(precision, scale)
    if precision <= MAX_DECIMAL_PRECISION:
        return pa.decimal256(precision, scale)
    return None


class _Converter:
    """Turns one column's Python values into an Arrow array (one page)."""

    def __init__(self, name: str, zone: ZoneInfo, doc: DocumentConfig,
                 counts: dict[str, int], where: str = "the page") -> None:
        self.name, self.zone, self.zone_name = name, zone, doc.timeZone
        self.inf_text, self.counts, self.where = doc.infText, counts, where
        self.strict = doc.onInvalidValue == "fail"
        self.mixed = False
        self.edge = False
        #: inferred decimal whose every value equals its double (:data:`AS_DOUBLE`)
        self.as_double = False

    def count(self, kind: str, n: int) -> None:
        """Count ``n`` cells of ``kind``, in total and for this column."""
        if n:
            self.counts[kind] = self.counts.get(kind, 0) + n
            key = f"{kind}:{self.name}"
            self.counts[key] = self.counts.get(key, 0) + n

    def issue(self, kind: str, i: int, value: object, what: str) -> None:
        """Row ``i`` holds a value under rule ``kind``: count it, or fail under ``onInvalidValue:
        "fail"``."""
        if self.strict and kind in STRICT_KINDS:
            raise PermanentError(
                f"column {_show(self.name)}, {self.where}, row {i}: value {_show(value)} {what} "
                f"(rule {kind}; documentConfig.onInvalidValue is 'fail')")
        self.count(kind, 1)

    def strings(self, values: list) -> pa.Array:
        """A string array; lone surrogates become U+FFFD, counted (F1)."""
        try:
            return pa.array(values, pa.string())
        except UnicodeEncodeError:
            out = list(values)
            for i, v in enumerate(out):
                if v is not None and SURROGATE.search(v):
                    self.issue(REPLACED_INVALID_UNICODE, i, v, "holds a lone UTF-16 surrogate")
                    out[i] = fix_unicode(v)
            return pa.array(out, pa.string())

    def text(self, v: object) -> str | None:
        return _text(v, self.inf_text)

    def as_text(self, values: list, count_numbers: bool) -> pa.Array:
        out = [self.text(v) for v in values]
        if count_numbers:
            self.count(CONVERTED_TO_TEXT, sum(1 for v in values if type(v) in _NUMBERS))
        return self.strings(out)

    def as_mixed(self, values: list) -> pa.Array:
        """A mixed column: each cell keeps its own type (module docstring)."""
        self.mixed = True
        return self.strings([mixed_cell(v) for v in values])

    def inferred(self, values: list) -> pa.Array:
        kinds = set(map(type, values))
        kinds.discard(_NONE)
        if not kinds:
            return pa.nulls(len(values), pa.string())
        if kinds == {str}:
            first = next(v for v in values if v is not None)
            if OFFSET_DATETIME.match(first) and all(
                    v is None or OFFSET_DATETIME.match(v) for v in values):
                return self.declared(values, "datetime")  # F10: one rule everywhere
            return self.strings(values)
        if kinds <= {int, float}:
            if int in kinds and not _ints_exact(values):
                return self.as_text(values, True)
            return pa.array(values, pa.int64() if kinds == {int} else pa.float64())
        if kinds == {bool}:
            return pa.array(values, pa.bool_())
        if kinds <= {dict, list}:
            return self.strings([None if v is None else _json(v) for v in values])
        if kinds <= _NUMBERS:
            if not _ints_exact(values):
                return self.as_text(values, True)
            if float in kinds:
                if all(type(v) is not Decimal or _float_exact(v) for v in values):
                    return self._number([None if v is None else float(v) for v in values],
                                        "float")
                if any(type(v) is float and not math.isfinite(v) for v in values):
                    return self.as_mixed(values)
            else:  # a float page of the same column makes it a float column (unify_schemas)
                self.as_double = all(type(v) is not Decimal or _float_exact(v) for v in values)
            return self._decimal(values)
        if kinds == {datetime}:
            return self.declared(values, "datetime")
        if kinds == {date}:
            return self.declared(values, "date")
        if kinds <= _SCALARS:
            if not _ints_exact(values):
                return self.as_text(values, True)
            return self.as_mixed(values)
        return self.as_text(values, True)

    def declared(self, values: list, ctype: str) -> pa.Array:
        if ctype == "string":
            if set(map(type, values)) <= {str, _NONE}:
                return self.strings(values)
            return self.as_text(values, False)
        if ctype == "json":
            return self.strings([v if v is None or type(v) is str else _json(v) for v in values])
        if ctype in ("int", "float"):
            return self._number(values, ctype)
        if ctype == "decimal":
            return self._decimal(values)
        if ctype == "bool":
            out, kept = [], []
            for i, v in enumerate(values):
                b = self._bool(v)
                if b is _BAD:
                    self.issue(TYPE_MISMATCH, i, v, "is not a bool; kept as is")
                    kept.append(i)
                    b = v
                out.append(b)
            return self.as_mixed(out) if kept else pa.array(out, pa.bool_())
        if ctype == "datetime":
            return self._datetimes(values)
        if ctype == "date":
            return pa.array([self._date(i, v) for i, v in enumerate(values)], pa.date32())
        raise PermanentError(f"column {self.name!r}: unknown column type {ctype!r}")

    def _number(self, values: list, ctype: str) -> pa.Array:
        fast = _plain_numbers(values, ctype)
        if fast is not None:
            return fast
        out: list = []
        kept = False
        for i, v in enumerate(values):
            t = type(v)
            n: object = _BAD
            if v is None or t is float or t is int:
                n = v
            elif t is str:
                s = v.strip()
                if not s:
                    n = None  # blank text is a missing value
                else:
                    try:
                        n = int(s) if ctype == "int" and s.lstrip("+-").isdigit() else float(s)
                    except ValueError:
                        pass
            elif t is Decimal:
                if v.is_finite():  # type: ignore[union-attr]
                    n = int(v) if ctype == "int" and v == v.to_integral_value() else float(v)
            if ctype == "int" and type(n) is float:
                n = int(n) if n.is_integer() else _BAD  # type: ignore[union-attr]
            if n is _BAD:
                self.issue(TYPE_MISMATCH, i, v, f"does not fit declared type {ctype}; kept as is")
                kept = True
                n = v
            out.append(n)
        if kept:
            return self.as_mixed(out)
        if not _ints_exact(out):
            return self.as_text(values, True)
        return pa.array(out, pa.int64() if ctype == "int" else pa.float64())

    def _decimal(self, values: list) -> pa.Array:
        decs: list = []
        kept = False
        for i, v in enumerate(values):
            t = type(v)
            d: object = _BAD
            if v is None or (t is str and not v.strip()):
                d = None
            elif t is Decimal:
                d = v
            elif t is int:
                d = Decimal(v)
            elif t is float:
                if math.isfinite(v):
                    d = Decimal(repr(v))
            elif t is str:
                try:
                    d = Decimal(v.strip())
                except InvalidOperation:
                    pass
            if d is not None and d is not _BAD and not d.is_finite():  # type: ignore[union-attr]
                d = _BAD
            if d is _BAD:
                self.issue(TYPE_MISMATCH, i, v, "is not a decimal number; kept as is")
                kept = True
                d = v
            decs.append(d)
        if kept:
            return self.as_mixed(decs)
        dtype = decimal_type(decs)
        if dtype is None:
            self.count(CONVERTED_TO_TEXT, sum(1 for d in decs if d is not None))
            return pa.array([None if d is None else format(d, "f") for d in decs], pa.string())
        return pa.array(decs, dtype)

    @staticmethod
    def _bool(v: object) -> object:
        if v is None or type(v) is bool:
            return v
        if type(v) is int and v in (0, 1):
            return bool(v)
        if type(v) is str:
            s = v.strip().lower()
            if s in _TRUE:
                return True
            if s in _FALSE:
                return False
            if not s:
                return None
        return _BAD

    def _parse(self, i: int, v: object, ctype: str) -> datetime | date | None:
        """A str/datetime/date cell as datetime or date; None for blank or invalid (counted
        ``invalid_date``)."""
        if v is None:
            return None
        t = type(v)
        if t is datetime or t is date:
            return v  # type: ignore[return-value]
        if t is str:
            s = v.strip()  # type: ignore[union-attr]
            if not s:
                return None
            if not s.startswith(_ZERO_DATE):
                try:
                    return date.fromisoformat(s) if ctype == "date" and len(s) == 10 \
                        else datetime.fromisoformat(s)
                except ValueError:
                    pass
        self.issue(INVALID_DATE, i, v, f"is not a valid {ctype} (declared type {ctype}); "
                   "written as a blank cell")
        return None

    def _datetimes(self, values: list) -> pa.Array:
        """A datetime column: UTC texts column-wise in Arrow (:func:`_utc_texts`), other ISO text in
        C, naive-only pages placed by ``assume_timezone`` (a DST gap or fold sends every value to
        :meth:`_datetime`)."""
        fast = _utc_texts(values, self.zone_name)
        if fast is not None:
            return fast
        parsed: list = []
        naive = aware = 0
        edge = False
        for i, v in enumerate(values):
            d = None
            if type(v) is str:
                try:
                    d = datetime.fromisoformat(v)
                except ValueError:
                    pass
            if d is None and v is not None:
                d = self._parse(i, v, "datetime")
                if type(d) is date:
                    d = datetime.combine(d, time())
            if d is not None:
                if d.tzinfo is None:
                    naive += 1
                else:
                    aware += 1
                    if d.year <= 1 or d.year >= 9999:
                        edge = True
            parsed.append(d)
        ttype = pa.timestamp("us", tz=self.zone_name)
        if aware and not naive and not edge:
            return pa.array(parsed, ttype)
        if naive and not aware:
            try:
                wall = pa.array(parsed, pa.timestamp("us"))
                return pc.assume_timezone(wall, timezone=self.zone_name).cast(ttype)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        self.edge = False
        stamps = [None if d is None else self._datetime(i, d) for i, d in enumerate(parsed)]
        if self.edge:  # near year 1 or 9999: epoch microseconds, no datetime overflow
            stamps = [None if d is None else (d - EPOCH) // _US for d in stamps]
        return pa.array(stamps, ttype)

    def _datetime(self, i: int, v: object) -> datetime | None:
        """An aware datetime of a cell; sets ``self.edge`` within two days of year 1 or 10000."""
        dt = self._parse(i, v, "datetime")
        if dt is None:
            return None
        if type(dt) is date:
            dt = datetime.combine(dt, time())
        if dt.tzinfo is None:  # type: ignore[union-attr]
            aware = dt.replace(tzinfo=self.zone)  # type: ignore[union-attr]
            first, second = aware.utcoffset(), dt.replace(tzinfo=self.zone, fold=1).utcoffset()
            if first != second:
                if second > first:  # type: ignore[operator]
                    self.issue(NONEXISTENT_LOCAL_TIME, i, v,
                               f"does not exist in {self.zone_name} (DST gap); shifted forward")
                else:
                    self.issue(AMBIGUOUS_LOCAL_TIME, i, v,
                               f"happens twice in {self.zone_name}; the first one is taken")
            dt = aware
        year = dt.year  # type: ignore[union-attr]
        if year <= 1 or year >= 9999:
            self.edge = True
            try:
                dt.astimezone(self.zone)  # type: ignore[union-attr]
            except (OverflowError, ValueError):
                self.issue(OUT_OF_RANGE, i, v, f"is outside years 1..9999 in {self.zone_name}; "
                           "the instant is kept, text formats write it as ISO-8601")
        return dt  # type: ignore[return-value]

    def _date(self, i: int, v: object) -> date | None:
        d = self._parse(i, v, "date")
        if type(d) is datetime:
            if d.tzinfo is not None:  # type: ignore[union-attr]
                try:
                    d = d.astimezone(self.zone)  # type: ignore[union-attr]
                except (OverflowError, ValueError):
                    self.issue(OUT_OF_RANGE, i, v, f"is outside years 1..9999 in "
                               f"{self.zone_name}; its UTC date is kept")
            return d.date()  # type: ignore[union-attr]
        return d


_BAD = object()


def _plain_numbers(values: list, ctype: str) -> pa.Array | None:
    """Column-wise fast path of ``_Converter._number`` for only exact ints (and for ``float``
    floats), built by Arrow in one call; None when a value needs the per-value path."""
    kinds = set(map(type, values))
    kinds.discard(_NONE)
    if not kinds <= ({int} if ctype == "int" else {int, float}):
        return None
    if not kinds:
        return pa.nulls(len(values), pa.int64() if ctype == "int" else pa.float64())
    if int in kinds:
        try:
            ints = pa.array(values if kinds == {int} else [v if type(v) is int else None
                                                         for v in values], pa.int64())
        except (OverflowError, pa.ArrowException):
            return None  # beyond int64: the per-value path makes it text
        lo, hi = pc.min_max(ints).values()
        if lo.as_py() is not None and (lo.as_py() < -MAX_EXACT_INT or hi.as_py() > MAX_EXACT_INT):
            return None
        if ctype == "int":
            return ints
    return pa.array(values, pa.float64())


_UTC_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_UTC_TEXT_RE2 = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$"


def _utc_texts(values: list, zone_name: str) -> pa.Array | None:
    """Column-wise fast path of ``_Converter._datetimes`` when every text is a UTC instant in whole
    seconds (years 1000..9998), checked by formatting back; works over the distinct texts
    (``pc.unique``) and takes the result by index. None otherwise."""
    first = next((v for v in values if v is not None), None)
    if type(first) is not str or not _UTC_TEXT.fullmatch(first):
        return None
    try:
        texts = pa.array(values, pa.string())
    except (pa.ArrowException, UnicodeEncodeError):
        return None
    return utc_text_array(texts, zone_name)


def utc_text_array(texts: pa.Array, zone_name: str) -> pa.Array | None:
    """:func:`_utc_texts` of a ``string`` array with at least one non-null text: ``timestamp("us",
    zone_name)`` or None."""
    uniq = pc.unique(texts).drop_null()
    if not len(uniq):
        return None
    ok = pc.match_substring_regex(uniq, _UTC_TEXT_RE2)
    if not pc.all(ok).as_py():
        return None
    bare = pc.utf8_slice_codeunits(uniq, 0, 19)
    try:
        stamps = pc.strptime(bare, format="%Y-%m-%dT%H:%M:%S", unit="s")
    except pa.ArrowException:
        return None
    back = pc.strftime(stamps, format="%Y-%m-%dT%H:%M:%S")
    same = pc.equal(back, bare)
    if same.null_count or not pc.all(same).as_py():
        return None
    years = pc.year(stamps)
    lo, hi = pc.min_max(years).values()
    if lo.as_py() < 1000 or hi.as_py() > 9998:
        return None  # near year 1 or 10000 in the zone: the per-value path
    stamps = stamps.cast(pa.timestamp("us", tz=zone_name))
    if len(uniq) == len(texts):  # no null, all distinct: already in cell order
        return stamps
    return pc.take(stamps, pc.index_in(texts, uniq))


def _ints_exact(values: list) -> bool:
    ints = [v for v in values if type(v) is int]
    return not ints or (-MAX_EXACT_INT <= min(ints) and max(ints) <= MAX_EXACT_INT)


# -- unify / conform --------------------------------------------------------

_MIXED_T = pa.large_string()


def is_mixed(field: pa.Field) -> bool:
    """Whether ``field`` is a mixed column (cells are JSON-encoded values)."""
    return bool(field.metadata and MIXED in field.metadata)


def unify_schemas(schemas: list[pa.Schema]) -> pa.Schema:
    """One schema for all shards of a task, fields in first-seen order: null or all-null yields;
    ``int64`` + ``float64`` -> ``float64``; :data:`AS_DOUBLE` decimals + ``float64`` ->
    ``float64``; decimals widen (an ``int64`` page as a decimal of its
    :data:`INT_DIGITS`, 19 without them); equal types stay; any other conflict, or mixed on any
    page, -> mixed (F7)."""
    types: dict[str, pa.DataType | None] = {}
    digits: dict[str, int] = {}
    as_double: dict[str, bool] = {}  # every decimal page of the column is AS_DOUBLE
    for schema in schemas:
        for f in schema:
            if is_mixed(f):
                t = _MIXED_T
            else:
                t = None if (f.type == pa.null() or (f.metadata or {}).get(ALL_NULL)) else f.type
            if t == pa.int64():
                digits[f.name] = max(digits.get(f.name, 1), int_digits(f))
            if t is not None and pa.types.is_decimal(t):
                as_double[f.name] = (as_double.get(f.name, True)
                                     and bool((f.metadata or {}).get(AS_DOUBLE)))
            types[f.name] = _merge(types[f.name], t, digits.get(f.name, 19),
                                   as_double.get(f.name, False)) if f.name in types else t
    return pa.schema([pa.field(n, pa.string(), metadata={MIXED: b"1"}) if t == _MIXED_T
                      else pa.field(n, t if t is not None else pa.string())
                      for n, t in types.items()])


def int_digits(field: pa.Field) -> int:
    """The :data:`INT_DIGITS` of an ``int64`` field; 19 (any ``int64``) without them."""
    return int((field.metadata or {}).get(INT_DIGITS, b"19"))


def with_int_digits(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with :data:`INT_DIGITS` on each ``int64`` column (1 when all null), so merging
    its page with a decimal page types the column as a declared ``decimal`` column would (F11):
    ``decimal_type`` sizes each page by its values, not by its Arrow type."""
    fields = []
    for f, col in zip(batch.schema, batch.columns):
        if f.type == pa.int64():
            lo, hi = pc.min_max(col).values()
            widest = max(abs(lo.as_py() or 0), abs(hi.as_py() or 0))
            meta = dict(f.metadata or {}) | {INT_DIGITS: str(len(str(widest))).encode()}
            f = f.with_metadata(meta)
        fields.append(f)
    return pa.RecordBatch.from_arrays(batch.columns,
                                      schema=pa.schema(fields, metadata=batch.schema.metadata))


def _merge(a: pa.DataType | None, b: pa.DataType | None, digits: int,
           as_double: bool = False) -> pa.DataType | None:
    """The type of a column whose pages are ``a`` and ``b``; ``digits``: the widest int64 page's
    :data:`INT_DIGITS`; ``as_double``: its decimal pages are all :data:`AS_DOUBLE`."""
    if a is None or b is None:
        return a if b is None else b
    if a == b:
        return a
    if {a, b} == {pa.int64(), pa.float64()}:
        return pa.float64()
    if as_double and pa.float64() in (a, b) and (pa.types.is_decimal(a) or pa.types.is_decimal(b)):
        return pa.float64()
    if pa.types.is_decimal(a) or pa.types.is_decimal(b):
        da = pa.decimal128(digits, 0) if a == pa.int64() else a
        db = pa.decimal128(digits, 0) if b == pa.int64() else b
        if pa.types.is_decimal(da) and pa.types.is_decimal(db):
            scale = max(da.scale, db.scale)
            precision = max(da.precision - da.scale, db.precision - db.scale) + scale
            if precision <= 38:
                return pa.decimal128(precision, scale)
            if precision <= MAX_DECIMAL_PRECISION:
                return pa.decimal256(precision, scale)
    return _MIXED_T


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` cast to ``schema``: schema order, missing columns null, extra dropped; numbers
    widened by cast; into a mixed field as JSON cells; into string as :func:`rows_to_batch` renders
    text."""
    arrays = []
    n = batch.num_rows
    for f in schema:
        idx = batch.schema.get_field_index(f.name)
        if idx < 0:
            arrays.append(pa.nulls(n, f.type))
            continue
        col = batch.column(idx)
        if is_mixed(f):
            arrays.append(col if is_mixed(batch.schema.field(idx)) else _to_mixed(col))
        elif col.type == f.type:
            arrays.append(col)
        elif col.null_count == len(col):
            arrays.append(pa.nulls(n, f.type))
        elif f.type == pa.string():
            arrays.append(_render(col))
        elif pa.types.is_decimal(col.type) and pa.types.is_floating(f.type):
            # through the decimal's text: Arrow's decimal -> double cast is not correctly
            # rounded (5.966734002E-9 -> 5.9667340020000005e-09), its text -> double parse is
            arrays.append(pc.cast(pc.cast(col, pa.string()), f.type))
        elif pa.types.is_integer(col.type) and pa.types.is_decimal(f.type):
            # Arrow casts int64 only to a decimal of 19+ whole digits; the unified decimal is as
            # narrow as the values (INT_DIGITS), so widen first, then narrow checking each value
            arrays.append(pc.cast(pc.cast(col, pa.decimal128(19, 0)), f.type))
        else:
            arrays.append(pc.cast(col, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _to_mixed(col: pa.Array) -> pa.Array:
    t = col.type
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t) \
            or pa.types.is_null(t):
        return pc.cast(col, pa.string())  # JSON literals already: 1, true, 12.30
    if pa.types.is_floating(t):
        return pa.array([mixed_cell(v) for v in col.to_pylist()], pa.string())
    texts = col.to_pylist() if pa.types.is_string(t) else _render(col).to_pylist()
    return pa.array([None if v is None else json.dumps(v, ensure_ascii=False) for v in texts],
                    pa.string())


def _render(col: pa.Array) -> pa.Array:
    t = col.type
    if pa.types.is_null(t) or pa.types.is_integer(t) or pa.types.is_string(t) \
            or pa.types.is_decimal(t):
        return pc.cast(col, pa.string())
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return pa.array(iso_texts(col), pa.string())
    return pa.array([_text(v, "inf") for v in col.to_pylist()], pa.string())


# -- ISO text of any timestamp/date (also beyond year 9999) -------------------

def iso_texts(col: pa.Array) -> list:
    """A timestamp (in its zone) or date32 column as ISO-8601 text; instants outside years 1..9999
    with an expanded year (``+10000-01-01T04:00:00+00:00``)."""
    try:
        return [None if v is None else v.isoformat() for v in col.to_pylist()]
    except (OverflowError, ValueError):
        pass
    if pa.types.is_date(col.type):
        return [None if d is None else _iso_date(d)
                for d in col.cast(pa.int32()).to_pylist()]
    utc = col.cast(pa.int64()).to_pylist()
    local = pc.local_timestamp(col).cast(pa.int64()).to_pylist() if col.type.tz else utc
    out = []
    for u, w in zip(utc, local):
        if u is None:
            out.append(None)
            continue
        days, rem = divmod(w, _DAY_US)
        secs, micro = divmod(rem, 1_000_000)
        text = f"{_iso_date(days)}T{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
        if micro:
            text += f".{micro:06d}"
        if col.type.tz:
            off = (w - u) // 60_000_000
            text += f"{'-' if off < 0 else '+'}{abs(off) // 60:02d}:{abs(off) % 60:02d}"
        out.append(text)
    return out


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of ``days`` since 1970-01-01, proleptic Gregorian, any integer (H.
    Hinnant, "chrono-Compatible Low-Level Date Algorithms")."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def _iso_date(days: int) -> str:
    y, m, d = civil_from_days(days)
    year = f"{y:04d}" if 0 <= y <= 9999 else f"{y:+05d}"
    return f"{year}-{m:02d}-{d:02d}"
