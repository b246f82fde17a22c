"""Value normalization: one page of JSON rows -> one typed Arrow record batch.

The shard writer calls :func:`rows_to_batch` for every page; the finalizer calls
:func:`unify_schemas` over the shards of a task and :func:`conform` on each
shard batch before handing it to a file writer (``sinks.writers``).

Rules (each one is a case in ``shared/cases/export.md``):

- Integers stay ``int64`` while ``|n| <= 2**53``; beyond that a double (and so
  Excel and JavaScript) cannot hold them exactly, so the column becomes text
  with every digit (E8). Decimals with more than 15 significant digits (Excel
  keeps 15) become text the same way.
- Strings are never guessed into numbers or dates ("00123", "1E5", "1.10"
  stay text, E9). Dates are parsed only in a ``date``/``datetime`` column.
- Aware datetimes are converted to ``doc.timeZone`` (IANA) and stored as
  ``timestamp("us", tz)``; naive ones are read as wall time in that zone (E10).
- ``dict``/``list`` -> compact JSON text with sorted keys (E14); ``bytes`` ->
  base64 text; ``ColumnSpec.dictionary`` and ``mask`` produce text.
- A column with only nulls is ``string`` and carries the field metadata
  ``plait.all_null`` so that :func:`unify_schemas` lets another page decide.
"""
from __future__ import annotations

import base64
import json
import math
from datetime import date, datetime, time
from decimal import Decimal, InvalidOperation
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import PermanentError
from plait.spec import XLSX_MAX_COLUMNS, ColumnSpec, DocumentConfig

#: Largest integer magnitude a IEEE-754 double (Excel, JavaScript) holds exactly.
MAX_EXACT_INT = 2**53
#: Excel keeps 15 significant digits of a number ("Excel specifications and limits").
MAX_DECIMAL_DIGITS = 15
#: Field metadata key marking a column that was all-null on its page.
ALL_NULL = b"plait.all_null"

_NONE = type(None)
_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}
_MASK_KEYS = {"first": "first", "keepFirst": "first", "head": "first",
              "last": "last", "keepLast": "last", "tail": "last"}


def rows_to_batch(rows: list[dict], doc: DocumentConfig) -> tuple[pa.RecordBatch, dict[str, int]]:
    """Normalize one page of rows into a record batch.

    ``rows``: JSON-decoded dicts (values None, bool, int, float incl. nan/inf,
    str, list, dict; also Decimal, bytes, date, datetime). Columns follow
    ``doc.columns`` when given (missing fields -> null, extra ignored), else the
    keys in first-seen order. Field names of the batch are the ``fieldName``s.
    A column with a ``dictionary`` or ``mask`` is text (labels, masked values);
    otherwise its type is ``ColumnSpec.type`` or inferred from this page.

    Returns ``(batch, counts)``; ``counts`` maps a kind of cell change to how
    many cells it touched (``{"converted_to_text": 2}``).

    Raises :class:`PermanentError` when a row is not an object, the file format
    is xlsx and there are more than 16,384 columns (Excel limit), the time zone
    is unknown, a mask is malformed, or a value cannot be converted to its
    declared type (the message names the column and the row index in the page).
    """
    specs = _column_specs(rows, doc)
    if doc.fileFormat == "xlsx" and len(specs) > XLSX_MAX_COLUMNS:
        raise PermanentError(
            f"xlsx allows at most {XLSX_MAX_COLUMNS:,} columns (Excel limit); the data has "
            f"{len(specs):,}: choose csv or parquet, or list fewer columns")
    zone = zone_of(doc.timeZone)
    counts: dict[str, int] = {}
    fields, arrays = [], []
    for spec in specs:
        name = spec.fieldName
        values = [r.get(name) for r in rows]
        ctype = spec.type
        if spec.dictionary:
            values = _relabel(values, spec.dictionary)
            ctype = "string"
        if spec.mask:
            values = _mask(values, spec.mask, name)
            ctype = "string"
        conv = _Converter(name, zone, doc.timeZone, doc.infText, counts)
        arr = conv.declared(values, ctype) if ctype else conv.inferred(values)
        meta = {ALL_NULL: b"1"} if arr.null_count == len(arr) and not ctype else None
        fields.append(pa.field(name, arr.type, metadata=meta))
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields)), counts


def zone_of(name: str) -> ZoneInfo:
    """The IANA zone ``name``; raises :class:`PermanentError` when unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise PermanentError(f"documentConfig.timeZone {name!r} is not an IANA time zone") from exc


def _column_specs(rows: list[dict], doc: DocumentConfig) -> list[ColumnSpec]:
    for i, r in enumerate(rows):
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
    return [ColumnSpec(fieldName=str(k)) for k in order]


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


class _Converter:
    """Turns one column's Python values into an Arrow array (one page)."""

    def __init__(self, name: str, zone: ZoneInfo, zone_name: str, inf_text: str,
                 counts: dict[str, int]) -> None:
        self.name, self.zone, self.zone_name = name, zone, zone_name
        self.inf_text, self.counts = inf_text, counts

    def count(self, kind: str, n: int) -> None:
        if n:
            self.counts[kind] = self.counts.get(kind, 0) + n

    def fail(self, i: int, value: object, ctype: str) -> PermanentError:
        return PermanentError(f"column {self.name!r}, row {i} of the page: cannot convert "
                              f"{str(value)[:60]!r} ({type(value).__name__}) to declared type {ctype}")

    def text(self, v: object) -> str | None:
        """Text rendering of any value; numbers keep every digit."""
        t = type(v)
        if t is str or v is None:
            return v  # type: ignore[return-value]
        if t is bool:
            return "true" if v else "false"
        if t is float:
            if math.isfinite(v):  # type: ignore[arg-type]
                return repr(v)
            return None if v != v else (self.inf_text if v > 0 else "-" + self.inf_text)
        if t is Decimal:
            return format(v, "f")
        if t in (dict, list, tuple):
            return _json(v)
        if t in (bytes, bytearray):
            return base64.b64encode(v).decode("ascii")  # type: ignore[arg-type]
        if t is datetime or t is date:
            return v.isoformat()  # type: ignore[union-attr]
        return str(v)

    def as_text(self, values: list, count_numbers: bool) -> pa.Array:
        out = [self.text(v) for v in values]
        if count_numbers:
            self.count("converted_to_text", sum(1 for v in values if type(v) in (int, float, Decimal)))
        return pa.array(out, pa.string())

    def inferred(self, values: list) -> pa.Array:
        kinds = set(map(type, values))
        kinds.discard(_NONE)
        if not kinds:
            return pa.nulls(len(values), pa.string())
        if kinds == {str}:
            return pa.array(values, pa.string())
        if kinds <= {int, float}:
            if int in kinds and not _ints_exact(values):
                return self.as_text(values, True)
            return pa.array(values, pa.int64() if kinds == {int} else pa.float64())
        if kinds == {bool}:
            return pa.array(values, pa.bool_())
        if kinds <= {dict, list}:
            return pa.array([None if v is None else _json(v) for v in values], pa.string())
        if kinds == {Decimal} or kinds <= {Decimal, int}:
            return self.declared(values, "decimal")
        if kinds == {datetime}:
            return self.declared(values, "datetime")
        if kinds == {date}:
            return self.declared(values, "date")
        return self.as_text(values, True)

    def declared(self, values: list, ctype: str) -> pa.Array:
        if ctype == "string":
            if set(map(type, values)) <= {str, _NONE}:
                return pa.array(values, pa.string())
            return self.as_text(values, False)
        if ctype == "json":
            return pa.array([v if v is None or type(v) is str else _json(v) for v in values],
                            pa.string())
        if ctype in ("int", "float"):
            return self._number(values, ctype)
        if ctype == "decimal":
            return self._decimal(values)
        if ctype == "bool":
            return pa.array([self._bool(i, v) for i, v in enumerate(values)], pa.bool_())
        if ctype == "datetime":
            return pa.array([self._datetime(i, v) for i, v in enumerate(values)],
                            pa.timestamp("us", tz=self.zone_name))
        if ctype == "date":
            return pa.array([self._date(i, v) for i, v in enumerate(values)], pa.date32())
        raise PermanentError(f"column {self.name!r}: unknown column type {ctype!r}")

    def _number(self, values: list, ctype: str) -> pa.Array:
        out = []
        for i, v in enumerate(values):
            t = type(v)
            if v is None or t is int or t is float:
                out.append(v)
            elif t is str and v.strip():
                try:
                    out.append(int(v) if ctype == "int" and v.strip().lstrip("+-").isdigit()
                               else float(v))
                except ValueError:
                    raise self.fail(i, v, ctype) from None
            elif t is Decimal:
                out.append(int(v) if ctype == "int" and v == v.to_integral_value() else float(v))
            elif t is str:
                out.append(None)  # blank text is a missing value
            else:
                raise self.fail(i, v, ctype)
        if ctype == "int":
            for i, v in enumerate(out):
                if type(v) is float:
                    if not v.is_integer():
                        raise self.fail(i, values[i], ctype)
                    out[i] = int(v)
        if not _ints_exact(out):
            return self.as_text(values, True)
        return pa.array(out, pa.int64() if ctype == "int" else pa.float64())

    def _decimal(self, values: list) -> pa.Array:
        decs: list[Decimal | None] = []
        for i, v in enumerate(values):
            try:
                if v is None or (type(v) is str and not v.strip()):
                    decs.append(None)
                elif type(v) in (int, str, Decimal):
                    decs.append(Decimal(v.strip() if type(v) is str else v))  # type: ignore[union-attr]
                elif type(v) is float:
                    decs.append(Decimal(repr(v)))
                else:
                    raise InvalidOperation
            except InvalidOperation:
                raise self.fail(i, v, "decimal") from None
        if any(d is not None and d.is_finite() and len(d.as_tuple().digits) > MAX_DECIMAL_DIGITS
               for d in decs):
            out = [None if d is None else format(d, "f") for d in decs]
            self.count("converted_to_text", sum(1 for d in decs if d is not None))
            return pa.array(out, pa.string())
        return pa.array([None if d is None else float(d) for d in decs], pa.float64())

    def _bool(self, i: int, v: object) -> bool | None:
        if v is None or type(v) is bool:
            return v  # type: ignore[return-value]
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
        raise self.fail(i, v, "bool")

    def _datetime(self, i: int, v: object) -> datetime | None:
        if v is None:
            return None
        try:
            if type(v) is str:
                if not v.strip():
                    return None
                dt = datetime.fromisoformat(v.strip())
            elif type(v) is datetime:
                dt = v  # type: ignore[assignment]
            elif type(v) is date:
                dt = datetime.combine(v, time())  # type: ignore[arg-type]
            else:
                raise ValueError
        except ValueError:
            raise self.fail(i, v, "datetime") from None
        return dt if dt.tzinfo is not None else dt.replace(tzinfo=self.zone)

    def _date(self, i: int, v: object) -> date | None:
        if v is None or type(v) is date:
            return v  # type: ignore[return-value]
        if type(v) is datetime:
            return (v.astimezone(self.zone) if v.tzinfo else v).date()  # type: ignore[union-attr]
        if type(v) is str and not v.strip():
            return None
        if type(v) is str:
            try:
                return date.fromisoformat(v.strip())
            except ValueError:
                return self._date(i, self._datetime(i, v))
        raise self.fail(i, v, "date")


def _ints_exact(values: list) -> bool:
    ints = [v for v in values if type(v) is int]
    return not ints or (-MAX_EXACT_INT <= min(ints) and max(ints) <= MAX_EXACT_INT)


# -- unify / conform --------------------------------------------------------

def unify_schemas(schemas: list[pa.Schema]) -> pa.Schema:
    """One schema for all shards of a task.

    Fields appear in first-seen order. Per field: a ``null`` type or a column
    that was all-null on its page (metadata ``plait.all_null``) yields to the
    other; ``int64`` + ``float64`` -> ``float64``; equal types stay; any other
    conflict -> ``string``. No shards -> an empty schema.
    """
    types: dict[str, pa.DataType | None] = {}
    for schema in schemas:
        for f in schema:
            t = None if (f.type == pa.null() or (f.metadata or {}).get(ALL_NULL)) else f.type
            types[f.name] = _merge(types[f.name], t) if f.name in types else t
    return pa.schema([pa.field(n, t if t is not None else pa.string()) for n, t in types.items()])


def _merge(a: pa.DataType | None, b: pa.DataType | None) -> pa.DataType | None:
    if a is None or b is None:
        return a if b is None else b
    if a == b:
        return a
    if {a, b} == {pa.int64(), pa.float64()}:
        return pa.float64()
    return pa.string()


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Cast/render ``batch`` to ``schema``: columns in schema order, missing ones
    as nulls, extra ones dropped; int->float by cast, anything->string by the
    same text rendering as :func:`rows_to_batch` (every digit, ISO datetimes)."""
    arrays = []
    n = batch.num_rows
    for f in schema:
        idx = batch.schema.get_field_index(f.name)
        if idx < 0:
            arrays.append(pa.nulls(n, f.type))
            continue
        col = batch.column(idx)
        if col.type == f.type:
            arrays.append(col)
        elif col.null_count == len(col):
            arrays.append(pa.nulls(n, f.type))
        elif f.type == pa.string():
            arrays.append(_render(col))
        else:
            arrays.append(pc.cast(col, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _render(col: pa.Array) -> pa.Array:
    t = col.type
    if pa.types.is_null(t) or pa.types.is_integer(t) or pa.types.is_string(t):
        return pc.cast(col, pa.string())
    conv = _Converter("", ZoneInfo("UTC"), "UTC", "inf", {})
    return pa.array([conv.text(v) for v in col.to_pylist()], pa.string())
