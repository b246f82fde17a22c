"""Fast page decode: a data API answer body straight into a typed Arrow batch.

:func:`decode_page` is an optional shortcut for ``loads_exact(body)`` followed by
``rows_to_batch(data.rows, doc)`` (``sinks.values``). It parses the rows, cut
out of the body, with Arrow's JSON reader (C++, releases the GIL; no Python
object per cell) under an explicit schema built from the declared column
types, and answers only when it can prove the result is what the exact
path gives; otherwise it answers ``None`` and the caller takes the exact path,
which also raises what it always raised. Rules it keeps
(docs/fidelity-rules.md, "Fast page decode"):

- only pages whose ``documentConfig.columns`` are each declared ``int``,
  ``string`` or ``datetime`` or declared without a type (no
  ``dictionary``/``mask``), or that have no columns, and that end with no
  cell change to count (quality counts ``{}``): an int beyond 2**53 (E8),
  a datetime cell other than a UTC instant in whole seconds, a lone surrogate
  (F1), a float/bool/object in a typed column (F7, F8, F11) all decline;
- Arrow's reader is strict JSON: leading zeros, trailing commas, control
  characters in strings, and a key given twice in a row are errors there, so
  they decline (the exact path decides, F1/F12); what it does accept that the
  exact path does not (invalid UTF-8 anywhere in the rows, ``-NaN``/``Inf``,
  objects nested to any depth in ignored fields) is checked before and after
  the parse (:func:`_valid_utf8`, :func:`_finite`, one ``{`` per row). The
  rows are first read with undeclared fields refused: then every value stands
  in a declared ``int64`` or ``string`` column, where Arrow refuses every
  non-finite spelling itself, so the scan for them (:func:`_finite`) runs only
  when a row holds an undeclared field and the rows are read again ignoring
  it;
- a row without a declared field (the exact path counts ``missing_field``)
  declines: a column holding nulls answers only when its plainly spelt key
  stands once per row (:func:`_keyed`);
- a column without a declared type (or every field, without columns) is
  typed from the page's own values as ``rows_to_batch`` infers them: the
  reader is told the type of the page's first row's value (``int64``,
  ``string``, ``bool``) and refuses the page when a later row's value does
  not fit (a float, a string, ``"yes"`` after ``true``: the exact path then
  decides); a column with no value in the first row is inferred by Arrow and
  kept only as ``int64``, ``string``, ``bool`` or all null
  (:func:`_untyped`). The exact path infers per page too and the shards'
  types meet in ``unify_schemas``, so a page taken here is the page it gives;
- the envelope (``code``, ``message``, ``data.status``, ``runtimeContext``,
  ``total``) is decoded exactly by ``loads_exact`` from the body with its rows
  replaced by a marker, which also proves where ``data.rows`` lies.
"""
from __future__ import annotations

import io
import re
import struct

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from plait.spec import DocumentConfig, xlsx_columns_fit
from sinks.values import (ALL_NULL, MAX_EXACT_INT, OFFSET_DATETIME, SURROGATE, loads_exact,
                          utc_text_array, zone_of)

#: Declared column types the fast decode handles, and their Arrow type as read.
_READ_TYPES = {"int": pa.int64(), "string": pa.string(), "datetime": pa.string()}
_ROWS_AT = b'"rows":['
#: Put in place of the rows to decode the envelope alone. The raw newlines
#: cannot stand inside a JSON string (strict JSON), so a body that still
#: parses has its rows array there; the integer cannot be spelled another way,
#: and the body must not hold its digits, so ``data.rows == [MARK]`` proves
#: the marker's array is the one the exact decode takes as ``data.rows``.
_MARK = -918_273_645_546_372_819
_MARK_DIGITS = str(-_MARK).encode()
_MARK_TEXT = b"\n-" + _MARK_DIGITS + b"\n"


def read_envelope(body: bytes) -> tuple[dict, int, int] | None:
    """The envelope of an answer ``body``, read apart from its rows:
    ``(envelope, start, end)`` with ``data.rows`` the marker's list and the
    rows' text at ``body[start:end]``, or None when that cannot be proven
    (see the module docstring; the exact path then decides). Whenever the
    exact decode accepts ``body``, ``envelope`` is its envelope (code,
    message, status, runtimeContext, total, exactly). Cheap (scans of the
    body, no row decoded): the fetcher reads the next page's cursor with it
    before the rows are parsed. Never raises."""
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
    """``(envelope, batch)`` for an answer ``body`` (bytes of one JSON object)
    and the export's ``doc``, or ``None`` when the fast decode cannot prove
    that ``batch`` is exactly ``rows_to_batch(rows, doc)[0]`` with no counts
    (the caller then decodes the exact way: ``loads_exact``, ``rows_to_batch``).

    ``envelope`` is ``loads_exact(body)`` with ``data.rows`` replaced by ``[]``
    (code, message, status, runtimeContext, total, exactly). ``batch`` has one
    field per column, in ``doc.columns`` order (without columns: every field,
    in first-seen order): ``int64`` (every |n| <= 2**53), ``string``,
    ``timestamp("us", doc.timeZone)``, ``bool`` (a column without a type);
    no field metadata but ``plait.all_null`` on a column without a type
    that is all null; when it answers, see the module docstring and
    docs/fidelity-rules.md, "Fast page decode". Never raises on bad data: a
    body the exact path would refuse is declined. CPU: ~11 ms per 5,000
    flights rows (GIL released while Arrow parses).

    ``envelope`` (argument): what :func:`read_envelope` gave for this body
    already, so it is not read again (its dict is reused).
    """
    if not _columns_handled(doc):
        return None
    read = envelope if envelope is not None else read_envelope(body)
    if read is None:
        return None
    envelope, start, end = read
    untyped = not doc.columns or any(c.type is None for c in doc.columns)
    first = _first_row(body, start, end) if untyped else None
    schema, complete = _row_schema(doc, first)
    # the rows alone, as one object (read_envelope proved they hold no "]")
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
    if not _keyed(body, start, end, doc, structs):
        return None  # a row without a declared field: the exact path counts it
    batch = _typed(structs, doc, first)
    if batch is None:
        return None
    envelope["data"]["rows"] = []  # type: ignore[index]
    return envelope, batch  # type: ignore[return-value]


def _read_all(rows_body: bytes, schema: pa.Schema, complete: bool,
              doc: DocumentConfig) -> pa.ListArray | None:
    """The rows of ``rows_body`` as a list of structs, or None (decline).

    ``complete``: ``schema`` gives every column the page needs a type; the
    rows are then read with undeclared fields refused, and, when a row holds
    one, read again ignoring them: with columns, after the scan for the
    non-finite spellings Arrow takes there (:func:`_finite`); without, the
    new field is a column, and the rows are read inferring it. Otherwise
    (a column the first row gave no type) the fields not in ``schema`` are
    inferred; with columns, an undeclared field read as anything but
    ``int64``/``string``/``bool``/``timestamp``/null may hide a non-finite
    spelling: the scan decides."""
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
    """The first row of the rows' text ``body[start:end]``, decoded, when it
    holds no ``}`` but its last (else None: text up to a ``}`` inside a
    string or a nested object is not a JSON object, so a dict is exactly
    the first row). Only a guess of the columns' types: the reader checks
    every row against it."""
    cut = body.find(b"}", start, end)
    if cut < 0:
        return None
    try:
        row = orjson.loads(memoryview(body)[start:cut + 1])
    except orjson.JSONDecodeError:
        return None
    return row if type(row) is dict else None


def _read_rows(rows_body: bytes, schema: pa.Schema, unexpected: str) -> pa.ListArray | None:
    """The ``rows`` list of ``rows_body`` (``{"rows":[...]}``, one line) read
    by Arrow under ``schema``, fields not in it refused (``unexpected``
    ``"error"``), ignored (``"ignore"``) or typed by Arrow (``"infer"``);
    None when Arrow refuses the body or the list is null."""
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


#: A number spelled as Arrow's reader takes it and Python's ``json`` does not
#: (``-NaN``, ``Inf``, ``-Inf``; also ``NaN``, which the exact path reads).
_NON_FINITE = re.compile(rb"[:,\[]\s*-?(?:NaN|Inf)")
#: :data:`_NON_FINITE` for Arrow's regex kernel (RE2, ``\s`` spelled out as
#: Python's): it scans the rows with the GIL released (~1.7 ms per 1.5 MB, where
#: ``b"NaN" in text`` and ``b"Inf" in text`` held the GIL ~1.7 ms together,
#: blocking the worker's event loop).
_NON_FINITE_RE2 = r"[:,\[][ \t\n\r\f\v]*-?(?:NaN|Inf)"


def _valid_utf8(text: bytes) -> bool:
    """Whether ``text`` (the rows) is valid UTF-8: Arrow's reader checks the UTF-8
    neither of strings it is told to ignore nor of those it keeps (invalid or
    CESU-8 surrogate bytes, F1, which the exact path counts). Python's strict
    decoder (C, ~0.3 ms per 1.5 MB; ASCII text is only scanned)."""
    if text.isascii():
        return True
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _finite(text: bytes) -> bool:
    """Whether ``text`` holds no non-finite number as Arrow's reader spells
    them (``-NaN``, ``Inf``, ``-Inf``; Python's ``json`` refuses those) where
    Arrow would not refuse it: in a field it ignores. A ``NaN``/``Inf`` after
    ``:``/``,``/``[`` even in a string declines (safe: the exact path
    decides). Objects nested in ignored fields (read by Arrow to any depth,
    refused by the exact path) are checked after the parse (one ``{`` per
    row). ~2.3 ms per 1.5 MB, the GIL released."""
    arr = pa.Array.from_buffers(pa.large_binary(), 1, [
        None, pa.py_buffer(struct.pack("<qq", 0, len(text))), pa.py_buffer(text)])
    return not pc.match_substring_regex(arr, _NON_FINITE_RE2)[0].as_py()


def _keyed(body: bytes, start: int, end: int, doc: DocumentConfig,
           structs: pa.StructArray) -> bool:
    """Whether every row of ``body[start:end]`` (the rows Arrow read as
    ``structs``) has every declared field, null or not. A column without
    nulls has; else its key, spelt plainly, must follow a ``{`` or ``,`` once
    per row: strict JSON (Arrow's reader) puts no unescaped ``"`` after a
    comma inside a string, rows hold no nested object and no ``{`` in a
    string (one ``{`` per row, checked before) and no key twice. A key spelt
    with escapes, or a declared field in no row, counts as absent (declined:
    safe). The regex runs in Arrow (GIL released), only for columns holding
    nulls."""
    rows = None
    for spec in doc.columns or []:
        idx = structs.type.get_field_index(spec.fieldName)
        if idx < 0:
            return False
        col = structs.field(idx)
        if not col.null_count:
            continue
        if rows is None:
            rows = pa.array([memoryview(body)[start:end].tobytes()], pa.large_binary())
        key = orjson.dumps(spec.fieldName)
        if b"\\" in key:
            return False
        pattern = r"[{,][ \t\n\r]*\Q" + key.decode() + r"\E[ \t\n\r]*:"
        if pc.count_substring_regex(rows, pattern)[0].as_py() != len(col):
            return False
    return True


#: The type a column without a declared type is read as, by the Python type
#: of its value in the page's first row (``rows_to_batch`` infers these
#: the same way when every value of the page has that type).
_GUESS = {int: pa.int64(), str: pa.string(), bool: pa.bool_()}


def _columns_handled(doc: DocumentConfig) -> bool:
    """Whether ``doc``'s columns are ones the fast decode reads: each
    declared ``int``/``string``/``datetime`` or without a type, no
    ``dictionary`` or ``mask``, names unique and free of lone surrogates,
    at most as many as Excel holds; or no columns."""
    columns = doc.columns or []
    if not xlsx_columns_fit(len(columns)):
        return False
    names = [c.fieldName for c in columns]
    if len(set(names)) != len(names) or any(SURROGATE.search(n) for n in names):
        return False
    return not any((c.type is not None and c.type not in _READ_TYPES) or c.dictionary
                   or c.mask for c in columns)


def _row_schema(doc: DocumentConfig, first: dict | None) -> tuple[pa.Schema, bool]:
    """The reader's schema ``{rows: [{<columns>}]}`` and whether it holds
    every column of the page: the declared types, and for a column without
    one (every field of ``first`` without columns) the type its value in
    the page's ``first`` row guesses (:data:`_GUESS`)."""
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
    """The page's columns as ``rows_to_batch`` types them, or None when any
    cell would take its per-value (counted) path. Without columns they are
    the fields in first-seen order: the first row's, then the others in
    the order the reader met them."""
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
    """``col`` (``int64``) when every value is exact in a double (|n| <=
    2**53), else None (E8: beyond becomes text, counted)."""
    if col.null_count != len(col):
        lo, hi = pc.min_max(col).values()
        if lo.as_py() < -MAX_EXACT_INT or hi.as_py() > MAX_EXACT_INT:
            return None
    return col


def _untyped(col: pa.Array, zone_name: str) -> pa.Array | None:
    """A column without a declared type as ``rows_to_batch`` infers it from
    the page's values, or None when that is not provable here: all null ->
    ``string`` nulls; ``int64`` exact in a double; ``bool``; ``string``, or
    ``timestamp("us", zone_name)`` when every text is an RFC 3339
    date-time with an offset (F10) and each a UTC instant in whole seconds
    (:func:`sinks.values.utc_text_array`; other date-times decline)."""
    t = col.type
    if col.null_count == len(col):
        return pa.nulls(len(col), pa.string())
    if t == pa.int64():
        return _exact_ints(col)
    if t == pa.bool_():
        return col
    if t != pa.string():
        return None  # a float, a timestamp Arrow read from text, a nested value
    first = col.drop_null()[0].as_py()
    if not OFFSET_DATETIME.match(first):
        return col  # as rows_to_batch: text unless its first text is a date-time
    if all(OFFSET_DATETIME.match(v) for v in pc.unique(col).drop_null().to_pylist()):
        return utc_text_array(col, zone_name)
    return col
