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

from sinks.writers import xlsx_native
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


def _sheet_xml(path) -> bytes:
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None  # every entry inflates to its CRC-32
        return zf.read("xl/worksheets/sheet1.xml")


@pytest.mark.parametrize("with_floats", [True, False])
def test_chunked_sheet_is_the_one_write_sheet(tmp_path, monkeypatch, with_floats):
    # given pages written natively in one chunk and in chunks of 300 rows (cut inside pages)
    batches = _pages(4)
    if not with_floats:  # no float column: the plain ``.0`` replace
        batches = [b.drop_columns(["x"]) for b in batches]
    doc = make_doc("xlsx")
    _, one = _write(NativeXlsxWriter, tmp_path / "one.xlsx", batches, doc)
    monkeypatch.setattr(xlsx_native, "CHUNK_CELLS", 300 * batches[0].num_columns)
    w, a = _write(NativeXlsxWriter, tmp_path / "a.xlsx", batches, doc)
    _, b = _write(NativeXlsxWriter, tmp_path / "b.xlsx", batches, doc)
    _, ref = _write(XlsxWriter, tmp_path / "r.xlsx", batches, doc)
    # then the chunked file holds the same sheet XML, range and filter as one write
    assert w.engine == "rustpy-xlsxwriter"
    assert _sheet_xml(a.path) == _sheet_xml(one.path)
    with zipfile.ZipFile(a.path) as za, zipfile.ZipFile(one.path) as zo:
        assert za.namelist() == zo.namelist()
        assert all(za.read(n) == zo.read(n) for n in za.namelist())
    sheet = _sheet_xml(a.path)
    assert b'<dimension ref="A1:' in sheet and b"2001\"/>" in sheet  # 2,000 rows + header
    assert sheet.count(b'<row r="301"') == 1 and b".0</v></c><c r=\"B" not in sheet
    # bytes are deterministic and the cells those of xlsxwriter
    assert a.path.read_bytes() == b.path.read_bytes()
    assert_same_xlsx(a.path, ref.path, a.rows)
    assert not list(tmp_path.glob(".*rows"))


def test_a_chunk_of_a_sheet_holds_at_most_131072_cells(tmp_path, monkeypatch):
    # given 14,000 rows of 20 columns written natively as one sheet
    chunks = []
    write_chunk = xlsx_native._write_chunk

    def counted(name, batches, schema, header_row, options):
        package, rows = write_chunk(name, batches, schema, header_row, options)
        chunks.append(rows)
        return package, rows

    monkeypatch.setattr(xlsx_native, "_write_chunk", counted)
    batch = pa.record_batch({f"c{i}": pa.array(range(2_000), pa.int64()) for i in range(20)})
    w, rep = _write(NativeXlsxWriter, tmp_path / "w.xlsx", [batch] * 7, make_doc("xlsx"))
    # then the library held at most 131,072 cells at a time (the worker's memory bound)
    assert w.engine == "rustpy-xlsxwriter" and rep.rows == 14_000
    assert sum(chunks) == 14_000 and max(chunks) * 20 <= 131_072, chunks


def test_crc32_combine_is_the_crc_of_the_concatenation():
    import os
    import zlib
    for n1, n2 in [(0, 0), (5, 0), (0, 7), (100, 12_345), (1 << 20, 3_000_001)]:
        a, b = os.urandom(n1), os.urandom(n2)
        assert xlsx_native.crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_finish_package_removes_every_point_zero_whatever_the_chunk_cuts(tmp_path, monkeypatch):
    # a value's ``.0</v>`` ending right at a read boundary was left in place (issue 12)
    body = "".join(f'<row r="{r}"><c r="A{r}"><v>{r}.0</v></c></row>' for r in range(2, 40))
    xml = f'<worksheet><sheetData>{body}</sheetData></worksheet>'.encode()
    for size in range(20, 90):
        path = tmp_path / f"s{size}.xlsx"
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("xl/worksheets/sheet1.xml", xml)
            zf.writestr("docProps/core.xml", "<x/>")
        monkeypatch.setattr(xlsx_native, "_CHUNK", size)
        xlsx_native.finish_package(path, [0], keep_float_columns=False)
        assert _sheet_xml(path) == xml.replace(b".0</v>", b"</v>"), size


@pytest.mark.parametrize("keep_floats", [True, False])
def test_arrow_stripper_rewrites_as_the_python_rewrite(keep_floats):
    # cells: integer columns A and AB (styled, negative), float column B, a text ".0"
    xml = ('<row r="2"><c r="A2"><v>517.0</v></c><c r="B2"><v>2.0</v></c>'
           '<c r="AB2" s="3"><v>-40.0</v></c><c r="C2" t="inlineStr"><is><t>x.0</t></is></c>'
           '<c r="AB3"><v>1.5</v></c><c r="AA2"><v>7.0</v></c></row>').encode()
    pattern = None
    if keep_floats:
        letters = b"|".join(xlsx_native._column_letters(c) for c in (0, 27))
        pattern = __import__("re").compile(
            rb'(<c r="(?:' + letters + rb')\d+"(?: s="\d+")?><v>-?\d+)\.0</v>')
    got = bytes(xlsx_native._stripper([0, 27], keep_floats)(xml))
    assert got == xlsx_native._strip(xml, pattern)
    assert b'<c r="A2"><v>517</v>' in got and b'<v>-40</v>' in got and b"<v>1.5</v>" in got
    assert (b'<c r="B2"><v>2.0</v>' in got) == keep_floats
