"""The native xlsx engine's adapter (issue 12 item 4): which engine writes
the file, fallbacks decided after the stream started, deterministic bytes,
integers as integers. Cell-by-cell equality with xlsxwriter over the whole
corpus is checked by ``engine_compare`` (conftest) for every test here."""
from __future__ import annotations

import datetime as dt
import zipfile

import pyarrow as pa
import pytest
from engine_compare import assert_same_xlsx
from sink_helpers import make_doc

from sinks.writers.xlsx_native import NativeXlsxWriter, native_available
from sinks.writers.xlsx_writer import XlsxWriter

pytestmark = pytest.mark.skipif(not native_available(), reason="rustpy-xlsxwriter missing")


def _write(cls, path, batches, doc):
    w = cls(path, batches[0].schema, doc)
    for b in batches:
        w.write_batch(b)
    return w, w.close()


def _pages(n_pages: int, late: dict | None = None) -> list[pa.RecordBatch]:
    out = []
    for p in range(n_pages):
        text = [f"t{p}-{i}" for i in range(500)]
        if late and p == late["page"]:
            text[7] = late["text"]
        out.append(pa.record_batch({
            "id": pa.array(range(p * 500, p * 500 + 500), pa.int64()),
            "x": pa.array([i / 7 for i in range(500)]),
            "t": pa.array(text),
            "ts": pa.array([1_700_000_000_000_000 + i * 1_000_000 for i in range(500)],
                           pa.int64()).cast(pa.timestamp("us", "UTC")),
            "d": pa.array([dt.date(2024, 1, 1)] * 500)}))
    return out


def test_clean_stream_is_written_natively_and_matches_xlsxwriter(tmp_path):
    batches = _pages(4)
    w, rep = _write(NativeXlsxWriter, tmp_path / "n.xlsx", batches, make_doc("xlsx"))
    _, ref = _write(XlsxWriter, tmp_path / "r.xlsx", batches, make_doc("xlsx"))
    assert (w.engine, w.fallback) == ("rustpy-xlsxwriter", None)
    assert_same_xlsx(rep.path, ref.path, rep.rows)
    assert rep.quality == ref.quality


def test_fallback_found_after_the_stream_started_rewrites_with_xlsxwriter(tmp_path):
    # pages 0..2 are clean (the native stream is running), page 3 holds formula text
    batches = _pages(4, late={"page": 3, "text": "=HYPERLINK(\"x\")"})
    doc = make_doc("xlsx", escapeFormulas=True)
    w, rep = _write(NativeXlsxWriter, tmp_path / "n.xlsx", batches, doc)
    _, ref = _write(XlsxWriter, tmp_path / "r.xlsx", batches, doc)
    assert w.engine == "xlsxwriter" and w.fallback == "formula_escaped:t"
    assert rep.path.read_bytes() == ref.path.read_bytes()
    assert rep.quality == ref.quality and rep.quality["formula_escaped"] == 1
    assert not list(tmp_path.glob(".*spool*"))


def test_format_change_after_the_first_page_writes_natively_from_the_spool(tmp_path):
    # page 0: the datetime column is all null (default format); page 1: all sub-second
    first = pa.record_batch({"ts": pa.nulls(3, pa.timestamp("us", "UTC"))})
    second = pa.record_batch({"ts": pa.array([1_700_000_000_000_123, None, 5],
                                             pa.int64()).cast(pa.timestamp("us", "UTC"))})
    w, rep = _write(NativeXlsxWriter, tmp_path / "n.xlsx", [first, second], make_doc("xlsx"))
    _, ref = _write(XlsxWriter, tmp_path / "r.xlsx", [first, second], make_doc("xlsx"))
    assert w.engine == "rustpy-xlsxwriter"
    assert_same_xlsx(rep.path, ref.path, rep.rows)


def test_native_bytes_are_deterministic_and_integers_stay_integers(tmp_path):
    batches = _pages(2)
    _, a = _write(NativeXlsxWriter, tmp_path / "a.xlsx", batches, make_doc("xlsx"))
    _, b = _write(NativeXlsxWriter, tmp_path / "b.xlsx", batches, make_doc("xlsx"))
    assert a.path.read_bytes() == b.path.read_bytes()
    with zipfile.ZipFile(a.path) as zf:
        core = zf.read("docProps/core.xml").decode()
        sheet = zf.read("xl/worksheets/sheet1.xml").decode()
    assert "2000-01-01T00:00:00Z" in core
    assert '<c r="A2"><v>0</v></c>' in sheet and "<f>" not in sheet


def test_text_only_files_are_deterministic_too(tmp_path):
    # no integer column: only docProps/core.xml is rewritten, the sheets kept as written
    batch = pa.record_batch({"t": pa.array(["a", "b", None, "c"])})
    _, a = _write(NativeXlsxWriter, tmp_path / "a.xlsx", [batch], make_doc("xlsx"))
    _, b = _write(NativeXlsxWriter, tmp_path / "b.xlsx", [batch], make_doc("xlsx"))
    assert a.path.read_bytes() == b.path.read_bytes()
    with zipfile.ZipFile(a.path) as zf:
        assert zf.testzip() is None
        assert "2000-01-01T00:00:00Z" in zf.read("docProps/core.xml").decode()


def test_abort_stops_the_streaming_thread(tmp_path):
    # given a native writer whose first sheet is streaming from a thread
    w = NativeXlsxWriter(tmp_path / "n.xlsx", _pages(1)[0].schema, make_doc("xlsx"))
    for b in _pages(3):
        w.write_batch(b)
    thread = w._thread
    assert thread is not None and thread.is_alive()
    # when the task's file is dropped unfinished (cancel, failure)
    w.abort()
    w.abort()  # idempotent
    # then the thread has ended instead of waiting for batches until the process exits
    assert not thread.is_alive()
