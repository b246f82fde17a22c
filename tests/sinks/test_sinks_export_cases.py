"""Cases E2..E15 of docs/fidelity.md: rows -> rows_to_batch -> writer ->
read back with the tool a user would open the file with (E1 has its own file)."""
from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
import pytest
from sink_helpers import csv_rows, make_doc, parquet_rows, sheet_xml, xlsx_cells, xlsx_sheets

from plait.errors import PermanentError
from sinks.values import rows_to_batch
from sinks.writers import open_writer


def test_e2_excel_column_limit_fails_on_first_page_and_csv_succeeds(export, tmp_path):
    # given one row with 16,385 columns
    row = {f"c{i}": i for i in range(16_385)}
    # when the first page is normalized for xlsx, then it fails naming the limit
    with pytest.raises(PermanentError) as err:
        rows_to_batch([row], make_doc("xlsx"))
    msg = str(err.value)
    assert "16,384 columns" in msg and "csv" in msg and "parquet" in msg
    # and a writer refuses such a schema too
    schema = pa.schema([pa.field(f"c{i}", pa.int64()) for i in range(16_385)])
    with pytest.raises(PermanentError, match="16,384 columns"):
        open_writer(tmp_path, schema, make_doc("xlsx"))
    # while csv of the same input succeeds with every column
    report, _ = export([row], make_doc("csv"))
    header, values = csv_rows(report.path)
    assert len(header) == 16_385 and header[-1] == "c16384" and values[-1] == "16384"


def test_e3_long_text_truncated_in_xlsx_only(export):
    rows = [{"note": "ab" * 20_000}]
    report, _ = export(rows, make_doc("xlsx"))
    [(header,), (cell,)] = xlsx_sheets(report.path)["Sheet1"]
    assert len(cell) == 32_767 and cell == ("ab" * 20_000)[:32_767]
    assert report.quality["truncated"] == 1
    csv_report, _ = export(rows, make_doc("csv"))
    assert csv_rows(csv_report.path)[1][0] == "ab" * 20_000
    pq_report, _ = export(rows, make_doc("parquet"))
    assert parquet_rows(pq_report.path)[0]["note"] == "ab" * 20_000


def test_e3_long_text_cut_counts_utf16_units_and_keeps_pairs_whole(export):
    # given text of 20,000 emoji (40,000 UTF-16 code units, as Excel counts)
    report, _ = export([{"note": "\U0001F600" * 20_000}], make_doc("xlsx"))
    [_, (cell,)] = xlsx_sheets(report.path)["Sheet1"]
    # then the cell keeps 16,383 whole emoji (32,766 units <= 32,767)
    assert cell == "\U0001F600" * 16_383 and report.quality["truncated"] == 1


def test_e4_control_characters_removed_and_counted(export):
    rows = [{"memo": "kr 400\u0016000"}, {"memo": "tab\u000bvt"}, {"memo": "nul\u0000x"}]
    report, _ = export(rows, make_doc("xlsx"))
    assert [r[0] for r in xlsx_sheets(report.path)["Sheet1"][1:]] == ["kr 400000", "tabvt", "nulx"]
    assert report.quality["sanitized"] == 3
    csv_report, _ = export(rows, make_doc("csv"))
    assert [r[0] for r in csv_rows(csv_report.path)[1:]] == ["kr 400000", "tabvt", "nulx"]
    assert csv_report.quality["sanitized"] == 3


def test_e5_cjk_csv_excel_flavour_has_bom_plain_has_none(export):
    rows = [{"city": "上海", "name": "王芳"}]
    excel, _ = export(rows, make_doc("csv", csvFlavour="excel"))
    data = excel.path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and data.endswith(b"\r\n")
    assert data.decode("utf-8-sig").split("\r\n")[0] == "city,name"
    assert csv_rows(data) == [["city", "name"], ["上海", "王芳"]]
    plain, _ = export(rows, make_doc("csv", csvFlavour="plain"))
    assert plain.path.read_bytes() == "city,name\n上海,王芳\n".encode("utf-8")


FORMULAS = ['=HYPERLINK("http://x.invalid","y")', "+1+1", "@SUM(A1)", "\t=1"]


def test_e6_formula_injection_is_inert_in_xlsx(export):
    rows = [{"v": v} for v in FORMULAS] + [{"n": -12.5}]
    report, _ = export(rows, make_doc("xlsx"))
    xml = sheet_xml(report.path)
    assert "<f>" not in xml and "<f " not in xml
    cells = xlsx_cells(report.path)
    texts = [row[0] for row in cells[1:5]]
    assert [c.value for c in texts] == FORMULAS
    assert all(c.data_type == "s" and c.quotePrefix for c in texts)
    number = cells[5][1]
    assert number.value == -12.5 and number.data_type == "n"
    assert report.quality["formula_escaped"] == 4


def test_e6_formula_injection_is_prefixed_in_csv(export):
    rows = [{"v": v} for v in FORMULAS] + [{"n": -12.5}]
    report, _ = export(rows, make_doc("csv"))
    records = csv_rows(report.path)
    assert [r[0] for r in records[1:5]] == ["'" + v for v in FORMULAS]
    assert records[5] == ["", "-12.5"]
    assert report.quality["formula_escaped"] == 4


def test_e6_escaping_can_be_turned_off(export):
    report, _ = export([{"v": "=1+1"}], make_doc("csv", escapeFormulas=False))
    assert csv_rows(report.path)[1] == ["=1+1"] and report.quality["formula_escaped"] == 0


def test_e7_equals_signs_title_is_plain_text(export):
    report, _ = export([{"title": "==== section ===="}], make_doc("xlsx"))
    assert "<f>" not in sheet_xml(report.path)
    cell = xlsx_cells(report.path)[1][0]
    assert cell.value == "==== section ====" and cell.data_type == "s"


def test_e8_long_numeric_ids_keep_every_digit(export):
    rows = [{"order_id": 1234567890123456789, "card": "6222020200112233445"}]
    report, counts = export(rows, make_doc("xlsx"))
    cells = xlsx_cells(report.path)[1]
    assert [(c.value, c.data_type) for c in cells] == [
        ("1234567890123456789", "s"), ("6222020200112233445", "s")]
    assert counts == {"converted_to_text": 1, "converted_to_text:order_id": 1}
    csv_report, _ = export(rows, make_doc("csv"))
    assert csv_rows(csv_report.path)[1] == ["1234567890123456789", "6222020200112233445"]


def test_e9_number_like_text_stays_text(export):
    report, _ = export([{"zip": "00123", "code": "1E5", "ver": "1.10"}], make_doc("xlsx"))
    cells = xlsx_cells(report.path)[1]
    assert [(c.value, c.data_type) for c in cells] == [("00123", "s"), ("1E5", "s"), ("1.10", "s")]


def test_e10_time_zones_converted_to_export_zone(export):
    rows = [{"ts": "2024-03-10T01:30:00-05:00"}, {"ts": "2024-03-10T09:00:00+03:00"}]
    doc = make_doc("xlsx", types={"ts": "datetime"}, timeZone="UTC")
    report, _ = export(rows, doc)
    header, first, second = (row[0] for row in xlsx_cells(report.path))
    assert header.value == "ts (UTC)"
    assert first.value == dt.datetime(2024, 3, 10, 6, 30) and first.is_date
    assert second.value == dt.datetime(2024, 3, 10, 6, 0) and second.is_date
    assert "yy" in first.number_format
    csv_report, _ = export(rows, make_doc("csv", types={"ts": "datetime"}, timeZone="UTC"))
    instants = [dt.datetime.fromisoformat(r[0]) for r in csv_rows(csv_report.path)[1:]]
    assert instants == [dt.datetime(2024, 3, 10, 6, 30, tzinfo=dt.timezone.utc),
                        dt.datetime(2024, 3, 10, 6, 0, tzinfo=dt.timezone.utc)]


def test_e10_other_export_zone_shows_local_wall_time(export):
    doc = make_doc("xlsx", types={"ts": "datetime"}, timeZone="Asia/Shanghai")
    report, _ = export([{"ts": "2024-03-10T01:30:00-05:00"}], doc)
    header, cell = (row[0] for row in xlsx_cells(report.path))
    assert header.value == "ts (Asia/Shanghai)" and cell.value == dt.datetime(2024, 3, 10, 14, 30)


E11_ROWS = [{"x": math.nan}, {"x": math.inf}, {"x": -math.inf}, {"x": None}]


def test_e11_nan_and_infinities_in_xlsx(export):
    report, _ = export(E11_ROWS, make_doc("xlsx", types={"x": "float"}, infText="Infinity"))
    assert [r[0] for r in xlsx_sheets(report.path)["Sheet1"]] == ["x", None, "Infinity", "-Infinity", None]


def test_e11_nan_and_infinities_in_csv_and_parquet(export):
    report, _ = export(E11_ROWS, make_doc("csv", types={"x": "float"}))
    assert [r for r in csv_rows(report.path)] == [["x"], [""], ["inf"], ["-inf"], [""]]
    pq_report, _ = export(E11_ROWS, make_doc("parquet", types={"x": "float"}))
    values = [r["x"] for r in parquet_rows(pq_report.path)]
    assert math.isnan(values[0]) and values[1:] == [math.inf, -math.inf, None]


def test_e12_null_and_empty_string_are_blank(export):
    rows = [{"a": None, "b": ""}]
    report, _ = export(rows, make_doc("xlsx"))
    assert xlsx_sheets(report.path)["Sheet1"][1] == (None, None)
    assert "None" not in sheet_xml(report.path)
    csv_report, _ = export(rows, make_doc("csv"))
    assert csv_rows(csv_report.path)[1] == ["", ""]


def test_e13_boolean_cell_versus_text_true(export):
    doc = make_doc("xlsx", types={"active": "bool", "flag": "string"})
    report, _ = export([{"active": True, "flag": "TRUE"}], doc)
    active, flag = xlsx_cells(report.path)[1]
    assert (active.value, active.data_type) == (True, "b")
    assert (flag.value, flag.data_type) == ("TRUE", "s")


def test_e14_nested_values_as_compact_sorted_json(export):
    rows = [{"attrs": {"k": 1, "a": [2]}, "tags": ["a", "b"]}]
    expected = ['{"a":[2],"k":1}', '["a","b"]']
    report, _ = export(rows, make_doc("xlsx"))
    assert list(xlsx_sheets(report.path)["Sheet1"][1]) == expected
    csv_report, _ = export(rows, make_doc("csv"))
    assert csv_rows(csv_report.path)[1] == expected


@pytest.mark.parametrize("flavour", ["excel", "plain"])
def test_e15_quotes_and_newlines_round_trip_in_one_record(export, flavour):
    rows = [{"t": "line1\nline2", "q": 'say "hi", ok'}]
    report, _ = export(rows, make_doc("csv", csvFlavour=flavour))
    assert csv_rows(report.path) == [["t", "q"], ["line1\nline2", 'say "hi", ok']]


@pytest.mark.parametrize("fmt", ["csv", "xlsx", "parquet"])
def test_field_names_from_the_data_are_written_as_they_are(export, fmt):
    # given rows whose fields are named "" and 300 characters (a declared fieldName takes
    # 1..256: that rule is for the request, not for what the data API sends)
    long = "k" * 300
    report, _ = export([{"a": 1, "": 2, long: 3}], make_doc(fmt))
    # then the file has those columns with their values
    if fmt == "csv":
        header, values = csv_rows(report.path)
    elif fmt == "xlsx":
        header, values = list(xlsx_sheets(report.path).values())[0]
    else:
        (header, values), = [(list(r), list(r.values())) for r in parquet_rows(report.path)]
    assert [h or "" for h in header] == ["a", "", long]
    assert [str(v) for v in values] == ["1", "2", "3"]
