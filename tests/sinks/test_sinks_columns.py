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
    for tz in (None, "UTC", "America/Chicago", "Asia/Kolkata", "Europe/Amsterdam",
               "America/New_York"):
        col = pa.array(base, pa.int64()).cast(pa.timestamp("us", tz))
        assert iso_array(col).to_pylist() == iso_texts(col), tz
    beyond = pa.array([253_402_300_800_000_000 + 5, None], pa.int64()).cast(
        pa.timestamp("us", "UTC"))
    assert iso_array(beyond).to_pylist() == iso_texts(beyond)
    dates = pa.array([dt.date(1, 1, 1), dt.date(999, 12, 31), dt.date(2013, 1, 1), None])
    assert iso_array(dates).to_pylist() == iso_texts(dates)
    far = pc.cast(pa.array([3_000_000, -800_000], pa.int32()), pa.date32())
    assert iso_array(far).to_pylist() == iso_texts(far)
