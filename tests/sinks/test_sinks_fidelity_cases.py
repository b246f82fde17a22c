"""Cases F1..F12 of issue 13 (docs/fidelity-rules.md): rows as the data API
serves them (JSON text parsed the way ``streams.datasource`` parses it) ->
rows_to_batch per page -> unify_schemas/conform (as the finalizer does) ->
writer -> read back with the tool a user would open the file with."""
from __future__ import annotations

import datetime as dt
import json
import math
import re
from decimal import Decimal
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
from sink_helpers import csv_rows, make_doc, parquet_rows, sheet_xml, xlsx_cells

from plait.errors import PermanentError
from plait.spec import ColumnSpec, DocumentConfig
from sinks.values import conform, dumps_rows, json_number, rows_to_batch, unify_schemas
from sinks.writers import open_writer
from streams.datasource import parse_answer

UTC = dt.timezone.utc


def served(text: str) -> list[dict]:
    """Rows of a data-API answer whose ``rows`` is the JSON text ``text``."""
    body = ('{"code": 200, "data": {"status": "finish", "rows": %s}}' % text).encode()
    return parse_answer(0, 200, httpx.Headers(), body).rows


@pytest.fixture
def run(tmp_path: Path):
    """``run(pages, doc)`` -> (report, counts): every page normalized, shards
    unified and conformed as ``streams.finalize.build_file`` does, written."""
    counter = iter(range(1000))

    def go(pages, doc: DocumentConfig):
        if pages and isinstance(pages[0], dict):
            pages = [pages]
        batches, counts = [], {}
        for seq, rows in enumerate(pages):
            batch, c = rows_to_batch(rows, doc, page=seq)
            batches.append(batch)
            for k, n in c.items():
                counts[k] = counts.get(k, 0) + n
        schema = unify_schemas([b.schema for b in batches])
        writer = open_writer(tmp_path / f"out{next(counter)}", schema, doc)
        for batch in batches:
            writer.write_batch(conform(batch, schema))
        report = writer.close()
        return report, counts | {k: counts.get(k, 0) + v for k, v in report.quality.items()}

    return go


def jsonl_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text("utf-8").splitlines()]


def column(report, fmt: str, name: str | None = None) -> list:
    """The first (or named) column's values read back from the file."""
    if fmt == "xlsx":
        rows = xlsx_cells(report.path)
        idx = 0 if name is None else [c.value.split(" (")[0] for c in rows[0]].index(name)
        return [r[idx] for r in rows[1:]]
    if fmt == "csv":
        rows = csv_rows(report.path)
        idx = 0 if name is None else [h.split(" (")[0] for h in rows[0]].index(name)
        return [r[idx] for r in rows[1:]]
    rows = parquet_rows(report.path) if fmt == "parquet" else jsonl_rows(report.path)
    key = name or next(iter(rows[0]))
    return [r[key] for r in rows]


# -- F1 ---------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["xlsx", "csv", "parquet", "jsonl"])
def test_f1_lone_surrogate_becomes_replacement_char_and_is_counted(run, fmt):
    rows = served(r'[{"memo": "cut \ud83d"}, {"memo": "ok \ud83d\ude00"}]')
    assert rows[0]["memo"] == "cut \ud83d"
    report, counts = run(rows, make_doc(fmt))
    cells = column(report, fmt)
    values = [c.value for c in cells] if fmt == "xlsx" else cells
    assert values == ["cut \ufffd", "ok \U0001F600"]
    assert counts["replaced_invalid_unicode"] == 1
    assert counts["replaced_invalid_unicode:memo"] == 1


def test_f1_rows_with_a_lone_surrogate_travel_exactly_and_strict_mode_names_the_cell():
    rows = served(r'[{"memo": "cut \ud83d", "n": 1}]')
    body, plain = dumps_rows(rows)
    assert not plain and json.loads(body, parse_float=json_number) == rows
    with pytest.raises(PermanentError) as err:
        rows_to_batch(rows, make_doc(onInvalidValue="fail"), page=7)
    msg = str(err.value)
    assert "'memo'" in msg and "page 7" in msg and "row 0" in msg
    assert "replaced_invalid_unicode" in msg and "cut" in msg


# -- F2 ---------------------------------------------------------------------

EXTREMES = "[" + ",".join('{"x": %s}' % v for v in (
    "1.7976931348623157e308", "5e-324", "-0.0", "0.30000000000000004",
    "1.2345678901234567e300", "2.2250738585072014e-308")) + "]"


def test_f2_extreme_doubles_read_back_exactly_from_xlsx_or_are_counted_text(run):
    rows = served(EXTREMES)
    report, counts = run(rows, make_doc("xlsx"))
    cells = column(report, "xlsx")
    got = [(c.value, c.data_type) for c in cells]
    assert got[0] == ("1.7976931348623157e+308", "s")  # beyond Excel's 9.99999999999999E+307
    assert got[1] == ("5e-324", "s")  # subnormal: Excel would show 0
    assert got[2][1] == "n" and got[2][0] == 0  # -0.0 is written as 0 (Excel has no -0)
    assert got[3] == (0.30000000000000004, "n")
    assert got[4] == (1.2345678901234567e300, "n")
    assert got[5] == (2.2250738585072014e-308, "n")
    assert counts["converted_to_text"] == 2 and counts["converted_to_text:x"] == 2


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_f2_extreme_doubles_round_trip_in_other_formats(run, fmt):
    rows = served(EXTREMES)
    report, _ = run(rows, make_doc(fmt))
    values = [float(v) for v in column(report, fmt)]
    assert values == [float(r["x"]) for r in rows]
    assert [math.copysign(1, v) for v in values][2] == (-1 if fmt != "csv" else 1)


# -- F3 ---------------------------------------------------------------------

def test_f3_datetimes_round_to_excel_milliseconds_without_crossing_midnight(run):
    rows = served('[{"t": "2018-09-26T23:59:59.999999"}, {"t": "2018-09-26T23:59:59.9996"},'
                  ' {"t": "2018-09-26T10:00:00.0004"}, {"t": "2018-09-26T10:00:00"}]')
    report, _ = run(rows, make_doc("xlsx", types={"t": "datetime"}))
    cells = column(report, "xlsx")
    assert [c.value for c in cells] == [dt.datetime(2018, 9, 26, 23, 59, 59, 999000)] * 2 + [
        dt.datetime(2018, 9, 26, 10), dt.datetime(2018, 9, 26, 10)]
    # a sub-second value shows its milliseconds, so Excel does not round the
    # display up to the next day
    assert [c.number_format for c in cells] == ["yyyy-mm-dd hh:mm:ss.000"] * 3 + [
        "yyyy-mm-dd hh:mm:ss"]
    serials = [float(v) for v in re.findall(r"<v>([^<]+)</v>", sheet_xml(report.path))]
    assert all(43369 < s < 43370 for s in serials)  # 43370 is 2018-09-27


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_f3_other_formats_keep_microseconds(run, fmt):
    rows = served('[{"t": "2018-09-26T23:59:59.999999"}]')
    report, _ = run(rows, make_doc(fmt, types={"t": "datetime"}))
    [v] = column(report, fmt)
    if fmt == "parquet":
        assert v == dt.datetime(2018, 9, 26, 23, 59, 59, 999999, tzinfo=UTC)
    else:
        assert v == "2018-09-26T23:59:59.999999+00:00"


# -- F4 ---------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["xlsx", "csv", "jsonl", "parquet"])
@pytest.mark.parametrize("typed", [True, False])
def test_f4_instant_beyond_year_9999_keeps_the_instant_and_is_counted(run, fmt, typed):
    rows = served('[{"t": "9999-12-31T23:00:00-05:00"}, {"t": "2020-01-01T00:00:00Z"}]')
    doc = make_doc(fmt, types={"t": "datetime"} if typed else None, timeZone="UTC")
    report, counts = run(rows, doc)
    assert report.rows == 2
    assert counts["out_of_range"] == 1 and counts["out_of_range:t"] == 1  # counted once
    if fmt == "parquet":
        import pyarrow.parquet as pq
        col = pq.read_table(report.path).column("t").cast(pa.int64()).to_pylist()
        assert col == [253402315200000000, 1577836800000000]  # 10000-01-01T04:00Z, 2020
        return
    values = column(report, fmt)
    if fmt == "xlsx":
        assert (values[0].value, values[0].data_type) == ("+10000-01-01T04:00:00+00:00", "s")
        assert values[1].value == dt.datetime(2020, 1, 1)
    else:
        assert values == ["+10000-01-01T04:00:00+00:00", "2020-01-01T00:00:00+00:00"]


# -- F5 ---------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["xlsx", "csv", "parquet", "jsonl"])
def test_f5_mysql_zero_dates_are_blank_and_counted(run, fmt):
    rows = served('[{"d": "0000-00-00", "ts": "0000-00-00 00:00:00"},'
                  ' {"d": "2024-02-29", "ts": "2024-02-29 08:00:00"}]')
    report, counts = run(rows, make_doc(fmt, types={"d": "date", "ts": "datetime"}))
    assert counts["invalid_date"] == 2
    assert counts["invalid_date:d"] == 1 and counts["invalid_date:ts"] == 1
    d, ts = column(report, fmt, "d"), column(report, fmt, "ts")
    if fmt == "xlsx":
        d, ts = [c.value for c in d], [c.value for c in ts]
        assert d == [None, dt.datetime(2024, 2, 29)] and ts == [None, dt.datetime(2024, 2, 29, 8)]
    elif fmt == "parquet":
        assert d == [None, dt.date(2024, 2, 29)]
        assert ts == [None, dt.datetime(2024, 2, 29, 8, tzinfo=UTC)]
    else:
        blank = "" if fmt == "csv" else None
        assert d == [blank, "2024-02-29"] and ts == [blank, "2024-02-29T08:00:00+00:00"]


def test_f5_strict_mode_names_column_page_row_value_and_declared_type():
    rows = served('[{"d": "2024-01-01", "ts": "2024-01-01"}, {"d": "0000-00-00", "ts": null}]')
    doc = make_doc("xlsx", types={"d": "date", "ts": "datetime"}, onInvalidValue="fail")
    with pytest.raises(PermanentError) as err:
        rows_to_batch(rows, doc, page=3)
    msg = str(err.value)
    assert "'d'" in msg and "page 3" in msg and "row 1" in msg and "'0000-00-00'" in msg
    assert "declared type date" in msg and "datetime" not in msg and "invalid_date" in msg


# -- F6 ---------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["xlsx", "csv", "parquet"])
def test_f6_nonexistent_and_ambiguous_wall_times_follow_the_declared_rule(run, fmt):
    rows = served('[{"t": "2015-03-08 02:30:00"}, {"t": "2015-11-01 01:00:10"},'
                  ' {"t": "2015-07-01 12:00:00"}]')
    doc = make_doc(fmt, types={"t": "datetime"}, timeZone="America/Chicago")
    report, counts = run(rows, doc)
    assert counts["nonexistent_local_time:t"] == 1 and counts["ambiguous_local_time:t"] == 1
    values = column(report, fmt)
    if fmt == "xlsx":  # wall times: shifted forward by the gap; first occurrence
        assert [c.value for c in values] == [dt.datetime(2015, 3, 8, 3, 30),
                                             dt.datetime(2015, 11, 1, 1, 0, 10),
                                             dt.datetime(2015, 7, 1, 12)]
    elif fmt == "csv":
        assert values == ["2015-03-08T03:30:00-05:00", "2015-11-01T01:00:10-05:00",
                          "2015-07-01T12:00:00-05:00"]
    else:
        assert [v.astimezone(UTC) for v in values] == [
            dt.datetime(2015, 3, 8, 8, 30, tzinfo=UTC), dt.datetime(2015, 11, 1, 6, 0, 10, tzinfo=UTC),
            dt.datetime(2015, 7, 1, 17, tzinfo=UTC)]


def test_f6_strict_mode_fails_on_a_nonexistent_wall_time():
    doc = make_doc(types={"t": "datetime"}, timeZone="America/Chicago", onInvalidValue="fail")
    with pytest.raises(PermanentError, match="nonexistent_local_time"):
        rows_to_batch([{"t": "2015-03-08 02:30:00"}], doc, page=0)


# -- F7 ---------------------------------------------------------------------

PAGES_F7 = ['[{"code": 1}]', '[{"code": "N/A"}]', '[{"code": 2}]']


@pytest.mark.parametrize("fmt", ["xlsx", "csv", "parquet", "jsonl"])
def test_f7_numbers_stay_numbers_and_text_stays_text_across_pages(run, fmt):
    report, counts = run([served(p) for p in PAGES_F7], make_doc(fmt))
    values = column(report, fmt)
    if fmt == "xlsx":
        assert [(c.value, c.data_type) for c in values] == [(1, "n"), ("N/A", "s"), (2, "n")]
    elif fmt == "jsonl":
        assert values == [1, "N/A", 2]
    else:
        assert values == ["1", "N/A", "2"]
    assert counts["mixed_types:code"] == 3


def test_f7_one_page_of_mixed_values_keeps_per_cell_types_in_xlsx(run):
    rows = served('[{"v": 1}, {"v": "a"}, {"v": 2.5}, {"v": true}, {"v": "=1+1"}]')
    report, _ = run(rows, make_doc("xlsx"))
    cells = column(report, "xlsx")
    assert [(c.value, c.data_type) for c in cells] == [
        (1, "n"), ("a", "s"), (2.5, "n"), (True, "b"), ("=1+1", "s")]
    assert cells[4].quotePrefix  # formula escaping still applies to text cells


# -- F8 / F9 ----------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["xlsx", "csv", "parquet", "jsonl"])
def test_f8_integer_column_with_nulls_stays_integer(run, fmt):
    pages = [served('[{"dep_time": 517}, {"dep_time": null}]'), served('[{"dep_time": null}]'),
             served('[{"dep_time": 533}]')]
    report, _ = run(pages, make_doc(fmt))
    values = column(report, fmt)
    if fmt == "xlsx":
        values = [c.value for c in values]
    expected = {"csv": ["517", "", "", "533"]}.get(fmt, [517, None, None, 533])
    assert values == expected and all(type(v) is not float for v in values)


def test_f8_demo_data_api_serves_whole_numbers_as_integers():
    from producers.demo_api import flights
    from ops.demo import FLIGHT_COLUMNS

    row = flights().slice(0, 1).to_pylist()[0]
    assert row["dep_time"] == 517 and type(row["dep_time"]) is int
    assert dict(FLIGHT_COLUMNS)["dep_time"] == "int"


def test_f8_whole_doubles_as_the_old_demo_served_them_print_as_integers_in_csv(run):
    report, _ = run(served('[{"dep_time": 517.0}, {"dep_time": null}]'), make_doc("csv"))
    assert column(report, "csv") == ["517", ""]


def test_f9_csv_prints_the_shortest_form_of_each_number(run):
    rows = served('[{"score": 1}, {"score": 2.5}, {"score": 1e16}, {"score": 0.1}]')
    report, _ = run(rows, make_doc("csv"))
    assert column(report, "csv") == ["1", "2.5", "1e+16", "0.1"]


# -- F10 --------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["xlsx", "csv", "parquet"])
def test_f10_iso_strings_with_an_offset_are_datetimes_typed_or_not(run, fmt):
    text = '[{"time_hour": "2013-01-01T10:00:00Z"}, {"time_hour": "2013-01-01T05:00:00-05:00"}]'
    untyped, _ = run(served(text), make_doc(fmt))
    typed, _ = run(served(text), make_doc(fmt, types={"time_hour": "datetime"}))
    a, b = column(untyped, fmt), column(typed, fmt)
    if fmt == "xlsx":
        a, b = [c.value for c in a], [c.value for c in b]
        assert a == [dt.datetime(2013, 1, 1, 10)] * 2
    assert a == b


def test_f10_strings_without_offset_or_mixed_with_text_stay_text():
    batch, _ = rows_to_batch([{"t": "2013-01-01T10:00:00"}], make_doc())
    assert batch.schema.field("t").type == pa.string()
    batch, _ = rows_to_batch([{"t": "2013-01-01T10:00:00Z"}, {"t": "soon"}], make_doc())
    assert batch.schema.field("t").type == pa.string()


# -- F11 --------------------------------------------------------------------

F11 = '[{"amount": 12345678901234567890.12}, {"amount": 0.10}, {"amount": 7}]'


def test_f11_json_numbers_are_parsed_without_a_double():
    rows = served(F11)
    assert rows == [{"amount": Decimal("12345678901234567890.12")},
                    {"amount": Decimal("0.10")}, {"amount": 7}]
    assert type(served('[{"x": 2.5}]')[0]["x"]) is float  # the common case stays fast
    body, plain = dumps_rows(rows)
    assert not plain and json.loads(body, parse_float=json_number) == rows
    assert b"12345678901234567890.12" in body and b"0.10" in body


@pytest.mark.parametrize("typed", [True, False])
def test_f11_decimal_keeps_every_digit_in_parquet_and_csv(run, typed):
    doc = DocumentConfig(fileFormat="parquet", columns=[
        ColumnSpec(fieldName="amount", type="decimal" if typed else None, format="0.00")])
    report, _ = run(served(F11), doc)
    import pyarrow.parquet as pq
    t = pq.read_table(report.path)
    assert pa.types.is_decimal(t.schema.field("amount").type)
    assert t.column("amount").to_pylist() == [Decimal("12345678901234567890.12"),
                                              Decimal("0.10"), Decimal("7")]
    report, _ = run(served(F11), doc.model_copy(update={"fileFormat": "csv"}))
    assert column(report, "csv") == ["12345678901234567890.12", "0.10", "7.00"]


def test_f11_decimal_in_xlsx_is_a_number_when_a_double_holds_it_else_counted_text(run):
    doc = DocumentConfig(fileFormat="xlsx", columns=[
        ColumnSpec(fieldName="amount", type="decimal", format="0.00")])
    report, counts = run(served(F11), doc)
    cells = column(report, "xlsx")
    assert [(c.value, c.data_type) for c in cells] == [
        ("12345678901234567890.12", "s"), (0.1, "n"), (7, "n")]
    assert cells[1].number_format == "0.00"
    assert counts["converted_to_text:amount"] == 1


def test_f11_decimal_in_jsonl_is_a_number_when_exact_else_a_string(run):
    doc = make_doc("jsonl", types={"amount": "decimal"})
    report, counts = run(served(F11), doc)
    assert column(report, "jsonl") == ["12345678901234567890.12", 0.1, 7]
    assert counts["converted_to_text:amount"] == 1


# -- F12 --------------------------------------------------------------------

def test_f12_dates_before_1900_are_iso_text_and_early_1900_gets_excels_serials(run):
    rows = served('[{"d": "1899-12-31", "t": "1900-01-01T12:00:00"},'
                  ' {"d": "1800-01-01", "t": "1900-02-28T00:00:00"},'
                  ' {"d": "1900-03-01", "t": "1900-03-01T00:00:00"}]')
    report, counts = run(rows, make_doc("xlsx", types={"d": "date", "t": "datetime"}))
    d, t = column(report, "xlsx", "d"), column(report, "xlsx", "t")
    assert [(c.value, c.data_type) for c in d[:2]] == [("1899-12-31", "s"), ("1800-01-01", "s")]
    assert d[2].value == dt.datetime(1900, 3, 1)
    assert counts["out_of_range:d"] == 2
    xml = sheet_xml(report.path)
    serials = {m[0]: float(m[1]) for m in re.findall(r'<c r="([A-Z]+\d+)"[^>]*><v>([^<]+)</v>', xml)}
    # Excel shows serial 1.5 as 1900-01-01 12:00, 59 as 1900-02-28, 61 as 1900-03-01
    assert serials["B2"] == 1.5 and serials["B3"] == 59 and serials["B4"] == 61
    assert [c.value for c in t] == [dt.datetime(1900, 1, 1, 12), dt.datetime(1900, 2, 28),
                                    dt.datetime(1900, 3, 1)]


# -- no internal error ----------------------------------------------------------

def test_any_exception_on_the_row_path_names_the_column_and_page():
    # a nested object with mixed key types cannot be sorted into JSON text
    with pytest.raises(PermanentError) as err:
        rows_to_batch([{"attrs": {1: "a", "b": 2}}], make_doc(), page=2)
    msg = str(err.value)
    assert "'attrs'" in msg and "page 2" in msg and "internal" not in msg


# -- found by the property test ----------------------------------------------

@pytest.mark.parametrize("flavour", ["plain", "excel"])
def test_a_lone_carriage_return_stays_inside_its_csv_field(run, flavour):
    rows = [{"a": "x\ry", "b": 1}, {"a": "\r", "b": 2}, {"a": "plain", "b": 3}]
    report, _ = run(rows, make_doc("csv", csvFlavour=flavour))
    assert csv_rows(report.path) == [["a", "b"], ["x\ry", "1"], ["'\r", "2"], ["plain", "3"]]


@pytest.mark.parametrize("fmt", ["xlsx", "csv"])
def test_writer_counts_carry_their_column_too(run, fmt):
    rows = [{"memo": "a\u0016b", "f": "=1+1", "n": 1}]
    _, counts = run(rows, make_doc(fmt))
    assert counts["sanitized:memo"] == 1 and counts["formula_escaped:f"] == 1
