"""Fast page decode: a data API answer body straight into a typed Arrow batch.

:func:`decode_page` is an optional shortcut for ``loads_exact(body)`` followed by
``rows_to_batch(data.rows, doc)`` (``sinks.values``). It parses the rows, cut
out of the body, with Arrow's JSON reader (C++, releases the GIL; no Python
object per cell) under an explicit schema built from the declared column
types, and answers only when it can prove the result is what the exact
path gives; otherwise it answers ``None`` and the caller takes the exact path,
which also raises what it always raised. Rules it keeps
(docs/fidelity-rules.md, "Fast page decode"):

- only pages whose ``documentConfig.columns`` are all declared ``int``,
  ``string`` or ``datetime`` (no ``dictionary``/``mask``) and that end with
  no cell change to count (quality counts ``{}``): an int beyond 2**53 (E8),
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
from sinks.values import MAX_EXACT_INT, _SURROGATE, loads_exact, utc_text_array, zone_of

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
    field per declared column, in ``doc.columns`` order, without metadata:
    ``int64`` (every |n| <= 2**53), ``string``, ``timestamp("us",
    doc.timeZone)``; when it answers, see the module docstring and
    docs/fidelity-rules.md, "Fast page decode". Never raises on bad data: a
    body the exact path would refuse is declined. CPU: ~11 ms per 5,000
    flights rows (GIL released while Arrow parses).

    ``envelope`` (argument): what :func:`read_envelope` gave for this body
    already, so it is not read again (its dict is reused).
    """
    schema = _row_schema(doc)
    if schema is None:
        return None
    read = envelope if envelope is not None else read_envelope(body)
    if read is None:
        return None
    envelope, start, end = read
    # the rows alone, as one object (read_envelope proved they hold no "]")
    rows_body = b'{"rows":[' + memoryview(body)[start:end] + b"]}"
    if not _valid_utf8(rows_body):
        return None
    try:
        zone_of(doc.timeZone)
    except Exception:  # noqa: BLE001 - an unknown zone: the exact path
        return None
    listed = _read_rows(rows_body, schema, "error")
    if listed is None:  # an undeclared field (or a bad body): scan, then read ignoring it
        if not _finite(rows_body):
            return None
        listed = _read_rows(rows_body, schema, "ignore")
        if listed is None:
            return None
    del rows_body
    structs = listed.flatten()
    if structs.null_count:  # a null row: the exact path refuses the page
        return None
    if body.count(b"{", start, end) != len(structs):
        return None  # an object inside a row (or a "{" in a string): see _finite
    cols = structs.flatten()
    if not _keyed(body, start, end, doc, cols):
        return None  # a row without a declared field: the exact path counts it
    batch = _typed(cols, doc)
    if batch is None:
        return None
    envelope["data"]["rows"] = []  # type: ignore[index]
    return envelope, batch  # type: ignore[return-value]


def _read_rows(rows_body: bytes, schema: pa.Schema, unexpected: str) -> pa.ListArray | None:
    """The ``rows`` list of ``rows_body`` (``{"rows":[...]}``, one line) read
    by Arrow under ``schema``, undeclared fields refused (``unexpected``
    ``"error"``) or ignored (``"ignore"``); None when Arrow refuses the body
    or the list is null."""
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


def _keyed(body: bytes, start: int, end: int, doc: DocumentConfig, cols: list[pa.Array]) -> bool:
    """Whether every row of ``body[start:end]`` (the rows Arrow read as
    ``cols``) has every declared field, null or not. A column without nulls
    has; else its key, spelt plainly, must follow a ``{`` or ``,`` once per
    row: strict JSON (Arrow's reader) puts no unescaped ``"`` after a comma
    inside a string, rows hold no nested object and no ``{`` in a string
    (one ``{`` per row, checked before) and no key twice. A key spelt with
    escapes counts as absent (declined: safe). The regex runs in Arrow (GIL
    released), only for columns holding nulls."""
    rows = None
    for spec, col in zip(doc.columns or [], cols):
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


def _row_schema(doc: DocumentConfig) -> pa.Schema | None:
    """The reader's schema ``{rows: [{<declared columns>}]}``, or None
    when a column is not one the fast decode handles."""
    columns = doc.columns or []
    if not columns or not xlsx_columns_fit(len(columns)):
        return None
    names = [c.fieldName for c in columns]
    if len(set(names)) != len(names) or any(_SURROGATE.search(n) for n in names):
        return None
    if any(c.type not in _READ_TYPES or c.dictionary or c.mask for c in columns):
        return None
    row = pa.struct([pa.field(c.fieldName, _READ_TYPES[c.type]) for c in columns])
    return pa.schema([pa.field("rows", pa.list_(row))])


def _typed(cols: list[pa.Array], doc: DocumentConfig) -> pa.RecordBatch | None:
    """The columns as ``rows_to_batch`` types them, or None when any cell
    would take its per-value (counted) path."""
    arrays, fields = [], []
    for spec, col in zip(doc.columns or [], cols):
        if spec.type == "int":
            if col.null_count != len(col):
                lo, hi = pc.min_max(col).values()
                if lo.as_py() < -MAX_EXACT_INT or hi.as_py() > MAX_EXACT_INT:
                    return None  # E8: beyond 2**53 becomes text, counted
        elif spec.type == "datetime":
            if col.null_count == len(col):
                return None
            col = utc_text_array(col, doc.timeZone)
            if col is None:
                return None
        arrays.append(col)
        fields.append(pa.field(spec.fieldName, col.type))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
