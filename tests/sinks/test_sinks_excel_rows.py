"""Case E1 of docs/fidelity.md: more rows than one Excel sheet holds.

One slow test (about a minute): 1,048,576 rows ``{"id": n}`` generated and
normalized in pages of 50,000, streamed into one xlsx writer, read back with
calamine (a Rust reader, row by row, without keeping the rows).
"""
from __future__ import annotations

from python_calamine import CalamineWorkbook
from sink_helpers import make_doc

from sinks.values import rows_to_batch
from sinks.writers import open_writer
from sinks.writers.xlsx_writer import MAX_DATA_ROWS

TOTAL = 1_048_576
PAGE = 50_000


def test_e1_rows_beyond_one_sheet_roll_over_to_a_second_sheet(tmp_path):
    # given 1,048,576 rows streamed page by page into an xlsx writer
    doc = make_doc("xlsx", sheetName="Orders")
    writer = None
    for start in range(1, TOTAL + 1, PAGE):
        rows = [{"id": n} for n in range(start, min(start + PAGE, TOTAL + 1))]
        batch, counts = rows_to_batch(rows, doc)
        writer = writer or open_writer(tmp_path, batch.schema, doc)
        writer.write_batch(batch)
    # when the file is closed
    report = writer.close()
    # then sheet 1 holds the header and 1,048,575 rows, sheet 2 the rest
    assert (report.rows, report.sheets) == (TOTAL, 2)
    assert report.quality["sheets"] == 2 and counts == {}
    wb = CalamineWorkbook.from_path(str(report.path))
    try:
        assert wb.sheet_names == ["Orders", "Orders (2)"]
        expected, per_sheet = 1, []
        for name in wb.sheet_names:
            rows = wb.get_sheet_by_name(name).iter_rows()
            assert next(rows) == ["id"]
            count = 0
            for (value,) in rows:
                assert value == expected, f"sheet {name}: got {value}, expected {expected}"
                expected += 1
                count += 1
            per_sheet.append(count)
    finally:
        wb.close()
    # and the ids over all sheets are exactly 1..1,048,576
    assert per_sheet == [MAX_DATA_ROWS, TOTAL - MAX_DATA_ROWS] == [1_048_575, 1]
    assert expected - 1 == TOTAL
