"""Fast page decode: a data API answer body straight into a typed Arrow batch.

:func:`decode_page` is an optional shortcut for ``loads_exact`` then ``rows_to_batch``
(``sinks.values``): Arrow's JSON reader (C++, GIL released) parses the rows under a schema built
from the declared types, and it answers only when it can prove the result is what the exact path
gives; else None, and the exact path decides (and raises). Its rules: docs/fidelity-rules.md, "Fast
page decode"."""
from __future__ import annotations

import io
import re
import struct
from collections import Counter

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from plait.spec import DocumentConfig, xlsx_columns_fit
from sinks.values import (ALL_NULL, MAX_EXACT_INT, OFFSET_DATETIME, SURROGATE, loads_exact,
                          utc_text_array, zone_of)

_READ_TYPES = {"int": pa.int64(), "string": pa.string(), "datetime": pa.string()}
_ROWS_AT = b'"rows":['
#: Stands for the rows to decode the envelope alone: raw newlines cannot stand in a JSON string and
#: the body must not hold its digits, so ``data.rows == [MARK]`` proves where the rows lie.
_MARK = -918_273_645_546_372_819
_MARK_DIGITS = str(-_MARK).encode()
_MARK_TEXT = b"\n-" + _MARK_DIGITS + b"\n"


def read_envelope(body: bytes) -> tuple[dict, int, int] | None:
    """``(envelope, start, end)`` of an answer ``body``: the envelope decoded exactly with
    ``data.rows`` the marker's list, the rows' text at ``body[start:end]``; None when that cannot be
    proven. Cheap (no row decoded), so the fetcher reads the next cursor with it. Never raises."""
    start = body.find(_ROWS_AT)
    end = body.rfind(b"]")
    if start < 0 or b"\n" in body or b"\r" in body:
        return None  # one line: Arrow's reader reads one JSON object per line
    start += len(_ROWS_AT)
    if end < start or body.find(b"]", start, end) >= 0 or _MARK_DIGITS in body:
        return None  # a "]" inside the rows: the rows array might close before `end`
    try:
        envelope = loads_exact(body[:start] + _MARK_TEXT + body[end:])
        rows = envelope["data"]["rows"]  # type: ignore[index]
    except Exception:  # noqa: BLE001 - whatever it is, the exact path decides
        return None
    if type(rows) is not list or rows != [_MARK] or type(rows[0]) is not int:
        return None
    return envelope, start, end  # type: ignore[return-value]


def decode_page(body: bytes, doc: DocumentConfig,
                envelope: tuple[dict, int, int] | None = None,
                ) -> tuple[dict, pa.RecordBatch] | None:
    """``(envelope, batch)`` for an answer ``body`` and the export's ``doc``, or None when the fast
    decode cannot prove ``batch`` is ``rows_to_batch(rows, doc)[0]`` with no counts.

    ``envelope``: ``loads_exact(body)`` with ``data.rows = []``. ``batch``: one field per column in
    ``doc.columns`` order (without columns: every field, first-seen order), ``int64`` (|n| <=
    2**53), ``string``, ``timestamp("us", doc.timeZone)`` or ``bool``; ``plait.all_null`` metadata
    on an untyped all-null column. ``envelope`` (argument): :func:`read_envelope`'s result for this
    body, reused. Never raises on bad data."""
    if not _columns_handled(doc):
        return None
    read = envelope if envelope is not None else read_envelope(body)
    if read is None:
        return None
    envelope, start, end = read
    untyped = not doc.columns or any(c.type is None for c in doc.columns)
    first = _first_row(body, start, end) if untyped else None
    schema, complete = _row_schema(doc, first)
    rows_body = b'{"rows":[' + memoryview(body)[start:end] + b"]}"
    if not _valid_utf8(rows_body):
        return None
    try:
        zone_of(doc.timeZone)
    except Exception:  # noqa: BLE001 - an unknown zone: the exact path
        return None
    listed = _read_all(rows_body, schema, complete, doc)
    del rows_body
    if listed is None:
        return None
    structs = listed.flatten()
    if structs.null_count:  # a null row: the exact path refuses the page
        return None
    if body.count(b"{", start, end) != len(structs):
        return None  # an object inside a row (or a "{" in a string): see _finite
    if _has_doubles(structs, doc) and not _plain_doubles(body, start, end):
        return None  # a number the exact path reads as a Decimal, or -0, NaN, Inf
    if not _keyed(body, start, end, doc, structs):
        return None  # a row without a declared field: the exact path counts it
    batch = _typed(structs, doc, first)
    if batch is None:
        return None
    envelope["data"]["rows"] = []  # type: ignore[index]
    return envelope, batch  # type: ignore[return-value]


def _read_all(rows_body: bytes, schema: pa.Schema, complete: bool,
              doc: DocumentConfig) -> pa.ListArray | None:
    """The rows of ``rows_body`` as structs, or None (decline). ``complete``: ``schema`` types every
    column, so undeclared fields are first refused, then ignored (after the :func:`_finite` scan)
    or, without columns, inferred; else fields not in ``schema`` are inferred and a type other than
    :func:`_closed_type` ones sends the scan."""
    if complete:
        listed = _read_rows(rows_body, schema, "error")
        if listed is not None:
            return listed
        if doc.columns:
            return _read_rows(rows_body, schema, "ignore") if _finite(rows_body) else None
    listed = _read_rows(rows_body, schema, "infer")
    if listed is None or not pa.types.is_struct(listed.type.value_type):
        return None
    if doc.columns:
        declared = {c.fieldName for c in doc.columns}
        row = listed.type.value_type
        loose = [row.field(i).type for i in range(row.num_fields)
                 if row.field(i).name not in declared]
        if any(not _closed_type(t) for t in loose) and not _finite(rows_body):
            return None
    return listed


def _closed_type(t: pa.DataType) -> bool:
    """Whether Arrow's reader puts no non-finite number in a field read as ``t``."""
    return t in (pa.int64(), pa.string(), pa.bool_(), pa.null()) or pa.types.is_timestamp(t)


def _first_row(body: bytes, start: int, end: int) -> dict | None:
    """The first row of ``body[start:end]`` decoded when it holds no ``}`` but its last, else None;
    only a guess of the types, which the reader checks on every row."""
    cut = body.find(b"}", start, end)
    if cut < 0:
        return None
    try:
        row = orjson.loads(memoryview(body)[start:cut + 1])
    except orjson.JSONDecodeError:
        return None
    return row if type(row) is dict else None


def _read_rows(rows_body: bytes, schema: pa.Schema, unexpected: str) -> pa.ListArray | None:
    """The ``rows`` list of ``rows_body`` (one line) read under ``schema``, fields not in it
    ``"error"``, ``"ignore"`` or ``"infer"`` (``unexpected``); None when Arrow refuses."""
    try:
        table = pj.read_json(
            io.BytesIO(rows_body),
            read_options=pj.ReadOptions(use_threads=False, block_size=len(rows_body) + 1),
            parse_options=pj.ParseOptions(explicit_schema=schema,
                                          unexpected_field_behavior=unexpected))
    except Exception:  # noqa: BLE001 - an Arrow parse error: the caller decides
        return None
    if table.num_rows != 1:
        return None
    listed = table.column("rows").chunk(0)
    return None if listed.null_count else listed


#: Number spellings Arrow's reader takes and Python's ``json`` does not (``NaN`` too).
_NON_FINITE = re.compile(rb"[:,\[]\s*-?(?:NaN|Inf)")
#: The same for Arrow's regex kernel (RE2), which scans with the GIL released.
_NON_FINITE_RE2 = r"[:,\[][ \t\n\r\f\v]*-?(?:NaN|Inf)"


#: A number literal the exact path may not read as the double Arrow reads (F11,
#: ``sinks.values.json_number``), or a spelling Arrow may read otherwise: an exponent; 16 digits
#: in a row (an integer beyond 2**53 is text to the exact path) or 17 characters of a number; a
#: fraction of two or more digits ending in ``0`` (``1.50``, ``0.10``: Decimals; ``1.0`` is the
#: shortest repr of its double); the integer ``-0`` (``0`` in Python, ``-0.0`` in a double
#: column); ``NaN``/``Inf`` spellings. Strings holding these only make the fast decode decline.
_NOT_PLAIN_DOUBLE_RE2 = (r"[0-9][eE]|[0-9]{16}|[-0-9.]{17}|\.[0-9]+0[^0-9]|-0[^.0-9eE]"
                         r"|[:,\[][ \t\n\r\f\v]*-?(?:NaN|Inf)")


def _has_doubles(structs: pa.StructArray, doc: DocumentConfig) -> bool:
    """Whether a column of the batch (a field of ``doc.columns``, else any field) was read as a
    double; undeclared fields are not written."""
    row = structs.type
    names = {c.fieldName for c in doc.columns} if doc.columns else None
    return any(row.field(i).type == pa.float64() for i in range(row.num_fields)
               if names is None or row.field(i).name in names)


def _plain_doubles(body: bytes, start: int, end: int) -> bool:
    """Whether every number of the rows ``body[start:end]`` that Arrow reads into a double column
    is that double to the exact path: then each fraction literal is a float to ``json_number``
    (at most 16 characters, no exponent, not ending in ``0`` but as ``N.0``, the shortest repr of
    an integral double) and each integer within 2**53, and both parsers round correctly
    (:data:`_NOT_PLAIN_DOUBLE_RE2`; Arrow's regex kernel, GIL released)."""
    return not _matches(memoryview(body)[start:end].tobytes(), _NOT_PLAIN_DOUBLE_RE2)


def _matches(text: bytes, pattern: str) -> bool:
    """Whether RE2 ``pattern`` matches somewhere in ``text`` (Arrow's kernel, GIL released)."""
    arr = pa.Array.from_buffers(pa.large_binary(), 1, [
        None, pa.py_buffer(struct.pack("<qq", 0, len(text))), pa.py_buffer(text)])
    return pc.match_substring_regex(arr, pattern)[0].as_py()


def _valid_utf8(text: bytes) -> bool:
    """Whether ``text`` is valid UTF-8 (strict decoder): Arrow's reader checks it nowhere, and
    surrogate bytes are F1 cells the exact path counts."""
    if text.isascii():
        return True
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _finite(text: bytes) -> bool:
    """Whether ``text`` holds no ``NaN``/``Inf`` spelling after ``:``/``,``/``[`` (even in a string:
    safe), which Arrow reads in an ignored field and Python's ``json`` refuses. GIL released."""
    return not _matches(text, _NON_FINITE_RE2)


#: At most this many ``:null`` values are read by :func:`_explicit_nulls` per page (~1 us each);
#: past it a column's key is counted by regex instead.
NULL_SCAN_LIMIT = 4096


def _keyed(body: bytes, start: int, end: int, doc: DocumentConfig,
           structs: pa.StructArray) -> bool:
    """Whether every row of ``body[start:end]`` has every declared field: a column without nulls
    has; so has one whose nulls are each an explicit ``null`` after its compactly spelt key
    (:func:`_explicit_nulls`); else its plainly spelt key must follow ``{`` or ``,`` once per row
    (strict JSON, one ``{`` per row, no key twice), counted by regex in Arrow (GIL released).
    Escaped keys count as absent (decline)."""
    rows = nulls = None
    for spec in doc.columns or []:
        idx = structs.type.get_field_index(spec.fieldName)
        if idx < 0:
            return False
        col = structs.field(idx)
        if not col.null_count:
            continue
        key = orjson.dumps(spec.fieldName)
        if b"\\" in key:
            return False
        if nulls is None:
            nulls = _explicit_nulls(body, start, end)
        if nulls[key] == col.null_count:
            continue
        if rows is None:
            rows = pa.array([memoryview(body)[start:end].tobytes()], pa.large_binary())
        pattern = r"[{,][ \t\n\r]*\Q" + key.decode() + r"\E[ \t\n\r]*:"
        if pc.count_substring_regex(rows, pattern)[0].as_py() != len(col):
            return False
    return True


def _explicit_nulls(body: bytes, start: int, end: int) -> Counter[bytes]:
    """How often each key (its JSON text, quotes included) stands as ``{"k":null`` or
    ``,"k":null`` in the rows ``body[start:end]``, over the first :data:`NULL_SCAN_LIMIT` of them.
    Each is a key of a row whose value is null (the regex of :func:`_keyed` without whitespace,
    ``null`` after it), so a column with as many as it has nulls has its key in every row. Keys
    holding ``"`` (escaped) are not counted."""
    counts: Counter[bytes] = Counter()
    at = body.find(b'":null', start, end)
    for _ in range(NULL_SCAN_LIMIT):
        if at < 0:
            break
        opening = body.rfind(b'"', start, at)
        if opening > start and body[opening - 1] in b"{,":
            counts[body[opening:at + 1]] += 1
        at = body.find(b'":null', at + 6, end)
    return counts


#: The type an untyped column is read as, by the Python type of its first-row value.
_GUESS = {int: pa.int64(), str: pa.string(), bool: pa.bool_(), float: pa.float64()}


def _columns_handled(doc: DocumentConfig) -> bool:
    """Whether ``doc``'s columns are each ``int``/``string``/``datetime`` or untyped, without
    ``dictionary``/``mask``, unique, free of lone surrogates, within Excel's column count; or none.
    """
    columns = doc.columns or []
    if not xlsx_columns_fit(len(columns)):
        return False
    names = [c.fieldName for c in columns]
    if len(set(names)) != len(names) or any(SURROGATE.search(n) for n in names):
        return False
    return not any((c.type is not None and c.type not in _READ_TYPES) or c.dictionary
                   or c.mask for c in columns)


def _row_schema(doc: DocumentConfig, first: dict | None) -> tuple[pa.Schema, bool]:
    """The reader's schema ``{rows: [{<columns>}]}`` and whether it types every column: declared
    types, else the :data:`_GUESS` of the value in ``first``."""
    first = first or {}
    if doc.columns:
        pairs = [(c.fieldName, _READ_TYPES[c.type] if c.type else _GUESS.get(type(
            first.get(c.fieldName)))) for c in doc.columns]
        complete = bool(first) or not any(c.type is None for c in doc.columns)
    else:
        pairs = [(k, _GUESS.get(type(v))) for k, v in first.items()]
        complete = bool(first)
    fields = [pa.field(n, t) for n, t in pairs if t is not None]
    row = pa.struct(fields)
    return pa.schema([pa.field("rows", pa.list_(row))]), complete and len(fields) == len(pairs)


def _typed(structs: pa.StructArray, doc: DocumentConfig,
           first: dict | None) -> pa.RecordBatch | None:
    """The page's columns as ``rows_to_batch`` types them, or None when a cell would take the
    counted path. Without columns: the fields in first-seen order."""
    n = len(structs)
    if doc.columns:
        specs = [(c.fieldName, c.type) for c in doc.columns]
    else:
        found = [structs.type.field(i).name for i in range(structs.type.num_fields)]
        names = [k for k in (first or {}) if k in found]
        names += [k for k in found if k not in names]
        if not names or not xlsx_columns_fit(len(names)):
            return None  # no column (rows_to_batch gives none) or too many for xlsx
        specs = [(k, None) for k in names]
    arrays, fields = [], []
    for name, ctype in specs:
        idx = structs.type.get_field_index(name)
        col = structs.field(idx) if idx >= 0 else pa.nulls(n, pa.null())
        meta = None
        if ctype is None:
            col = _untyped(col, doc.timeZone)
            if col is not None and col.null_count == len(col):
                meta = {ALL_NULL: b"1"}
        elif ctype == "int":
            col = _exact_ints(col)
        elif ctype == "datetime":
            col = None if col.null_count == len(col) else utc_text_array(col, doc.timeZone)
        if col is None:
            return None
        arrays.append(col)
        fields.append(pa.field(name, col.type, metadata=meta))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _exact_ints(col: pa.Array) -> pa.Array | None:
    """``col`` when every value is exact in a double (|n| <= 2**53), else None (E8)."""
    if col.null_count != len(col):
        lo, hi = pc.min_max(col).values()
        if lo.as_py() < -MAX_EXACT_INT or hi.as_py() > MAX_EXACT_INT:
            return None
    return col


def _untyped(col: pa.Array, zone_name: str) -> pa.Array | None:
    """An untyped column as ``rows_to_batch`` infers it, or None when not provable: all null ->
    ``string``; exact ``int64``; ``bool``; ``string``, or ``timestamp`` when every text is an RFC
    3339 date-time with offset (F10) and a UTC instant in whole seconds."""
    t = col.type
    if col.null_count == len(col):
        return pa.nulls(len(col), pa.string())
    if t == pa.int64():
        return _exact_ints(col)
    if t == pa.bool_():
        return col
    if t == pa.float64():
        return col  # its literals checked by decode_page (_plain_doubles)
    if t != pa.string():
        return None  # a timestamp Arrow read from text, a nested value
    first = col.drop_null()[0].as_py()
    if not OFFSET_DATETIME.match(first):
        return col  # as rows_to_batch: text unless its first text is a date-time
    if all(OFFSET_DATETIME.match(v) for v in pc.unique(col).drop_null().to_pylist()):
        return utc_text_array(col, zone_name)
    return col
