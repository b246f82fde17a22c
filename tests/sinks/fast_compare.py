"""The fast page decode (``sinks.fastpage.decode_page``) checked against the
exact path on every page the sink tests normalize.

:func:`check_body` decodes an answer body both ways: the exact way
(``parse_body`` without a doc, then ``rows_to_batch``) and with the doc (the
fast decode when it takes the page). Either the fast decode declined, or the
page (envelope, batch with schema and field metadata) and the quality counts
are the same; when the exact path raises, the fast decode must decline.

:func:`checking` wraps ``rows_to_batch`` for the sink tests (tests/sinks
conftest): every page a test normalizes is written as an answer body (its
rows as JSON) and checked, with the test's doc and with docs declaring each
column int, string or datetime (the types the fast decode reads), so the whole
fidelity corpus runs through both paths.
"""
from __future__ import annotations

import json
import struct
from collections import Counter

import pyarrow as pa

from plait.errors import PermanentError
from plait.spec import ColumnSpec, DocumentConfig
from sinks import values as V
from sinks.fastpage import read_envelope
from streams.datasource import cursor_numbers, parse_body

#: The exact normalizer (the sink tests' conftest wraps the module's name).
_EXACT = V.rows_to_batch
#: How the checks went over a test session ("taken", "declined", "exact raised").
FAST = Counter()


def check_body(body: bytes, doc: DocumentConfig) -> bool:
    """Assert the fast decode of ``body`` under ``doc`` equals the exact one
    or declined; True when it took the page."""
    try:
        exact = parse_body(0, body)
        assert exact.batch is None
        want, counts = _EXACT(exact.rows, doc, page=0)
    except PermanentError:
        try:
            got = parse_body(0, body, doc)
        except PermanentError:
            got = None
        assert got is None or got.batch is None, (body[:300], doc)
        FAST["exact raised"] += 1
        return False
    # the envelope read apart from the rows (the next page's cursor, asked for
    # before the page is decoded) is the exact one whenever the page is accepted
    read = read_envelope(body)
    if read is not None:
        env = read[0]
        assert (env["code"], env["data"]["status"]) == (200, "finish" if exact.finished
                                                       else "continue"), body[:300]
        try:  # as Answer.next_cursor
            hinted = cursor_numbers(env["data"].get("runtimeContext") or {})
        except ValueError:  # NaN, 1E400: parse_body drops a last page's cursor
            hinted = {}     # (a page going on with it was refused above)
        assert json.dumps(hinted, default=repr) == json.dumps(exact.next_context,
                                                              default=repr), body[:300]
    fast = parse_body(0, body, doc, read)
    if fast.batch is None:
        FAST["declined"] += 1
        return False
    assert read is not None
    assert counts == {}, (body[:300], counts)
    assert fast.rows == [] and fast.row_count == want.num_rows
    assert (fast.next_context, fast.finished, fast.total) == \
        (exact.next_context, exact.finished, exact.total)
    assert type(fast.next_context) is type(exact.next_context)
    assert json.dumps(fast.next_context, default=repr) == json.dumps(exact.next_context,
                                                                     default=repr)
    assert fast.batch.schema.equals(want.schema, check_metadata=True), \
        (body[:300], fast.batch.schema, want.schema)
    assert fast.batch.equals(want), (body[:300], fast.batch, want)
    for got_col, want_col in zip(fast.batch.columns, want.columns):
        if pa.types.is_floating(got_col.type):  # equals() takes -0.0 for 0.0, never NaN for NaN
            assert _bits(got_col) == _bits(want_col), (body[:300], got_col, want_col)
    FAST["taken"] += 1
    return True


def body_of(rows: list, *, ensure_ascii: bool = False, pretty: bool = False) -> bytes:
    """An answer body carrying ``rows`` (JSON-able values; Decimals keep
    their digits, lone surrogates become ``\\uXXXX`` escapes)."""
    text, plain = V.dumps_rows(rows)
    if plain and (ensure_ascii or pretty):
        text = json.dumps(rows, ensure_ascii=ensure_ascii,
                          separators=(", ", ": ") if pretty else (",", ":")).encode()
    return (b'{"code":200,"message":"ok","data":{"status":"continue",'
            b'"runtimeContext":{"lastId":7,"pageSize":5000},"rows":' + text +
            b',"total":12}}')


def declared_docs(rows: list, doc: DocumentConfig) -> list[DocumentConfig]:
    """``doc`` and, per column of ``rows`` (at most 6), docs declaring it int,
    string or datetime, or listing it alone without a type; all keys (at
    most 64) declared string, and listed without a type (the contract's
    ``headerName`` + ``fieldName``); ``doc`` without columns."""
    out = [doc]
    keys: dict = {}
    for r in rows:
        if isinstance(r, dict):
            keys.update(dict.fromkeys(k for k in r if isinstance(k, str)))
    def with_columns(columns: list[tuple[str, str]]) -> None:
        try:  # model_copy: the test's doc as is (also one validation refuses)
            specs = [ColumnSpec(fieldName=k, type=t) for k, t in columns]
        except ValueError:
            return
        out.append(doc.model_copy(update={"columns": specs}))

    for k in list(keys)[:6]:
        for t in ("int", "string", "datetime", None):
            with_columns([(k, t)])
    if 0 < len(keys) <= 64:
        with_columns([(k, "string") for k in keys])
        with_columns([(k, None) for k in keys])
    if doc.columns:
        out.append(doc.model_copy(update={"columns": None}))
    return out


def checking(original):
    """``rows_to_batch`` that first checks the fast decode on the same page."""

    def rows_to_batch(rows, doc, page=None, partition=0):
        try:
            body = body_of(rows)
        except (TypeError, ValueError):
            body = None
        if body is not None:
            for d in declared_docs(rows, doc):
                check_body(body, d)
        return original(rows, doc, page, partition)

    return rows_to_batch


def _bits(col: pa.Array) -> list[int | None]:
    """A double column's values as their IEEE 754 bits (nulls None)."""
    return [None if v is None else struct.unpack("<q", struct.pack("<d", v))[0]
            for v in col.to_pylist()]
