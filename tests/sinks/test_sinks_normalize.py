"""sinks.values: one page of JSON rows -> typed record batch; schema
unification across shards; conforming a batch to the unified schema."""
from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
import pytest
from sink_helpers import make_doc

from plait.errors import PermanentError
from plait.spec import ColumnSpec, DocumentConfig
from sinks.values import ALL_NULL, MIXED, conform, rows_to_batch, unify_schemas


def test_inferred_types_keep_ints_floats_bools_and_text():
    rows = [{"year": 2013, "dep": 1.5, "ok": True, "name": "a"},
            {"year": 2014, "dep": None, "ok": False, "name": None}]
    batch, counts = rows_to_batch(rows, make_doc())
    assert batch.schema.types == [pa.int64(), pa.float64(), pa.bool_(), pa.string()]
    assert batch.to_pylist()[1] == {"year": 2014, "dep": None, "ok": False, "name": None}
    assert counts == {}


def test_columns_in_first_seen_order_and_all_null_column_is_marked_text():
    batch, _ = rows_to_batch([{"b": None}, {"a": None, "b": None, "c": 1}], make_doc())
    assert batch.schema.names == ["b", "a", "c"]
    assert batch.schema.field("a").type == pa.string()
    assert batch.schema.field("a").metadata == {ALL_NULL: b"1"}


def test_doc_columns_fix_order_missing_fields_are_null_and_extra_ignored():
    doc = make_doc(types={"z": None, "a": "int"})
    batch, _ = rows_to_batch([{"a": 1, "extra": "x"}], doc)
    assert batch.schema.names == ["z", "a"] and batch.to_pylist() == [{"z": None, "a": 1}]


def test_floats_keep_nan_and_infinity():
    batch, _ = rows_to_batch([{"x": math.nan}, {"x": math.inf}, {"x": 2}], make_doc())
    values = batch.column(0).to_pylist()
    assert batch.schema.types == [pa.float64()]
    assert math.isnan(values[0]) and values[1:] == [math.inf, 2.0]


def test_ints_beyond_2_53_become_text_with_every_digit_and_are_counted():
    rows = [{"id": 2**53}, {"id": 2**53 + 1}, {"id": -(2**60)}]
    batch, counts = rows_to_batch(rows, make_doc())
    assert batch.column(0).to_pylist() == [str(2**53), str(2**53 + 1), str(-(2**60))]
    assert counts == {"converted_to_text": 3, "converted_to_text:id": 3}


def test_decimals_keep_every_digit_in_an_arrow_decimal_column():
    # F11 replaced the old rule (decimals beyond 15 digits -> text): the batch
    # keeps every digit; only the xlsx writer turns them into counted text
    rows = [{"d": Decimal("12345678901234567.89")}, {"d": Decimal("1.5")}]
    batch, counts = rows_to_batch(rows, make_doc())
    assert batch.schema.types == [pa.decimal128(19, 2)]
    assert batch.column(0).to_pylist() == [Decimal("12345678901234567.89"), Decimal("1.5")]
    assert counts == {}
    short, _ = rows_to_batch([{"d": "0.1"}], make_doc(types={"d": "decimal"}))
    assert short.column(0).to_pylist() == [Decimal("0.1")]


def test_strings_are_never_guessed_into_numbers_or_dates_without_an_offset():
    rows = [{"zip": "00123", "code": "1E5", "ver": "1.10", "when": "2024-03-10 01:30:00"}]
    batch, _ = rows_to_batch(rows, make_doc())
    assert batch.schema.types == [pa.string()] * 4
    assert batch.to_pylist() == rows


def test_mixed_values_keep_their_own_types_as_json_cells():
    batch, counts = rows_to_batch([{"v": 1}, {"v": "a"}, {"v": 2.5}, {"v": True}], make_doc())
    assert batch.column(0).to_pylist() == ["1", '"a"', "2.5", "true"]
    assert batch.schema.field("v").metadata == {MIXED: b"1"}
    assert counts == {}


def test_nested_values_json_and_bytes_base64():
    rows = [{"attrs": {"k": 1, "a": [2, "é"]}, "raw": b"\x00\x01"}]
    batch, _ = rows_to_batch(rows, make_doc())
    assert batch.to_pylist() == [{"attrs": '{"a":[2,"é"],"k":1}', "raw": "AAE="}]


def test_aware_datetimes_converted_to_export_zone_naive_read_as_local():
    doc = make_doc(types={"ts": "datetime"}, timeZone="Asia/Shanghai")
    batch, _ = rows_to_batch([{"ts": "2024-03-10T01:30:00Z"}, {"ts": "2024-03-10 08:00:00"},
                              {"ts": None}], doc)
    assert batch.schema.field("ts").type == pa.timestamp("us", tz="Asia/Shanghai")
    local = [v and v.replace(tzinfo=None).isoformat() for v in batch.column(0).to_pylist()]
    assert local == ["2024-03-10T09:30:00", "2024-03-10T08:00:00", None]


def test_declared_types_convert_text_values():
    doc = make_doc(types={"n": "int", "f": "float", "b": "bool", "d": "date"})
    batch, _ = rows_to_batch([{"n": "42", "f": "2.5", "b": "yes", "d": "2024-03-10"}], doc)
    assert batch.schema.types == [pa.int64(), pa.float64(), pa.bool_(), pa.date32()]
    assert batch.to_pylist()[0]["n"] == 42 and batch.to_pylist()[0]["b"] is True


def test_dictionary_and_mask_produce_labels_and_masked_text():
    doc = DocumentConfig(columns=[
        ColumnSpec(fieldName="ch", dictionary={"1": "Online", "2": "Store"}),
        ColumnSpec(fieldName="phone", mask={"first": 3, "last": 4})])
    batch, _ = rows_to_batch([{"ch": 1, "phone": "13812345678"}, {"ch": 9, "phone": None}], doc)
    assert batch.to_pylist() == [{"ch": "Online", "phone": "138****5678"},
                                 {"ch": "9", "phone": None}]


def test_value_that_breaks_declared_type_is_kept_and_counted_or_fails_naming_where():
    rows = [{"qty": "1"}, {"qty": "1.5x"}]
    batch, counts = rows_to_batch(rows, make_doc(types={"qty": "int"}))
    assert batch.column(0).to_pylist() == ["1", '"1.5x"'] and counts["type_mismatch:qty"] == 1
    with pytest.raises(PermanentError) as err:
        rows_to_batch(rows, make_doc(types={"qty": "int"}, onInvalidValue="fail"), page=4)
    msg = str(err.value)
    assert "'qty'" in msg and "page 4" in msg and "row 1" in msg and "int" in msg
    assert "'1.5x'" in msg and "type_mismatch" in msg


def test_bad_time_zone_bad_mask_and_non_object_rows_are_permanent_errors():
    # the spec refuses an unknown zone at the API (422); the normalizer still
    # guards a document built around validation
    with pytest.raises(ValueError, match="timeZone"):
        make_doc(timeZone="Mars/Olympus")
    bad_zone = make_doc().model_copy(update={"timeZone": "Mars/Olympus"})
    with pytest.raises(PermanentError, match="timeZone"):
        rows_to_batch([{"a": 1}], bad_zone)
    doc = DocumentConfig(columns=[ColumnSpec(fieldName="p", mask={"middle": 2})])
    with pytest.raises(PermanentError, match="mask"):
        rows_to_batch([{"p": "x"}], doc)
    with pytest.raises(PermanentError, match="row 1"):
        rows_to_batch([{"a": 1}, [1, 2]], make_doc())


def test_unify_schemas_null_yields_int_promotes_to_float_conflicts_become_text():
    pages = [[{"a": None, "b": 1, "c": 1, "d": True}],
             [{"a": 5, "b": 2.5, "c": "x", "d": True, "e": 1}]]
    schemas = [rows_to_batch(p, make_doc())[0].schema for p in pages]
    unified = unify_schemas(schemas)
    assert unified.names == ["a", "b", "c", "d", "e"]
    assert unified.types == [pa.int64(), pa.float64(), pa.string(), pa.bool_(), pa.int64()]
    assert unify_schemas([schemas[0]]).field("a").type == pa.string()


def test_conform_casts_renders_orders_and_adds_missing_columns():
    first, _ = rows_to_batch([{"b": 1, "c": 7, "d": None}], make_doc())
    second, _ = rows_to_batch([{"b": 2.5, "c": "x", "d": 3, "e": True}], make_doc())
    unified = unify_schemas([first.schema, second.schema])
    out1, out2 = conform(first, unified), conform(second, unified)
    assert out1.schema == unified and out2.schema == unified
    assert out1.to_pylist() == [{"b": 1.0, "c": "7", "d": None, "e": None}]
    assert out2.to_pylist() == [{"b": 2.5, "c": '"x"', "d": 3, "e": True}]  # c is mixed


def test_conform_turns_an_all_null_page_into_nulls_of_the_unified_type():
    doc = make_doc(types={"ts": None})
    empty, _ = rows_to_batch([{"ts": None}], doc)
    timed, _ = rows_to_batch([{"ts": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)}], doc)
    unified = unify_schemas([empty.schema, timed.schema])
    assert unified.field("ts").type == pa.timestamp("us", tz="UTC")
    assert conform(empty, unified).column(0).to_pylist() == [None]


def test_empty_page_gives_empty_batch():
    batch, counts = rows_to_batch([], make_doc())
    assert batch.num_rows == 0 and batch.num_columns == 0 and counts == {}
