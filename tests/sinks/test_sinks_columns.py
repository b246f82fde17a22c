"""Column-wise renderers (issue 12 item 3) against the cell-by-cell
definitions in ``sinks.writers.cells`` / ``sinks.values``: random doubles
(every bit pattern class), instants in zones with LMT offsets and beyond
year 9999, dates."""
from __future__ import annotations

import datetime as dt
import random
import struct

import pyarrow as pa
import pyarrow.compute as pc

from sinks.values import iso_texts
from sinks.writers.cells import float_cells
from sinks.writers.columns import float_texts, iso_array


def _doubles(n: int, seed: int) -> list:
    rng = random.Random(seed)
    out = [0.0, -0.0, 1.0, -1.0, 2.5, 1e16, 1e15, 2.0**53, 2.0**53 - 1, -(2.0**53), 1e-4, 1e-5,
           9.999999999999999e-5, 5e-324, 1.7976931348623157e308, 0.1 + 0.2, 123456789.123,
           1e21, 1e22, 12345678901234.567, float("nan"), float("inf"), float("-inf"), None]
    for _ in range(n):
        pick = rng.random()
        if pick < 0.4:
            out.append(struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0])
        elif pick < 0.7:
            out.append(round(rng.uniform(-1e6, 1e6), rng.randint(0, 6)))
        else:
            out.append(rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30))
    return out


def test_float_texts_match_shortest_and_repr():
    values = _doubles(200_000, 12)
    col = pa.array(values, pa.float64())
    expected, _ = float_cells(col, "INF", as_text=True)
    assert float_texts(col, "INF").to_pylist() == expected
    as_json = [None if v is None or v != v else
               ("INF" if v > 0 else "-INF") if v in (float("inf"), float("-inf")) else repr(v)
               for v in values]
    assert float_texts(col, "INF", json_style=True).to_pylist() == as_json


def test_float32_columns_render_their_double():
    col = pa.array([0.1, 1.5, None, 3.0, 1e-7], pa.float32())
    expected, _ = float_cells(col, "INF", as_text=True)
    assert float_texts(col, "INF").to_pylist() == expected


def test_iso_array_matches_iso_texts():
    rng = random.Random(3)
    base = [rng.randint(-62_135_596_800_000_000, 253_402_214_400_000_000) for _ in range(20_000)]
    base += [0, 1, -1, 86_399_999_999, None, 1_000_000]
    # whole seconds only (the common case, formatted without a fraction to cut)
    whole = [None if v is None else v // 1_000_000 * 1_000_000 for v in base]
    for tz in (None, "UTC", "America/Chicago", "Asia/Kolkata", "Europe/Amsterdam",
               "America/New_York"):
        for values in (base, whole):
            col = pa.array(values, pa.int64()).cast(pa.timestamp("us", tz))
            assert iso_array(col).to_pylist() == iso_texts(col), tz
    beyond = pa.array([253_402_300_800_000_000 + 5, None], pa.int64()).cast(
        pa.timestamp("us", "UTC"))
    assert iso_array(beyond).to_pylist() == iso_texts(beyond)
    dates = pa.array([dt.date(1, 1, 1), dt.date(999, 12, 31), dt.date(2013, 1, 1), None])
    assert iso_array(dates).to_pylist() == iso_texts(dates)
    far = pc.cast(pa.array([3_000_000, -800_000], pa.int32()), pa.date32())
    assert iso_array(far).to_pylist() == iso_texts(far)


def test_iso_array_of_repeated_instants_matches_iso_texts():
    # given long columns with few distinct instants (formatted once each, taken
    # by index), nulls, an instant beyond year 9999 and LMT offsets among them
    rng = random.Random(4)
    pool = [rng.randint(-62_135_596_800_000_000, 253_402_214_400_000_000) for _ in range(30)]
    pool += [0, None, 1_356_998_400_000_000, -2_524_521_600_000_000]
    beyond = 253_402_300_800_000_000 + 5
    for extra in ([], [beyond]):
        values = [rng.choice(pool + extra) for _ in range(500)]
        for tz in (None, "UTC", "America/New_York", "Asia/Kolkata", "Europe/Amsterdam"):
            col = pa.array(values, pa.int64()).cast(pa.timestamp("us", tz))
            # when rendered column-wise, then each cell is what iso_texts gives
            assert iso_array(col).to_pylist() == iso_texts(col), (tz, extra)


def _nasty_batch() -> pa.RecordBatch:
    texts = ["plain", "", None, 'q"uote', "a,b", "a;b", "tab\there", "lf\nx", "cr\rx", "crlf\r\nx",
             "=1+2", "+x", "-5", "@a", "\tlead", "\rlead", "\x01=hid", "ctl\x00\x07\x1f\x7f",
             "back\\slash", "\ufffe\uffff", "\u2028\u0085", "emoji \U0001F600", "é", "'"]
    n = len(texts)
    rng = random.Random(5)
    return pa.record_batch({
        "t": pa.array(texts, pa.string()),
        "i": pa.array([rng.choice([None, 0, -7, 2**62]) for _ in range(n)], pa.int64()),
        "f": pa.array([rng.choice([None, float("nan"), float("inf"), float("-inf"), -0.0, 1.0,
                                   2.5, 1e16, 5e-324]) for _ in range(n)], pa.float64()),
        "b": pa.array([rng.choice([None, True, False]) for _ in range(n)]),
        "ts": pa.array([rng.choice([None, 0, 1_234_567, -5_000_000_000_000_000])
                        for _ in range(n)], pa.int64()).cast(pa.timestamp("us", "Europe/Paris")),
        "d": pa.array([rng.choice([None, dt.date(1899, 1, 1), dt.date(2024, 2, 29)])
                       for _ in range(n)], pa.date32()),
        "n": pa.nulls(n),
        "s": pa.array([rng.choice([None, {"k": 1}, {"k": None}]) for _ in range(n)],
                      pa.struct([("k", pa.int64())])),
    })


def test_text_writers_match_the_cell_by_cell_writers_on_nasty_text(tmp_path):
    from reference_csv import ReferenceCsvWriter
    from reference_jsonl import ReferenceJsonlWriter
    from sink_helpers import make_doc

    from sinks.writers.csv_writer import CsvWriter
    from sinks.writers.jsonl_writer import JsonlWriter

    batch = _nasty_batch()
    single = batch.select(["t"])
    cases = [("csv", {"csvFlavour": f, "csvDelimiter": d, "escapeFormulas": e})
             for f in ("excel", "plain") for d in (",", ";", "\t", "|") for e in (True, False)]
    cases.append(("jsonl", {}))
    for k, (fmt, kw) in enumerate(cases):
        doc = make_doc(fmt, **kw)
        fast_cls, ref_cls = ((CsvWriter, ReferenceCsvWriter) if fmt == "csv"
                             else (JsonlWriter, ReferenceJsonlWriter))
        for j, b in enumerate((batch, single)):
            fast = fast_cls(tmp_path / f"a{k}_{j}.{fmt}", b.schema, doc)
            ref = ref_cls(tmp_path / f"b{k}_{j}.{fmt}", b.schema, doc)
            for w in (fast, ref):
                w.write_batch(b)
                w.write_batch(b.slice(3, 5))
            rf, rr = fast.close(), ref.close()
            assert rf.path.read_bytes() == rr.path.read_bytes(), (fmt, kw, j)
            assert rf.quality == rr.quality


def _clean_batch(n: int = 300) -> pa.RecordBatch:
    """Every kind the csv writer hands to Arrow's CSV writer as it is or as text, with nulls,
    and nothing to quote, clean or escape (but ``-5`` in ``i``: numbers are never escaped)."""
    import decimal

    rng = random.Random(7)
    words = ["plain", "", None, "é", "emoji \U0001F600", "back\\slash", "'", "x y", "N14228"]
    return pa.record_batch({
        "t": pa.array([rng.choice(words) for _ in range(n)], pa.string()),
        "i": pa.array([rng.choice([None, 0, -5, 2**62, -(2**63)]) for _ in range(n)], pa.int64()),
        "d": pa.array([rng.choice([None, decimal.Decimal("-1.250"), decimal.Decimal("0.000"),
                                   decimal.Decimal("123456789.5")]) for _ in range(n)],
                      pa.decimal128(12, 3)),
        "f": pa.array([rng.choice([None, float("nan"), -0.0, 2.5, 1e16, 5e-324])
                       for _ in range(n)], pa.float64()),
        "b": pa.array([rng.choice([None, True, False]) for _ in range(n)]),
        "ts": pa.array([rng.choice([None, 0, 1_234_567]) for _ in range(n)],
                       pa.int64()).cast(pa.timestamp("us", "Asia/Kolkata")),
        "n": pa.nulls(n, pa.string()),
    })


def test_batches_with_nothing_to_quote_go_through_arrows_writer_byte_for_byte(tmp_path,
                                                                              monkeypatch):
    """A batch with no cell to quote is written by Arrow's CSV writer, also when a text cell is
    cleaned or escaped first; the file is the cell-by-cell writer's in every flavour, delimiter
    and escape setting, and a batch with one cell to quote (``t``'s first) takes the joins, byte
    for byte too."""
    from reference_csv import ReferenceCsvWriter
    from sink_helpers import make_doc

    from sinks.writers import csv_writer

    calls = []
    write_csv = csv_writer.pcsv.write_csv
    monkeypatch.setattr(csv_writer.pcsv, "write_csv",
                        lambda *a, **kw: calls.append(1) or write_csv(*a, **kw))
    clean = _clean_batch()
    for k, (flavour, delim, escape) in enumerate(
            (f, d, e) for f in ("excel", "plain") for d in (",", ";", "\t", "|")
            for e in (True, False)):
        doc = make_doc("csv", csvFlavour=flavour, csvDelimiter=delim, escapeFormulas=escape)
        quoted, sanitized, formula = (
            clean.set_column(0, "t", pa.array([first] + clean["t"].to_pylist()[1:]))
            for first in (f"a{delim}b", "ctl\x01x", "=1+2"))
        fast = csv_writer.CsvWriter(tmp_path / f"a{k}.csv", clean.schema, doc)
        ref = ReferenceCsvWriter(tmp_path / f"b{k}.csv", clean.schema, doc)
        for w in (fast, ref):
            for batch in (clean, quoted, sanitized, formula, clean.slice(7, 40)):
                w.write_batch(batch)
        assert len(calls) == 4 * (k + 1), (flavour, delim, escape)
        rf, rr = fast.close(), ref.close()
        assert rf.path.read_bytes() == rr.path.read_bytes(), (flavour, delim, escape)
        assert rf.quality == rr.quality


def test_a_cell_arrow_would_quote_leaves_the_batch_to_the_joins(tmp_path):
    """``_write_as_is`` writes nothing and answers False when Arrow's writer meets a cell it
    would have to quote, so the caller's joins write the batch."""
    from sink_helpers import make_doc

    from sinks.writers.csv_writer import CsvWriter

    schema = pa.schema([("a", pa.string()), ("b", pa.string())])
    w = CsvWriter(tmp_path / "a.csv", schema, make_doc("csv", csvFlavour="plain"))
    assert w._write_as_is([pa.array(["x", "y"]), pa.array(["1", "2"])])
    assert not w._write_as_is([pa.array(["x", "cr\rx"]), pa.array(["1", "2"])])
    assert w.close().path.read_bytes() == b"a,b\nx,1\ny,2\n"


def test_a_delimiter_a_number_can_hold_or_arrow_cannot_take_is_quoted_as_the_oracle_does(
        tmp_path):
    """``csvDelimiter`` may be ``-``, ``.``, a digit or ``E`` (which numbers hold: such cells are
    quoted) or a character Arrow's writer refuses (non-ASCII: the joins write every batch)."""
    import decimal

    from reference_csv import ReferenceCsvWriter
    from sink_helpers import make_doc

    from sinks.writers.csv_writer import CsvWriter

    batch = pa.record_batch({
        "i": pa.array([-1, 10, None], pa.int64()),
        "d": pa.array([decimal.Decimal("1.5"), None, decimal.Decimal("-0.5")],
                      pa.decimal128(5, 1)),
        "e": pa.array([decimal.Decimal("3.791E+5"), None, decimal.Decimal("0E+2")],
                      pa.decimal128(4, -2)),  # Arrow writes 3.791E+5
        "t": pa.array(["x", "y", None]),
    })
    for delim in ("-", ".", "1", "E", "+", "é", "€"):
        for flavour in ("excel", "plain"):
            doc = make_doc("csv", csvFlavour=flavour, csvDelimiter=delim)
            for b in (batch, batch.select(["i"])):  # the one-column record too
                fast = CsvWriter(tmp_path / "a.csv", b.schema, doc)
                ref = ReferenceCsvWriter(tmp_path / "b.csv", b.schema, doc)
                for w in (fast, ref):
                    w.write_batch(b)
                assert fast.close().path.read_bytes() == ref.close().path.read_bytes(), (
                    delim, flavour, b.num_columns)


def test_csv_writes_decimals_at_their_scale_without_an_exponent(tmp_path):
    """F11: ``csv: every digit at the column's scale``; Arrow's cast writes ``1E-7``."""
    import decimal

    from reference_csv import ReferenceCsvWriter
    from sink_helpers import make_doc

    from sinks.writers.csv_writer import CsvWriter

    D = decimal.Decimal
    batch = pa.record_batch({"d": pa.array([D("0.0000001"), D("0.1000000"), D("-0.0000005"), None],
                                           pa.decimal128(10, 7)),
                             "w": pa.array([D("-1E-21"), D("0.100000000000000000000"), None, None],
                                           pa.decimal128(30, 21))})
    doc = make_doc("csv", csvFlavour="plain")
    written = []
    for cls, name in ((CsvWriter, "a.csv"), (ReferenceCsvWriter, "b.csv")):
        w = cls(tmp_path / name, batch.schema, doc)
        w.write_batch(batch)
        written.append(w.close().path.read_bytes())
    assert written[0] == written[1] == (
        b"d,w\n0.0000001,-0.000000000000000000001\n0.1000000,0.100000000000000000000\n"
        b"-0.0000005,\n,\n")


def test_a_negative_number_as_text_is_not_escaped_as_a_formula():
    """E6 and E8: an id beyond 2**53 written as text keeps its minus sign as its first character;
    text that only starts like a negative number is still escaped."""
    from sinks.writers.cells import Quality, text_cells
    from sinks.writers.columns import clean_text

    col = pa.array(["-1234567890123456789", "-12.5", "-1+1", "-", "-1.", "=1", None])
    want = ["-1234567890123456789", "-12.5", "'-1+1", "'-", "'-1.", "'=1", None]
    q1, q2 = Quality(), Quality()
    assert clean_text(col, q1, "id", escape=True).to_pylist() == want
    assert text_cells(col, q2, escape=True, mark=lambda s: "'" + s) == want
    assert q1.counts["formula_escaped"] == q2.counts["formula_escaped"] == 4
