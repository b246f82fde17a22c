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
