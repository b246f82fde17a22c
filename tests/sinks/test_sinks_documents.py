"""pdf and docx writers read back: pypdf text extraction, python-docx tables.
The cells equal the rows (long values cut with an ellipsis and counted), CJK
text is present, the header is on every page, the caps refuse (plait.documents)."""
from __future__ import annotations

import re
from pathlib import Path

import docx
import pyarrow as pa
import pypdf
import pytest

from plait.documents import DocumentCaps
from plait.errors import PermanentError
from plait.spec import DocumentConfig
from sinks.writers import open_writer
from sinks.writers.docx_writer import DocxWriter
from sinks.writers.pdf_writer import FONT_FILES, PdfWriter

CJK = ["東京都の売上", "北京市 数据导出", "한국어 보고서", "カタカナ"]


def rows_batch(n: int, start: int = 0) -> pa.RecordBatch:
    ids = list(range(start + 1, start + n + 1))
    return pa.RecordBatch.from_pydict({
        "id": pa.array(ids, pa.int64()),
        "city": pa.array([CJK[i % len(CJK)] for i in ids]),
        "note": pa.array([("long " * 60 if i % 7 == 0 else f"note {i}") for i in ids]),
        "amount": pa.array([i * 0.5 for i in ids]),
        "ok": pa.array([i % 2 == 0 for i in ids]),
    })


def expected_cells(batch: pa.RecordBatch, limit: int) -> list[list[str]]:
    out = []
    for r in batch.to_pylist():
        note = r["note"] if len(r["note"]) <= limit else r["note"][: limit - 1] + "\u2026"
        amount = r["amount"]
        out.append([str(r["id"]), r["city"], note,
                    str(int(amount)) if amount.is_integer() else repr(amount),
                    "true" if r["ok"] else "false"])
    return out


def write(cls, tmp_path: Path, fmt: str, batches, caps: DocumentCaps):
    doc = DocumentConfig(fileFormat=fmt, fileName="report")
    w = cls(tmp_path / f"report.{fmt}", batches[0].schema, doc, caps)
    for b in batches:
        w.write_batch(b)
    return w.close()


def test_docx_cells_equal_the_rows_with_long_values_cut(tmp_path):
    caps = DocumentCaps("docx", 12, 1000, 40)
    batches = [rows_batch(120), rows_batch(80, start=120)]
    report = write(DocxWriter, tmp_path, "docx", batches, caps)
    table = docx.Document(str(report.path)).tables[0]
    cells = [[c.text for c in row.cells] for row in table.rows]
    assert cells[0] == ["id", "city", "note", "amount", "ok"]
    assert cells[1:] == expected_cells(batches[0], 40) + expected_cells(batches[1], 40)
    assert report.rows == 200
    cut = sum(1 for i in range(1, 201) if i % 7 == 0)
    assert report.quality["truncated"] == cut == report.quality["truncated:note"]
    assert any(c in sum(cells, []) for c in CJK)
    # the header row repeats on every page Word lays out (w:tblHeader)
    tr = table.rows[0]._tr
    assert tr.trPr is not None and tr.trPr.find(
        "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}tblHeader") is not None


def test_docx_keeps_line_breaks_tabs_and_no_value(tmp_path):
    batch = pa.RecordBatch.from_pydict({"a": pa.array(["one\r\ntwo\tthree", None, "<&>"])})
    report = write(DocxWriter, tmp_path, "docx", [batch], DocumentCaps("docx", 12, 10, 200))
    table = docx.Document(str(report.path)).tables[0]
    assert [r.cells[0].text for r in table.rows] == ["a", "one\ntwo\tthree", "", "<&>"]


@pytest.mark.parametrize("cls,fmt", [(PdfWriter, "pdf"), (DocxWriter, "docx")])
def test_control_characters_in_headers_and_cells_are_removed(tmp_path, cls, fmt):
    batch = pa.RecordBatch.from_pydict({"a\x01b": pa.array(["x\x0by", "ok"])})
    report = write(cls, tmp_path, fmt, [batch], DocumentCaps(fmt, 12, 10, 200))
    if fmt == "docx":
        cells = [r.cells[0].text for r in docx.Document(str(report.path)).tables[0].rows]
        assert cells == ["ab", "xy", "ok"]
    else:
        assert pdf_pages(report.path)[0].split("\n")[:3] == ["ab", "xy", "ok"]
    assert report.quality["sanitized"] == 2


def pdf_pages(path: Path) -> list[str]:
    return [p.extract_text() for p in pypdf.PdfReader(str(path)).pages]


def test_pdf_multi_page_has_the_header_on_every_page_and_every_row(tmp_path):
    caps = DocumentCaps("pdf", 12, 1000, 40)
    batch = rows_batch(300)
    report = write(PdfWriter, tmp_path, "pdf", [batch], caps)
    pages = pdf_pages(report.path)
    assert len(pages) > 3
    for text in pages:  # the header row opens every page
        assert text.split("\n")[:5] == ["id", "city", "note", "amount", "ok"]
    text = "\n".join(pages)
    joined = text.replace("\n", " ")
    for row in expected_cells(batch, 40):
        for cell in row:  # wrapped cells read back with line breaks for spaces
            assert cell in joined or cell.replace(" ", "") in text.replace("\n", ""), cell
    # the ids appear in order, each once, as the first cell of its row
    ids = [int(x) for x in re.findall(r"^(\d+)$", text, re.M) if int(x) <= 300]
    assert sorted(set(ids)) == list(range(1, 301))
    assert all(c in text for c in CJK)
    assert report.quality["truncated:note"] == sum(1 for i in range(1, 301) if i % 7 == 0)


def test_pdf_characters_the_font_lacks_are_replaced_and_counted(tmp_path):
    batch = pa.RecordBatch.from_pydict({"a": pa.array(["smile \U0001F600 ok", "plain"])})
    report = write(PdfWriter, tmp_path, "pdf", [batch], DocumentCaps("pdf", 12, 10, 200))
    text = "\n".join(pdf_pages(report.path))
    assert "smile \u25a1 ok" in text and "plain" in text
    assert report.quality["sanitized:a"] == 1


def test_pdf_embeds_the_cjk_font_so_it_renders_anywhere(tmp_path):
    # fonts-wqy-zenhei is installed by .ci/run and the Dockerfile
    assert Path(FONT_FILES[0]).exists(), "install Debian's fonts-wqy-zenhei"
    batch = pa.RecordBatch.from_pydict({"city": pa.array(CJK)})
    report = write(PdfWriter, tmp_path, "pdf", [batch], DocumentCaps("pdf", 12, 10, 200))
    page = pypdf.PdfReader(str(report.path)).pages[0]
    fonts = page["/Resources"]["/Font"]
    embedded = [f["/BaseFont"] for f in (fonts[k].get_object() for k in fonts)
                if "/FontFile2" in f.get("/FontDescriptor", {})]
    assert embedded and all("WenQuanYiZenHei" in name for name in embedded), embedded
    assert all(c in page.extract_text() for c in CJK)


@pytest.mark.parametrize("cls,fmt", [(PdfWriter, "pdf"), (DocxWriter, "docx")])
def test_more_rows_than_the_cap_is_refused_naming_it(tmp_path, cls, fmt):
    caps = DocumentCaps(fmt, 12, 150, 200)
    doc = DocumentConfig(fileFormat=fmt)
    w = cls(tmp_path / f"x.{fmt}", rows_batch(1).schema, doc, caps)
    w.write_batch(rows_batch(100))
    with pytest.raises(PermanentError) as err:
        w.write_batch(rows_batch(100, start=100))
    assert f"{fmt} allows at most 150 rows" in str(err.value)
    assert "xlsx or csv" in str(err.value) and "jobConfig.maxRows" in str(err.value)


@pytest.mark.parametrize("fmt", ["pdf", "docx"])
def test_more_columns_than_the_cap_is_refused_at_open(tmp_path, fmt, monkeypatch):
    monkeypatch.setenv(f"PLAIT_{fmt.upper()}_MAX_COLUMNS", "3")
    from plait.settings import get_settings

    get_settings.cache_clear()
    try:
        with pytest.raises(PermanentError) as err:
            open_writer(tmp_path, rows_batch(1).schema, DocumentConfig(fileFormat=fmt))
    finally:
        get_settings.cache_clear()
    assert f"{fmt} allows at most 3 columns" in str(err.value)
    assert "the export has 5" in str(err.value) and "xlsx or csv" in str(err.value)


@pytest.mark.parametrize("fmt", ["pdf", "docx"])
def test_an_empty_export_is_a_header_only_document(tmp_path, fmt):
    report = open_writer(tmp_path, rows_batch(1).schema, DocumentConfig(fileFormat=fmt)).close()
    assert report.rows == 0 and report.path.suffix == f".{fmt}"
    if fmt == "pdf":
        assert pdf_pages(report.path)[0].split("\n")[:2] == ["id", "city"]
    else:
        assert len(docx.Document(str(report.path)).tables[0].rows) == 1
