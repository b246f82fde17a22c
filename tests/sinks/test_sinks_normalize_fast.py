"""The column-wise fast paths of ``sinks.values`` (plain int/float columns,
UTC instant text) give exactly what the per-value path gives, and step
aside for every cell they cannot decide (issue 12: normalization without a
Python loop per cell on the common path)."""
from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

import sinks.values as V
from plait.spec import DocumentConfig

NASTY_NUMBERS = [0, -1, 2**53, -(2**53), 2**53 + 1, 2**63, -(2**63) - 1, 1.5, float("nan"),
                 float("inf"), True, False, "12", " ", "", "x", None]
NASTY_TIMES = ["2013-01-01T10:00:00Z", "2024-02-29T23:59:59Z", "2013-02-30T10:00:00Z",
               "2013-01-01T24:00:00Z", "2013-01-01T10:00:60Z", "0999-12-31T23:00:00Z",
               "9999-12-31T23:00:00Z", "2013-01-01T10:00:00+01:00", "2013-01-01 10:00:00",
               "2013-01-01T10:00:00.5Z", "0000-00-00", "", None]


def both(monkeypatch, rows: list[dict], columns: list[dict]) -> tuple:
    """rows_to_batch with the fast paths, then with them switched off."""
    doc = DocumentConfig.model_validate({"fileName": "f", "fileFormat": "csv",
                                         "timeZone": "America/New_York", "columns": columns})
    fast = V.rows_to_batch(rows, doc)
    with monkeypatch.context() as m:
        m.setattr(V, "_plain_numbers", lambda values, ctype: None)
        m.setattr(V, "_utc_texts", lambda values, zone: None)
        slow = V.rows_to_batch(rows, doc)
    return fast, slow


@pytest.mark.parametrize("ctype", ["int", "float", None])
def test_number_columns_match_the_per_value_path(monkeypatch, ctype):
    # given pages mixing plain ints/floats with every cell the fast path must leave alone
    rnd = random.Random(12)
    for _ in range(60):
        pool = NASTY_NUMBERS if rnd.random() < 0.5 else [1, 2, None, 3.25, -7]
        rows = [{"n": rnd.choice(pool)} for _ in range(rnd.randint(0, 6))]
        # when normalized with and without the fast path
        (fb, fq), (sb, sq) = both(monkeypatch, rows, [{"fieldName": "n", "type": ctype}]
                                  if ctype else [{"fieldName": "n"}])
        # then batch, schema (metadata included) and counts are the same
        assert fb.equals(sb) and fb.schema.equals(sb.schema, check_metadata=True), rows
        assert fq == sq, rows


def test_datetime_text_matches_the_per_value_path(monkeypatch):
    rnd = random.Random(7)
    for _ in range(60):
        pool = NASTY_TIMES if rnd.random() < 0.5 else NASTY_TIMES[:2] + [None]
        rows = [{"t": rnd.choice(pool)} for _ in range(rnd.randint(1, 6))]
        for columns in ([{"fieldName": "t", "type": "datetime"}], [{"fieldName": "t"}]):
            (fb, fq), (sb, sq) = both(monkeypatch, rows, columns)
            assert fb.equals(sb) and fb.schema.equals(sb.schema, check_metadata=True), rows
            assert fq == sq, rows


def test_fast_paths_take_the_common_page():
    # the flights shapes (ints with gaps, UTC text) are decided column-wise
    ints = V._plain_numbers([1, None, 2**53], "int")
    assert ints is not None and ints.type == pa.int64()
    stamps = V._utc_texts(["2013-01-01T10:00:00Z", None], "UTC")
    assert stamps is not None and stamps.to_pylist()[0].isoformat() == "2013-01-01T10:00:00+00:00"


EXACT_BODIES = [b'{"a": 1, "b": "x"}', b'[1.10, 2.5, 1e5, 1E+5, -0.0]', b'[NaN, Infinity]',
                b'["\\ud83d"]', b'[12345678901234567890, -9223372036854775809]',
                "\ufeff[1]".encode(), b'["N3E5", 2, "1.5"]', b'{"a": 1, "a": 2}',
                b'[9007199254740993, "\\u00e9\\ud83d\\ude00"]', "[\"\u00e9\"]".encode()]


@pytest.mark.parametrize("body", EXACT_BODIES)
def test_loads_exact_is_the_standard_exact_decode(body):
    # orjson is taken only where it gives the same values (F11: literals
    # that are not a double's shortest repr stay Decimals; ints keep every digit)
    want = json.loads(body, parse_float=V.json_number)
    got = V.loads_exact(body)
    assert repr(got) == repr(want)
