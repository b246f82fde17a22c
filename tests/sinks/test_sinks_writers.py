"""sinks.writers: splitting into a zip, byte-identical output, safe file and
sheet names, jsonl/parquet rendering, xlsx formats and headers."""
from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import math
import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sink_helpers import csv_rows, make_doc, pages_of, parquet_rows, xlsx_cells, xlsx_sheets

from plait.spec import ColumnSpec, DocumentConfig
from sinks.writers import open_writer, sanitize_file_name
from sinks.writers.xlsx_writer import sheet_name


def _rows(n: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "score": i / 4} for i in range(1, n + 1)]


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_split_into_zip_parts_add_up_to_the_source(export):
    # given 2,500 rows and at most 1,000 rows per file
    doc = make_doc("csv", fileName="orders", maxRowsPerFile=1000, csvFlavour="plain")
    # when exported in pages of 300 (so part boundaries fall inside pages)
    report, _ = export(list(pages_of(_rows(2500), 300)), doc)
    # then one zip holds three csv parts, each with the header, in order
    assert report.path.name == "orders.zip" and report.rows == 2500
    assert [(f.name, f.rows) for f in report.files] == [
        ("orders_part001.csv", 1000), ("orders_part002.csv", 1000), ("orders_part003.csv", 500)]
    assert report.quality["files"] == 3
    ids = []
    with zipfile.ZipFile(report.path) as zf:
        assert zf.namelist() == [f.name for f in report.files]
        for name in zf.namelist():
            records = csv_rows(zf.read(name))
            assert records[0] == ["id", "name", "score"]
            ids += [int(r[0]) for r in records[1:]]
    assert ids == list(range(1, 2501))
    assert sorted(p.name for p in report.path.parent.iterdir()) == ["orders.zip"]


def test_split_xlsx_parts_each_have_their_own_sheet(export):
    report, _ = export(_rows(5), make_doc("xlsx", maxRowsPerFile=2))
    assert [f.rows for f in report.files] == [2, 2, 1] and report.sheets == 3
    with zipfile.ZipFile(report.path) as zf:
        first = xlsx_sheets(io.BytesIO(zf.read("export_part001.xlsx")))
    assert first["Sheet1"][0] == ("id", "name", "score") and len(first["Sheet1"]) == 3


def test_split_that_fits_in_one_part_gives_the_plain_file(export):
    report, _ = export(_rows(3), make_doc("csv", fileName="small", maxRowsPerFile=10))
    assert report.path.name == "small.csv" and [f.rows for f in report.files] == [3]


@pytest.mark.parametrize("fmt,extra", [("xlsx", {}), ("csv", {}), ("parquet", {}),
                                       ("jsonl", {}), ("xlsx", {"maxRowsPerFile": 40})])
def test_same_input_gives_byte_identical_file(export, tmp_path, fmt, extra):
    rows = _rows(100) + [{"id": 0, "name": "=x", "score": math.inf}]
    doc = make_doc(fmt, types={"id": "int", "name": "string", "score": "float"}, **extra)
    first, _ = export(rows, doc, out=tmp_path / "a")
    second, _ = export(rows, doc, out=tmp_path / "b")
    assert first.path.name == second.path.name
    assert _sha(first.path) == _sha(second.path)


@pytest.mark.parametrize("given,expected", [
    ("../../etc/passwd", "_.._etc_passwd"),
    ("report.xlsx", "report"),
    ("a\x00b\nc", "a_b_c"),
    ("CON", "_CON"),
    ("nul.txt", "_nul"),
    ("  ..  ", "export"),
    ('q<u>o:t"e|s?*', "q_u_o_t_e_s__"),
    ("销售报表", "销售报表"),
])
def test_sanitized_file_names(given, expected):
    assert sanitize_file_name(given) == expected


def test_file_name_length_is_capped_and_stays_valid_utf8(export):
    long_name = "报" * 250
    stem = sanitize_file_name(long_name)
    assert len(stem.encode()) <= 200 and set(stem) == {"报"}
    report, _ = export(_rows(1), make_doc("csv", fileName="x/" + "y" * 250))
    assert "/" not in report.path.name and len(report.path.name.encode()) <= 255


@pytest.mark.parametrize("given,expected", [
    ("Sales [2024]: Q1/Q2?", "Sales _2024__ Q1_Q2_"),
    ("'quoted'", "quoted"),
    ("x" * 40, "x" * 31),
    ("History", "History_"),
])
def test_sheet_names_follow_excel_rules(given, expected):
    assert sheet_name(given) == expected
    assert len(sheet_name(given, " (2)")) <= 31


def test_xlsx_sheet_name_header_names_and_column_format(export):
    doc = DocumentConfig(fileFormat="xlsx", sheetName="Q1/Q2", columns=[
        ColumnSpec(fieldName="amt", headerName="Amount", type="float", format="0.00"),
        ColumnSpec(fieldName="day", type="date", format="dd/mm/yyyy")])
    report, _ = export([{"amt": 3.14159, "day": "2024-03-10"}], doc)
    assert list(xlsx_sheets(report.path)) == ["Q1_Q2"]
    (h1, h2), (amt, day) = xlsx_cells(report.path)
    assert (h1.value, h2.value, h1.font.b) == ("Amount", "day", True)
    assert amt.value == 3.14159 and amt.number_format == "0.00"
    assert day.value == dt.datetime(2024, 3, 10) and day.number_format == "dd/mm/yyyy"


def test_jsonl_lines_keep_unicode_and_render_nan_inf_datetimes(export):
    rows = [{"city": "上海", "x": math.nan, "ts": "2024-03-10T01:30:00-05:00"},
            {"city": None, "x": -math.inf, "ts": None}]
    report, _ = export(rows, make_doc("jsonl", types={"city": "string", "x": "float",
                                                      "ts": "datetime"}))
    text = report.path.read_text(encoding="utf-8")
    assert "上海" in text and text.endswith("\n")
    assert [json.loads(line) for line in text.splitlines()] == [
        {"city": "上海", "x": None, "ts": "2024-03-10T06:30:00+00:00"},
        {"city": None, "x": "-inf", "ts": None}]


def test_parquet_keeps_types_and_zstd(export):
    doc = make_doc("parquet", types={"id": "int", "ts": "datetime", "note": "string"})
    report, _ = export([{"id": 1, "ts": "2024-03-10T01:30:00-05:00", "note": "=x"}], doc)
    meta = pq.ParquetFile(report.path).metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert pq.read_schema(report.path).field("ts").type == pa.timestamp("us", tz="UTC")
    assert parquet_rows(report.path)[0]["note"] == "=x"


def test_csv_delimiter_and_header_formula_escape(export):
    report, _ = export([{"=a": 1, "b": "x;y"}], make_doc("csv", csvDelimiter=";"))
    assert csv_rows(report.path, delimiter=";") == [["'=a", "b"], ["1", "x;y"]]


def test_empty_export_writes_the_header_only(tmp_path):
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    for fmt in ("csv", "xlsx"):
        report = open_writer(tmp_path / fmt, schema, make_doc(fmt)).close()
        assert report.rows == 0
    assert csv_rows(tmp_path / "csv" / "export.csv") == [["id", "name"]]
    assert xlsx_sheets(tmp_path / "xlsx" / "export.xlsx") == {"Sheet1": [("id", "name")]}


def test_writer_rejects_batches_after_close_and_foreign_schemas(tmp_path):
    schema = pa.schema([pa.field("id", pa.int64())])
    writer = open_writer(tmp_path, schema, make_doc("csv"))
    with pytest.raises(ValueError, match="conform"):
        writer.write_batch(pa.record_batch([pa.array(["x"])], names=["other"]))
    writer.close()
    with pytest.raises(RuntimeError, match="closed"):
        writer.write_batch(pa.record_batch([pa.array([1])], names=["id"]))


def test_xlsx_writes_int64_beyond_2_53_as_text_and_counts_it(tmp_path):
    # given an int64 column (as a conformed parquet shard may carry) with a huge id
    schema = pa.schema([pa.field("id", pa.int64())])
    writer = open_writer(tmp_path, schema, make_doc("xlsx"))
    # when written
    writer.write_batch(pa.record_batch([pa.array([7, 2**60])], schema=schema))
    report = writer.close()
    # then the small id is a number, the huge one text with every digit
    (_, ), (small, ), (huge, ) = xlsx_cells(report.path)
    assert (small.value, small.data_type) == (7, "n")
    assert (huge.value, huge.data_type) == (str(2**60), "s")
    assert report.quality["converted_to_text"] == 1


@pytest.mark.parametrize("last", [{"a": 1, "b": "\x00"}, {"a": None, "b": "\x01\x02"}])
def test_xlsx_text_of_forbidden_characters_only_is_a_blank_cell_and_its_row_stays(tmp_path, last):
    # given text that holds only XML-forbidden control characters (removed when written),
    # in the last row, once beside a value and once as the row's only text
    schema = pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.string())])
    writer = open_writer(tmp_path, schema, make_doc("xlsx"))
    # when written (the sinks conftest writes it with both engines and compares them)
    writer.write_batch(pa.record_batch([pa.array([7, last["a"]]), pa.array(["x", last["b"]])],
                                       schema=schema))
    report = writer.close()
    # then the cell is blank, not an empty string, and the row is still in the sheet
    _header, first, second = xlsx_cells(report.path)
    assert [c.value for c in first] == [7, "x"]
    assert [c.value for c in second][1] is None and second[1].data_type != "s"
    assert report.rows == 2 and report.quality["sanitized"] == 1
