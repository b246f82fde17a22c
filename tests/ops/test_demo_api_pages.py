"""The demo data API cuts ``flights`` pages from rows rendered once
(``producers.demo_api.flights_json``); every page must be byte for byte what
encoding its rows with orjson gives, so the bench and the demo see the
answers a business system would send."""
from __future__ import annotations

import orjson
import pyarrow as pa
import pytest

from producers.demo_api import answer, flights, rows_json


def by_rows(last_id: int, size: int, limit: int | None = None) -> bytes:
    """The page encoded row by row (the reference)."""
    table = flights()
    total = min(table.num_rows, limit or table.num_rows)
    rows = table.slice(last_id, max(0, min(size, total - last_id))).to_pylist()
    new_last = last_id + len(rows)
    return orjson.dumps({"code": 200, "message": "ok", "data": {
        "status": "finish" if new_last >= total else "continue",
        "runtimeContext": {"pageSize": size, "lastId": new_last},
        "rows": rows, "total": total}})


@pytest.mark.parametrize("last_id,size,limit", [
    (0, 5000, None), (5000, 5000, None), (336000, 5000, None), (336775, 10, None),
    (336776, 5000, None), (400000, 10, None), (0, 10, 10), (10, 10, 10), (20, 10, 10),
    (100, 1, None)])
def test_flights_page_is_what_orjson_gives(last_id, size, limit):
    conditions = {"dataset": "flights", "limit": limit}
    assert answer(conditions, last_id, size) == by_rows(last_id, size, limit)


def test_rows_with_nulls_and_escapes():
    """Nulls render as null; a text column holding a character JSON escapes
    is left to orjson (None), as is a column neither int64 nor text."""
    table = pa.table({"n": pa.array([1, None, -3], pa.int64()), "s": ["a", None, "b c"]})
    rendered = rows_json(table)
    want = b"".join(orjson.dumps(r) + b"," for r in table.to_pylist())
    assert rendered.buffers()[2].to_pybytes()[:len(want)] == want
    assert rows_json(pa.table({"s": ['say "hi"']})) is None
    assert rows_json(pa.table({"s": ["tab\there"]})) is None
    assert rows_json(pa.table({"f": [0.5]})) is None


@pytest.mark.parametrize("window,last_id,size", [
    ((100, 200), 0, 5000), ((100, 200), 150, 30), ((336770, 336776), 336770, 4),
    ((336770, 400000), 336774, 10), ((0, 7), 0, 7)])
def test_flights_window_serves_its_rows(window, last_id, size):
    """``fromId``/``toId`` (partitions of one export): rows ``fromId+1..toId``
    (1-based), the window's row count as ``total``, finished at its end."""
    low, high = window
    got = orjson.loads(answer({"dataset": "flights", "fromId": low, "toId": high}, last_id, size))
    high = min(high, flights().num_rows)
    start = max(last_id, low)
    rows = flights().slice(start, max(0, min(size, high - start))).to_pylist()
    assert got["data"]["rows"] == rows
    assert got["data"]["total"] == high - low
    assert got["data"]["runtimeContext"]["lastId"] == start + len(rows)
    assert got["data"]["status"] == ("finish" if start + len(rows) >= high else "continue")
